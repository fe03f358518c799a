"""Behaviour cloning: fit the policy to recorded actions by maximum likelihood.

The loss of a minibatch is the negative log-likelihood of every recorded action under the
recorded masks, averaged over all actors of all action types (categorical, global and
select-entity alike: each actor's choice is one sample). The network scores the recorded
actions exactly as PPO's update does (:meth:`~entityrl.nn.RogueNet.evaluate`), so masked
choices get probability zero and never enter the loss.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from entityrl.algorithms.common.checks import require_positive
from entityrl.algorithms.common.optimizer import FlatOptimizer
from entityrl.env.vec_obs import VecObs
from entityrl.nn.rogue_net import PolicyOutput, RogueNet
from entityrl.ragged import RaggedArray


@dataclass
class BCConfig:
    """Behaviour cloning from recordings (algo=bc), or alongside PPO (bc.strength)."""

    demos: list[str] = field(default_factory=list)
    """Recordings to learn from (entityrl.recording files of the config's environment)."""
    epochs: int = 100
    """Passes over the training episodes at most."""
    val_fraction: float = 0.1
    """Share of the episodes held out to measure the validation loss (at least one)."""
    patience: int = 5
    """Stop after this many epochs without a better validation loss; the best epoch's weights
    are kept."""
    max_episodes: int | None = None
    """Use at most this many episodes of the recordings (the first ones; null: all)."""
    eval_episodes: int = 32
    """Episodes played in the environment after every epoch to log the policy's return
    (0: none)."""
    eval_envs: int = 16
    """Environments played side by side for those episodes."""
    strength: float = 0.0
    """With algo=ppo: behaviour cloning on bc.demos alongside PPO (0: off). After every PPO
    update, bc.batches minibatch steps on the demonstrations with the learning rate scaled by
    this strength."""
    anneal_steps: int = 0
    """With algo=ppo and bc.strength: the strength falls linearly to 0 over this many
    environment steps (0: it stays constant)."""
    batches: int = 4
    """With algo=ppo and bc.strength: minibatches of optim.bs demonstration steps per
    iteration."""

    def __post_init__(self) -> None:
        require_positive(
            "bc",
            epochs=self.epochs,
            patience=self.patience,
            eval_envs=self.eval_envs,
            batches=self.batches,
        )
        if not 0 < self.val_fraction < 1:
            raise ValueError(f"bc.val_fraction must be in (0, 1), got {self.val_fraction}")
        if self.max_episodes is not None:
            require_positive("bc", max_episodes=self.max_episodes)
        for name in ("eval_episodes", "strength", "anneal_steps"):
            if getattr(self, name) < 0:
                raise ValueError(f"bc.{name} must be >= 0, got {getattr(self, name)}")


@dataclass
class BCTerms:
    """A minibatch's negative log-likelihood: summed over its actors (``total``, with
    gradients) and per action type (plain floats, for the log), and the actor counts."""

    total: torch.Tensor
    per_action: dict[str, float]
    actors: dict[str, int]


def bc_terms(out: PolicyOutput) -> BCTerms:
    """Negative log-likelihood of the actions ``out`` scored (see :meth:`RogueNet.evaluate`),
    summed over actors; divide by the number of actors for the mean."""
    total = out.values.new_zeros(())
    per_action: dict[str, torch.Tensor] = {}
    actors: dict[str, int] = {}
    for name, head in out.heads.items():
        nll = -head.logprob.sum()
        total = total + nll
        per_action[name] = nll.detach()
        actors[name] = head.logprob.numel()
    # One transfer from the device for all the statistics.
    sums = torch.stack(list(per_action.values())).tolist() if per_action else []
    return BCTerms(total, dict(zip(per_action, sums, strict=True)), actors)


def bc_step(
    net: RogueNet,
    optimizer: FlatOptimizer,
    obs: VecObs,
    actions: dict[str, RaggedArray],
    max_grad_norm: float,
) -> BCTerms:
    """One gradient step on the mean negative log-likelihood of ``actions`` taken in ``obs``."""
    terms = bc_terms(net.evaluate(obs, actions))
    optimizer.zero_grad()
    (terms.total / max(sum(terms.actors.values()), 1)).backward()
    optimizer.step(max_grad_norm)
    return terms
