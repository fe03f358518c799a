"""SAC's policy, read from the loop's RogueNet: masked categoricals and squashed Gaussians.

Discrete actions: an actor's logits are its head's scores (``net.choice_scores``); illegal
choices get probability exactly 0 and log-probability 0 (so ``p * log p`` and ``p * Q`` vanish
there), and an actor without any legal choice has no probability anywhere: it adds nothing to a
soft value, an entropy or a loss.

Continuous actions: a tanh-squashed Gaussian per actor (Haarnoja et al. 2018, appendix C),
rescaled to the action's bounds. Its mean comes from the policy network's own Gaussian head,
read as the *squashed* mean: the head's projection ``m`` (in units of the half range) is the
mean action, and the Gaussian before the squash is centred on ``atanh(m)``. So the policy the
loop saves acts as SAC's deterministic policy: the Gaussian head's mean, clipped to the bounds
by the environment, is ``tanh(atanh(m))``, the squashed mean (within :data:`EDGE` of the
bounds). The standard deviation depends on the state: a linear layer per continuous action on
the actor's embedding (:class:`StdHeads`, owned by SAC), which the saved RogueNet has no place
for; its Gaussian head's own standard deviation is set to the smallest it takes, so the saved
policy, sampled or not, takes the mean action (SAC's papers and Stable-Baselines3 evaluate
SAC's deterministic policy too).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional

from entityrl.env.spaces import ActionSpace
from entityrl.nn.heads import ChoiceScores
from entityrl.nn.rogue_net import _key

EDGE = 0.01
"""How close to a bound (in units of the half range) the mean action may come: ``atanh`` of the
mean is finite only inside the bounds, and its slope ``1 / (1 - m^2)`` stays at most 50."""
LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0
"""The state-dependent log standard deviation's range before the squash (CleanRL's SAC): wide
enough to go from a near-uniform squashed action to a precise one, narrow enough that the
entropy term cannot drive it to infinity or zero."""
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


@dataclass
class MaskedPolicy:
    """The distribution of every actor of one discrete action."""

    probs: torch.Tensor
    """(actors, choices): 0 for illegal choices and for actors without a legal choice."""
    logprobs: torch.Tensor
    """(actors, choices): log-probabilities of legal choices, 0 elsewhere."""
    legal: torch.Tensor
    """(actors, choices) bool."""

    @property
    def entropy(self) -> torch.Tensor:
        """(actors,): 0 for an actor with one legal choice or none."""
        return -(self.probs * self.logprobs).sum(1)

    def expected(self, values: torch.Tensor) -> torch.Tensor:
        """(actors,): each actor's expectation of per-choice ``values`` under its policy."""
        return (self.probs * values).sum(1)


def masked_policy(logits: ChoiceScores) -> MaskedPolicy:
    """The softmax over each actor's legal choices of ``logits``."""
    scores = logits.scores.float()
    legal = torch.ones_like(scores, dtype=torch.bool) if logits.legal is None else logits.legal
    # An actor without a legal choice would take a softmax over nothing (NaN): give it zeros
    # to normalize, and take its probabilities away below.
    usable = legal | ~legal.any(1, keepdim=True)
    logprobs = functional.log_softmax(scores.masked_fill(~usable, -torch.inf), dim=1)
    logprobs = logprobs.masked_fill(~legal, 0.0)
    return MaskedPolicy(logprobs.exp() * legal, logprobs, legal)


class StdHeads(nn.Module):
    """Per continuous action, the log standard deviation of every actor's Gaussian (before the
    squash) from its embedding."""

    def __init__(
        self, names: list[str], action_space: Mapping[str, ActionSpace], d_model: int
    ) -> None:
        super().__init__()
        self.heads = nn.ModuleDict(
            {_key(name): nn.Linear(d_model, len(action_space[name])) for name in names}
        )

    def log_std(self, name: str, embeddings: torch.Tensor) -> torch.Tensor:
        """(actors, dims) within [LOG_STD_MIN, LOG_STD_MAX]."""
        raw = torch.tanh(self.heads[_key(name)](embeddings))
        # tanh then rescale (as CleanRL): bounded with a gradient everywhere, unlike a clamp.
        return LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (raw + 1)


@dataclass
class Squashed:
    """Actions of a squashed Gaussian, in units of the half range (``[-1, 1]``)."""

    actions: torch.Tensor
    """(actors, dims)"""
    logprobs: torch.Tensor
    """(actors,): of the squashed actions (change of variables included)."""


def sample_squashed(
    mean_action: torch.Tensor, log_std: torch.Tensor, generator: torch.Generator | None
) -> Squashed:
    """Reparameterized samples of ``tanh(N(atanh(mean_action), exp(log_std)))``, with gradients
    to both (``mean_action`` is clamped within :data:`EDGE` of the bounds)."""
    mean = torch.atanh(mean_action.clamp(-1 + EDGE, 1 - EDGE))
    noise = torch.randn(mean.shape, device=mean.device, generator=generator)
    pre = mean + log_std.exp() * noise
    # log(1 - tanh(u)^2), written to stay finite where tanh(u) rounds to +-1.
    log_jacobian = 2 * (math.log(2) - pre - functional.softplus(-2 * pre))
    gaussian = -0.5 * noise * noise - log_std - _HALF_LOG_2PI
    return Squashed(torch.tanh(pre), (gaussian - log_jacobian).sum(1))


def outside(mean_action: torch.Tensor) -> torch.Tensor:
    """(actors,): how far each mean action lies beyond :data:`EDGE` of the bounds, squared:
    there the clamp passes no gradient, so a penalty on it brings the mean back."""
    bound = 1 - EDGE
    return (mean_action - mean_action.clamp(-bound, bound)).square().sum(1)
