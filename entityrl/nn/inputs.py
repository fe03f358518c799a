"""A batch's features as tensors: the one place where observations cross from numpy to torch.

Environments and batching are numpy on the CPU; the network runs on its device. Everything the
embedding reads from a :class:`~entityrl.env.VecObs` is gathered here (zero-copy views of the
numpy arrays), so that moving a batch to another device is one explicit step
(:meth:`EntityInputs.to`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from entityrl.env.vec_obs import VecObs


@dataclass
class EntityInputs:
    """Per entity type its raw features, and what relates entities to rows."""

    num_rows: int
    features: dict[str, torch.Tensor]  # (entities, features) float32, per type
    global_features: torch.Tensor  # (rows, global features) float32
    # Per type, the row of each entity; only for the types asked for (see from_obs).
    entity_rows: dict[str, torch.Tensor]
    # Per type asked for: (the index of each row's first entity of that type, the rows that
    # have one).
    first_entity: dict[str, tuple[torch.Tensor, torch.Tensor]]
    # (rows, goal features) float32: the goal signal, split off the global features where the
    # network conditions on it (see entityrl.nn.conditioning); None otherwise.
    goal: torch.Tensor | None = None
    # Per image of the space, (rows, height, width, channels) as the environment gave them.
    images: dict[str, torch.Tensor] = field(default_factory=dict)

    @staticmethod
    def from_obs(
        obs: VecObs,
        entity_names: Sequence[str],
        rows_of: Sequence[str] = (),
        first_of: Sequence[str] = (),
        goal_columns: Sequence[int] = (),
    ) -> EntityInputs:
        """The features of ``obs`` (types in ``entity_names``), the entity rows of the types
        ``rows_of`` and the first entities of the types ``first_of``; the global features at
        ``goal_columns`` become the goal, the others stay global features."""
        first_entity = {}
        for name in first_of:
            ragged = obs.features[name]
            present = ragged.lengths > 0
            first_entity[name] = (
                torch.from_numpy(ragged.offsets[:-1][present]),
                torch.from_numpy(np.flatnonzero(present)),
            )
        global_features, goal = obs.global_features, None
        if goal_columns:
            plain = np.setdiff1d(np.arange(global_features.shape[1]), goal_columns)
            goal = torch.from_numpy(global_features[:, list(goal_columns)])
            global_features = global_features[:, plain]
        return EntityInputs(
            num_rows=obs.num_rows,
            features={name: torch.from_numpy(obs.features[name].data) for name in entity_names},
            global_features=torch.from_numpy(global_features),
            entity_rows={
                name: torch.from_numpy(obs.features[name].row_index()) for name in rows_of
            },
            first_entity=first_entity,
            goal=goal,
            images={name: torch.from_numpy(pixels) for name, pixels in obs.images.items()},
        )

    def to(self, device: torch.device) -> EntityInputs:
        """The same inputs on ``device`` (itself if they are there already)."""
        if self.global_features.device == device:
            return self
        return EntityInputs(
            num_rows=self.num_rows,
            features={k: v.to(device) for k, v in self.features.items()},
            global_features=self.global_features.to(device),
            entity_rows={k: v.to(device) for k, v in self.entity_rows.items()},
            first_entity={
                k: (first.to(device), rows.to(device))
                for k, (first, rows) in self.first_entity.items()
            },
            goal=None if self.goal is None else self.goal.to(device),
            images={k: v.to(device) for k, v in self.images.items()},
        )
