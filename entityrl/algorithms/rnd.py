"""Random network distillation (RND): an exploration bonus for sparse rewards.

Burda et al. (2018): a fixed, randomly initialized *target* network maps each observation to
an embedding, and a *predictor* network is trained to reproduce it on the observations the
agent visits. Its error is small on observations like those seen often and large on new ones,
so the error on the next observation is paid as an intrinsic reward.

Here both networks read entity observations the way RogueNet's embedding does: each entity's
features (with the row's global features appended) are normalized by running statistics
(clipped to +-5, as in the paper, shared by both networks), embedded per entity type, averaged
over the row's entities and mapped to one vector per row. The predictor has one more hidden
layer than the target, so that it can fit it.

The intrinsic reward is centred on its mean over the rollout, divided by the running standard
deviation of its own discounted return (the paper's normalization;
:class:`~entityrl.algorithms.common.reward_scale.RewardScaler` with episode ends ignored, as the intrinsic
return does not stop at them), scaled by ``rnd.coef`` and added to the (possibly
``ppo.norm_reward``-scaled) environment reward: one value head learns the sum. The centring
replaces the paper's second, non-episodic value head: with episodic returns a bonus that is
positive on every step pays for long episodes, and on Corridor policies learned to stop short
of the goal once they had found it (seed 1 fell from 1.0 to 0.0 within 40,960 steps).
The predictor is trained after each PPO update, on the rollout's observations, with its own
optimizer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from entityrl.algorithms.common.checks import require_positive
from entityrl.algorithms.common.optimizer import FlatOptimizer, OptimConfig, adam
from entityrl.algorithms.common.reduce import Reducer
from entityrl.algorithms.common.reward_scale import RewardScaler
from entityrl.env.spaces import ObsSpace
from entityrl.env.vec_obs import VecObs
from entityrl.nn.input_norm import Combine, RunningNorm


@dataclass
class RNDConfig:
    """Random network distillation (an exploration bonus; off while ``coef`` is 0)."""

    coef: float = 0.0
    """Weight of the intrinsic reward (in units of its running return scale) added to the
    environment's reward; 0 turns RND off."""
    gamma: float = 0.99
    """Discount of the intrinsic return whose running scale normalizes the intrinsic reward."""
    d_model: int = 64
    """Width of the target's and predictor's embeddings and output."""
    lr: float = 0.001
    """Learning rate of the predictor."""
    epochs: int = 1
    """Passes of the predictor over each rollout (in minibatches of optim.bs rows)."""

    def __post_init__(self) -> None:
        if self.coef < 0:
            raise ValueError(f"rnd.coef must be >= 0, got {self.coef}")
        if not 0 <= self.gamma <= 1:
            raise ValueError(f"rnd.gamma must be in [0, 1], got {self.gamma}")
        require_positive("rnd", d_model=self.d_model, lr=self.lr, epochs=self.epochs)

    @property
    def enabled(self) -> bool:
        return self.coef > 0


class RowEncoder(nn.Module):
    """One vector per row of a batch: per-type entity embeddings averaged over the row."""

    def __init__(self, space: ObsSpace, d_model: int, hidden_layers: int) -> None:
        super().__init__()
        n_global = len(space.global_features)
        self.embed = nn.ModuleDict(
            {
                f"type_{i}": nn.Sequential(
                    nn.Linear(len(entity.features) + n_global, d_model), nn.ReLU()
                )
                for i, entity in enumerate(space.entities.values())
            }
        )
        # Rows without entities are described by their global features alone.
        self.embed_global = nn.Linear(n_global, d_model) if n_global else None
        layers: list[nn.Module] = []
        for _ in range(hidden_layers):
            layers += [nn.Linear(d_model, d_model), nn.ReLU()]
        self.head = nn.Sequential(*layers, nn.Linear(d_model, d_model))

    def forward(
        self,
        entities: list[torch.Tensor],
        rows: list[torch.Tensor],
        normalized_global: torch.Tensor,
    ) -> torch.Tensor:
        num_rows = normalized_global.shape[0]
        width = self.head[-1].out_features
        total = normalized_global.new_zeros(num_rows, width)
        count = normalized_global.new_zeros(num_rows, 1)
        for embed, feats, row in zip(self.embed.values(), entities, rows, strict=True):
            total.index_add_(0, row, embed(feats))
            count.index_add_(0, row, feats.new_ones(row.shape[0], 1))
        pooled = total / count.clamp(min=1)
        if self.embed_global is not None:
            pooled = pooled + self.embed_global(normalized_global)
        return self.head(pooled)


