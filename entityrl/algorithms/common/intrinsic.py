"""What exploration bonuses share: entity observations read as one vector per row, and the
scaling of a raw novelty signal into a reward (RND: :mod:`entityrl.algorithms.rnd`; ICM:
:mod:`entityrl.algorithms.icm`).

Rows are read the way RogueNet's embedding reads them: each entity's features (with the row's
global features appended) are normalized by running statistics (clipped to +-5, as in the RND
paper), embedded per entity type, averaged over the row's entities and mapped to one vector.

The raw novelty of a rollout is centred on its mean, divided by the running standard deviation
of its own discounted return (episode ends ignored: the intrinsic return does not stop at
them) and weighted by the bonus's ``coef``. Centring stands in for a second, non-episodic
value head: with episodic returns a bonus that is positive on every step pays for long
episodes (on Corridor, RND policies learned to stop short of the goal once they had found it).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from entityrl.algorithms.common.checks import require_positive
from entityrl.algorithms.common.optimizer import FlatOptimizer
from entityrl.algorithms.common.reduce import Reducer
from entityrl.algorithms.common.reward_scale import RewardScaler
from entityrl.algorithms.common.rollout import Rollout
from entityrl.env.spaces import ObsSpace
from entityrl.env.vec_obs import VecObs
from entityrl.nn.input_norm import Combine, RunningNorm


@dataclass
class BonusConfig:
    """The settings every exploration bonus has (its config section adds its own)."""

    section: ClassVar[str]
    coef: float = 0.0
    """Weight of the intrinsic reward (in units of its running return scale) added to the
    environment's reward; 0 turns the bonus off."""
    gamma: float = 0.99
    """Discount of the intrinsic return whose running scale normalizes the intrinsic reward."""
    d_model: int = 64
    """Width of the bonus's networks."""
    lr: float = 0.001
    """Learning rate of the bonus's trained networks."""
    epochs: int = 1
    """Passes over each rollout (in minibatches of optim.bs rows)."""

    def __post_init__(self) -> None:
        if self.coef < 0:
            raise ValueError(f"{self.section}.coef must be >= 0, got {self.coef}")
        if not 0 <= self.gamma <= 1:
            raise ValueError(f"{self.section}.gamma must be in [0, 1], got {self.gamma}")
        require_positive(self.section, d_model=self.d_model, lr=self.lr, epochs=self.epochs)

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

    def forward(self, rows: NormalizedRows) -> torch.Tensor:
        width = self.head[-1].out_features
        total = rows.globals_.new_zeros(rows.count, width)
        count = rows.globals_.new_zeros(rows.count, 1)
        for embed, feats, row in zip(self.embed.values(), rows.entities, rows.rows, strict=True):
            total.index_add_(0, row, embed(feats))
            count.index_add_(0, row, feats.new_ones(row.shape[0], 1))
        pooled = total / count.clamp(min=1)
        if self.embed_global is not None:
            pooled = pooled + self.embed_global(rows.globals_)
        return self.head(pooled)


class NormalizedRows:
    """A batch's normalized inputs: per entity type, each entity's features with its row's
    global features, and its row; the normalized global features."""

    def __init__(
        self, entities: list[torch.Tensor], rows: list[torch.Tensor], globals_: torch.Tensor
    ) -> None:
        self.entities, self.rows, self.globals_ = entities, rows, globals_

    @property
    def count(self) -> int:
        return self.globals_.shape[0]


class RowInputs(nn.Module):
    """The running input statistics of a bonus's networks: the base of its model, which adds
    the networks (all saved together)."""

    def __init__(self, space: ObsSpace) -> None:
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

    def _raw(self, obs: VecObs) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        entities, rows = [], []
        globals_ = torch.from_numpy(obs.global_features)
        for name in self.names:
            feats = obs.features[name]
            row = torch.from_numpy(feats.row_index())
            entities.append(torch.cat([torch.from_numpy(feats.data), globals_[row]], dim=1))
            rows.append(row)
        return entities, rows

    def normalized(self, obs: VecObs) -> NormalizedRows:
        entities, rows = self._raw(obs)
        normalized = [norm(x) for norm, x in zip(self.norms.values(), entities, strict=True)]
        return NormalizedRows(
            normalized, rows, self.global_norm(torch.from_numpy(obs.global_features))
        )

    def update_normalizers(self, obs: VecObs, combine: Combine | None) -> None:
        """Take ``obs`` into the statistics (``combine`` sums over processes)."""
        entities, _ = self._raw(obs)
        for norm, x in zip(self.norms.values(), entities, strict=True):
            norm.update(x, combine)
        self.global_norm.update(torch.from_numpy(obs.global_features), combine)


class BonusScale:
    """Raw novelty (steps, envs) into a reward: centred on the rollout's mean, divided by the
    running scale of its discounted return, times ``coef``."""

    def __init__(self, coef: float, num_envs: int, gamma: float, reducer: Reducer) -> None:
        self.coef = coef
        self.reducer = reducer
        self.combine = reducer.sum if reducer.world_size > 1 else None
        self.scaler = RewardScaler(num_envs, gamma)
        self.last_mean = 0.0  # the latest rollout's mean raw novelty (for the log)

    def __call__(
        self, novelty: npt.NDArray[np.float32], counted: npt.NDArray[np.bool_] | None = None
    ) -> npt.NDArray[np.float32]:
        """``counted`` (steps, envs): the steps whose novelty means something (None: all);
        the others earn no bonus."""
        counted = np.ones(novelty.shape, np.bool_) if counted is None else counted
        count, total = self.reducer.sum(
            [int(counted.sum()), novelty[counted].sum(dtype=np.float64)]
        )
        self.last_mean = total / max(count, 1)
        centred = np.where(counted, novelty - self.last_mean, 0.0).astype(np.float32)
        never_done = np.zeros(novelty.shape, dtype=np.bool_)
        return self.coef * self.scaler(centred, never_done, self.combine)

    def state_dict(self) -> dict[str, Any]:
        return self.scaler.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.scaler.load_state_dict(state)


class ExplorationBonus(ABC):
    """What the policy's algorithm asks of a bonus (RND, ICM): the bonus of a rollout's steps,
    training on the rollout after the policy's update, and its state for checkpoints."""

    def __init__(self, model: RowInputs, optimizer: FlatOptimizer, scale: BonusScale) -> None:
        self.model, self.optimizer, self.scale = model, optimizer, scale

    @abstractmethod
    def rollout_bonus(self, rollout: Rollout) -> npt.NDArray[np.float32]:
        """The bonus of each of a rollout's steps, (steps, envs)."""

    @abstractmethod
    def learn(self, rollout: Rollout, rng: np.random.Generator) -> dict[str, float]:
        """Train on a rollout (after the policy's update); the metrics to log."""

    def state_dict(self) -> dict[str, Any]:
        """Networks and input statistics, optimizer, and the return scale (this process's)."""
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "reward_scale": self.scale.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scale.load_state_dict(state["reward_scale"])
