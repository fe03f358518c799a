"""MA-POCA's group critic: a centralized value and a per-agent counterfactual baseline.

In a cooperative game every player of a game is one agent of its group. The critic encodes
each agent's observation (which, through entities hidden from the policy, may show the whole
group) with a RogueNet of its own, then attends over the agents *in play*:

- the group value ``V(s)`` attends over every agent in play; it estimates the group's return;
- agent ``i``'s baseline ``b_i(s, a_-i)`` attends over agent ``i``'s observation and the other
  agents' observations together with the actions they took; the policy of agent ``i`` learns
  from ``G - b_i``, the part of the group's return its own action made.

The return ``G`` is the group's (its shared reward plus the mean individual reward of the
agents in play), so an agent that leaves mid-game is still credited, at its last step, with
what the group earns after it left: no absorbing states, the agent simply drops out of the
attention. Every end of a game is final here (a time limit too): put the time left in the
observation when a game is cut off by one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from entityrl.algorithms.common.gae import gae
from entityrl.env.actions import kind_of
from entityrl.env.spaces import ActionSpace, ObsSpace
from entityrl.env.vec_obs import VecObs
from entityrl.nn.rogue_net import RogueNet, RogueNetConfig
from entityrl.ragged import RaggedArray


@dataclass
class POCAConfig:
    """The group critic of algo=poca."""

    d_model: int = 32
    """Width of the critic (a RogueNet encoder of its own, then attention over agents)."""
    n_layer: int = 1
    """Transformer layers of the critic's observation encoder."""
    n_head: int = 2
    """Attention heads over the agents."""
    lr: float = 0.001
    """Learning rate of the critic."""
    epochs: int = 6
    """Passes over each rollout's group steps (the baselines must keep up with the policy:
    in PackHunt 6 passes at 0.001 gave 1.42 / 1.24 / 1.36 captures on seeds 1-3 where 3 at
    0.0003 gave 1.24 / 0.97 / 1.11)."""
    minibatches: int = 4
    """Minibatches per pass."""

    def __post_init__(self) -> None:
        for name in ("d_model", "n_head", "lr", "epochs", "minibatches"):
            if getattr(self, name) <= 0:
                raise ValueError(f"poca.{name} must be > 0, got {getattr(self, name)}")
        if self.n_layer < 0:
            raise ValueError(f"poca.n_layer must be >= 0, got {self.n_layer}")
        if self.d_model % self.n_head:
            raise ValueError(
                f"poca.d_model ({self.d_model}) must be a multiple of poca.n_head ({self.n_head})"
            )


class GroupCritic(nn.Module):
    """The centralized value and the counterfactual baselines of groups of ``players``
    agents (batches hold whole groups: ``players`` consecutive rows each)."""

    def __init__(
        self,
        obs_space: ObsSpace,
        action_space: dict[str, ActionSpace],
        players: int,
        config: POCAConfig,
    ) -> None:
        super().__init__()
        for name, space in action_space.items():
            if not hasattr(space, "choices"):
                raise ValueError(
                    f"algo=poca: action {name!r} is {type(space).__name__}; the baseline "
                    "embeds categorical actions only"
                )
        self.players = players
        self.kinds = {name: kind_of(space) for name, space in action_space.items()}
        self.encoder = RogueNet(
            obs_space,
            action_space,
            RogueNetConfig(d_model=config.d_model, n_layer=config.n_layer, n_head=config.n_head),
        )
        d = config.d_model
        self.actions = nn.ModuleDict(
            {name: nn.Embedding(len(space), d) for name, space in action_space.items()}  # type: ignore[arg-type]
        )
        self.attention = nn.MultiheadAttention(d, config.n_head, batch_first=True)
        self.value_out = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, 1))
        self.baseline_out = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, 1))

    @property
    def device(self) -> torch.device:
        return self.attention.in_proj_weight.device

    def _pool(self, tokens: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
        """Attention over the tokens of agents ``present`` (batch, agents), mean-pooled."""
        out, _ = self.attention(tokens, tokens, tokens, key_padding_mask=~present)
        weights = present.unsqueeze(-1).float()
        return (out * weights).sum(1) / weights.sum(1).clamp(min=1.0)

    def _action_embeddings(self, actions: dict[str, RaggedArray], rows: int) -> torch.Tensor:
        """Per row, the mean embedding of its actors' choices, summed over actions."""
        device = self.device
        total = torch.zeros(rows, self.attention.embed_dim, device=device)
        for name, chosen in actions.items():
            if not chosen.items:
                continue
            rows_of = torch.from_numpy(chosen.row_index()).to(device)
            choices = torch.from_numpy(chosen.data[:, 0].astype(np.int64)).to(device)
            sums = torch.zeros_like(total).index_add_(0, rows_of, self.actions[name](choices))
            counts = torch.from_numpy(chosen.lengths).to(device).clamp(min=1).unsqueeze(1)
            total = total + sums / counts
        return total

    def forward(
        self, obs: VecObs, actions: dict[str, RaggedArray], present: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Group values (groups,) and baselines (groups, players) of whole groups of rows.
        ``present`` (groups, players): the agent is in play."""
        present = present.to(self.device)
        groups, players = present.shape
        h = self.encoder.embed(obs).reshape(groups, players, -1)
        a = self._action_embeddings(actions, obs.num_rows).reshape(groups, players, -1)
        values = self.value_out(self._pool(h, present)).squeeze(-1)
        # Agent i's view: its own observation, and every other agent's with its action.
        others = 1.0 - torch.eye(players, device=self.device).unsqueeze(-1)  # (i, j, 1)
        tokens = h.unsqueeze(1) + a.unsqueeze(1) * others  # (groups, i, j, d)
        seen = present.unsqueeze(1).expand(groups, players, players)
        pooled = self._pool(
            tokens.reshape(groups * players, players, -1), seen.reshape(groups * players, -1)
        )
        baselines = self.baseline_out(pooled).reshape(groups, players)
        return values, baselines


def group_returns(
    rewards: npt.NDArray[np.float32],
    values: npt.NDArray[np.float32],
    game_over: npt.NDArray[np.bool_],
    next_values: npt.NDArray[np.float32],
    gamma: float,
    gae_lambda: float,
    ratios: npt.NDArray[np.float32] | None = None,
) -> npt.NDArray[np.float32]:
    """The groups' lambda-returns (steps, groups) from their rewards and values (a game's end
    is final); with ``ratios`` (steps, groups), the groups' truncated importance ratios of a
    lagged rollout, V-trace's targets (:func:`~entityrl.algorithms.common.gae.gae`)."""
    _, returns = gae(rewards, values, game_over, next_values, gamma, gae_lambda, ratios)
    return returns


def group_rewards(
    rewards: npt.NDArray[np.float32],
    shared: npt.NDArray[np.float32],
    active: npt.NDArray[np.bool_],
    players: int,
) -> npt.NDArray[np.float32]:
    """(steps, groups): each group's shared reward plus the mean individual reward of its
    agents in play, from per-row (steps, rows) rewards (individual plus shared, while in play),
    shared rewards and in-play flags."""
    steps, rows = rewards.shape
    individual = np.where(active, rewards - shared, 0.0).reshape(steps, rows // players, players)
    in_play = active.reshape(steps, rows // players, players).sum(-1)
    mean_individual = individual.sum(-1) / np.maximum(in_play, 1)
    return (shared.reshape(steps, -1, players)[..., 0] + mean_individual).astype(np.float32)
