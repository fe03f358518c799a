"""SAC's soft Q-functions over entity observations, one value per actor.

A :class:`Critic` is a RogueNet built like the policy's: its discrete heads' scores are read as
Q-values, one per choice of every actor (so masks, select-entity candidates and global actors
come as they do for the policy), and for each continuous action an MLP maps an actor's
embedding and its action (in units of the half range, ``[-1, 1]``) to that actor's Q-value.
:class:`TwinCritic` holds the two SAC trains (Fujimoto et al. 2018's clipped double Q).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import nn

from entityrl.algorithms.common.checks import continuous_actions
from entityrl.env.spaces import ActionSpace, ObsSpace
from entityrl.env.vec_obs import VecObs
from entityrl.nn.heads import ChoiceScores
from entityrl.nn.layout import ActorInputs
from entityrl.nn.rogue_net import PreparedBatch, RogueNet, RogueNetConfig, _key
from entityrl.nn.transformer import attention_context


@dataclass
class Encoded:
    """A batch through a RogueNet's encoder: every entity's embedding and the batch's layout
    (each head's actors among the embeddings)."""

    x: torch.Tensor
    """(slots, d_model): every entity's (and the global token's) embedding."""
    batch: PreparedBatch


def encode(net: RogueNet, obs: VecObs) -> Encoded:
    """``obs`` through ``net``'s encoder, with gradients (the heads are applied by the caller)."""
    batch = net.prepare(obs).to(net.device)
    return Encoded(net.encoder(batch, attention_context(batch.layout)), batch)


def actor_embeddings(encoded: Encoded, name: str) -> torch.Tensor:
    """(actors, d_model) float32: the embeddings of the actors of the per-actor action
    ``name`` (a categorical or continuous one), in the order of its mask."""
    inputs: ActorInputs = encoded.batch.heads[name]
    x = encoded.x if inputs.actors is None else encoded.x.index_select(0, inputs.actors)
    return x.float()


class Critic(nn.Module):
    """One soft Q-function: Q-values per choice of every actor's discrete actions, and per
    continuous action ``Q(s, a_i)`` of every actor for a given action."""

    def __init__(
        self,
        obs_space: ObsSpace,
        action_space: Mapping[str, ActionSpace],
        config: RogueNetConfig,
        device: torch.device,
        hidden: int,
    ) -> None:
        super().__init__()
        self.net = RogueNet(obs_space, action_space, config, device)
        d_model = config.d_model
        self.continuous = nn.ModuleDict(
            {
                _key(name): nn.Sequential(
                    nn.Linear(d_model + len(action_space[name]), hidden),
                    nn.ReLU(),
                    nn.Linear(hidden, hidden),
                    nn.ReLU(),
                    nn.Linear(hidden, 1),
                )
                for name in continuous_actions(action_space)
            }
        )
        self.continuous.to(device)

    def encode(self, obs: VecObs) -> Encoded:
        return encode(self.net, obs)

    def choice_values(self, encoded: Encoded, name: str) -> ChoiceScores:
        """Every choice's Q-value for every actor of the discrete action ``name``."""
        return self.net.heads[_key(name)].scores(encoded.x, encoded.batch.heads[name])

    def action_values(self, encoded: Encoded, name: str, actions: torch.Tensor) -> torch.Tensor:
        """(actors,): each actor's Q-value for its ``actions`` (actors, dims) of the continuous
        action ``name``, in units of the half range."""
        inputs = torch.cat([actor_embeddings(encoded, name), actions], dim=1)
        return self.continuous[_key(name)](inputs).squeeze(1)


class TwinCritic(nn.Module):
    """Two critics of the same build, initialized apart; targets take the smaller value."""

    def __init__(self, q1: Critic, q2: Critic) -> None:
        super().__init__()
        self.q1, self.q2 = q1, q2

    def encode(self, obs: VecObs) -> Pair:
        """``obs`` through both critics' encoders."""
        return Pair(self.q1.encode(obs), self.q2.encode(obs))

    def choice_values(self, encoded: Pair, name: str) -> tuple[torch.Tensor, torch.Tensor]:
        """Both critics' (actors, choices) Q-values of the discrete action ``name``."""
        return (
            self.q1.choice_values(encoded.q1, name).scores,
            self.q2.choice_values(encoded.q2, name).scores,
        )

    def action_values(
        self, encoded: Pair, name: str, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Both critics' (actors,) Q-values of ``actions`` of the continuous action ``name``."""
        return (
            self.q1.action_values(encoded.q1, name, actions),
            self.q2.action_values(encoded.q2, name, actions),
        )

    def critics(self) -> tuple[Critic, Critic]:
        return self.q1, self.q2


@dataclass
class Pair:
    """A batch through the encoders of both critics."""

    q1: Encoded
    q2: Encoded

    def detached(self) -> Pair:
        """The same embeddings without gradients (the critics judge, they do not learn)."""
        return Pair(
            Encoded(self.q1.x.detach(), self.q1.batch), Encoded(self.q2.x.detach(), self.q2.batch)
        )