class RNDModel(nn.Module):
    """The input normalizers, the fixed target and the trained predictor."""

    def __init__(self, space: ObsSpace, d_model: int) -> None:
        super().__init__()
        n_global = len(space.global_features)
        self.names = list(space.entities)
        self.norms = nn.ModuleDict(
            {
                f"type_{i}": RunningNorm(len(entity.features) + n_global)
                for i, entity in enumerate(space.entities.values())
            }
        )
        self.global_norm = RunningNorm(n_global)
        self.target = RowEncoder(space, d_model, hidden_layers=1)
        self.predictor = RowEncoder(space, d_model, hidden_layers=2)
        self.target.requires_grad_(False)

    def _inputs(self, obs: VecObs) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Per entity type, each entity's features with its row's global features, and its
        row."""
        entities, rows = [], []
        globals_ = torch.from_numpy(obs.global_features)
        for name in self.names:
            feats = obs.features[name]
            row = torch.from_numpy(feats.row_index())
            entities.append(torch.cat([torch.from_numpy(feats.data), globals_[row]], dim=1))
            rows.append(row)
        return entities, rows

    def errors(self, obs: VecObs) -> torch.Tensor:
        """Per row, the predictor's mean squared error (with gradients for the predictor)."""
        entities, rows = self._inputs(obs)
        normalized = [norm(x) for norm, x in zip(self.norms.values(), entities, strict=True)]
        normalized_global = self.global_norm(torch.from_numpy(obs.global_features))
        with torch.no_grad():
            target = self.target(normalized, rows, normalized_global)
        predicted = self.predictor(normalized, rows, normalized_global)
        return (predicted - target).pow(2).mean(dim=1)

    def update_normalizers(self, obs: VecObs, combine: Combine | None) -> None:
        entities, _ = self._inputs(obs)
        for norm, x in zip(self.norms.values(), entities, strict=True):
            norm.update(x, combine)
        self.global_norm.update(torch.from_numpy(obs.global_features), combine)


class RND:
    """The exploration bonus of one training process: computes intrinsic rewards for the
    sampler and trains the predictor after each update."""

    def __init__(
        self,
        space: ObsSpace,
        config: RNDConfig,
        optim: OptimConfig,
        num_envs: int,
        reducer: Reducer | None = None,
    ) -> None:
        self.config = config
        self.optim = optim
        self.reducer = reducer or Reducer()
        self.combine = self.reducer.sum if self.reducer.world_size > 1 else None
        self.model = RNDModel(space, config.d_model)
        self.optimizer: FlatOptimizer = adam(
            self.model.predictor,
            OptimConfig(lr=config.lr, eps=optim.eps, max_grad_norm=optim.max_grad_norm),
        )
        self.scaler = RewardScaler(num_envs, config.gamma)
        self.last_mean = 0.0  # the latest rollout's mean raw intrinsic reward (for the log)

    @torch.no_grad()
    def bonus(self, obs: VecObs, after: VecObs) -> npt.NDArray[np.float32]:
        """The intrinsic rewards of a rollout, (steps, envs): step ``t``'s is the novelty of
        the observation that followed it. ``obs``: the rollout's rows in (step, env) order;
        ``after``: the observation after its last step."""
        envs = after.num_rows
        novelty = torch.cat([self.model.errors(obs), self.model.errors(after)]).numpy()
        intrinsic = novelty[envs:].reshape(-1, envs)
        count, total = self.reducer.sum([intrinsic.size, intrinsic.sum(dtype=np.float64)])
        self.last_mean = total / count
        # Centred, so that only the relatively new pays, not lasting longer (module docs).
        centred = (intrinsic - self.last_mean).astype(np.float32)
        never_done = np.zeros(intrinsic.shape, dtype=np.bool_)
        return self.config.coef * self.scaler(centred, never_done, self.combine)

    def update(self, obs: VecObs, rng: np.random.Generator) -> float:
        """Train the predictor on the rollout's observations (``rnd.epochs`` passes of
        minibatches of ``optim.bs`` rows), then take them into the input statistics; returns
        the mean loss."""
        bs = self.optim.bs // self.reducer.world_size
        losses = []
        for _ in range(self.config.epochs):
            order = rng.permutation(obs.num_rows)
            for start in range(0, obs.num_rows, bs):
                rows = order[start : start + bs]
                (n_rows,) = self.reducer.sum([rows.shape[0]])
                self.optimizer.zero_grad()
                loss = self.model.errors(obs.take(rows)).sum() / n_rows
                loss.backward()
                self.optimizer.step(self.optim.max_grad_norm, self.reducer)
                losses.append(float(self.reducer.sum([loss.item()])[0]))
        self.model.update_normalizers(obs, self.combine)
        return float(np.mean(losses))

    def state_dict(self) -> dict[str, Any]:
        """Networks and input statistics, optimizer, and the return scale (this process's)."""
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "reward_scale": self.scaler.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scaler.load_state_dict(state["reward_scale"])
