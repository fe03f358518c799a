"""The entities of one batch row, indexed the way actions refer to them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from entityrl.env.spaces import ObsSpace
from entityrl.env.vec_obs import VecObs

ROW = 0
"""Play uses a batch of one environment: everything below reads its only row."""


def format_value(value: float) -> str:
    """A feature value as a person reads it: whole numbers exactly (``3``, not ``3.0``), others
    to four significant digits (``-0.0543``) so that tables stay narrow."""
    value = float(value)
    if value.is_integer():
        return str(int(value))
    return f"{value:.4g}"


@dataclass(frozen=True)
class EntityView:
    """One entity: its index within the row, its type, its feature values, and whether the
    policy sees it."""

    index: int
    type_name: str
    features: tuple[float, ...]
    hidden: bool


class RowEntities:
    """All entities of row 0 of a :class:`VecObs`, in the row's index order (ObsSpace order)."""

    def __init__(self, obs: VecObs, obs_space: ObsSpace) -> None:
        self.obs_space = obs_space
        self.by_type: dict[str, list[EntityView]] = {}
        self.entities: list[EntityView] = []
        for type_name in obs_space.entities:
            values = obs.features[type_name][ROW]
            hidden = np.zeros(values.shape[0], dtype=np.bool_)
            if type_name in obs.visible:
                hidden = ~obs.visible[type_name][ROW][:, 0]
            views = [
                EntityView(len(self.entities) + i, type_name, tuple(row.tolist()), bool(h))
                for i, (row, h) in enumerate(zip(values, hidden, strict=True))
            ]
            self.by_type[type_name] = views
            self.entities.extend(views)
        self.global_features = obs.global_features[ROW].tolist()

    def feature_names(self, type_name: str) -> tuple[str, ...]:
        return tuple(self.obs_space.entities[type_name].features)

    def describe(self, index: int) -> str:
        """``Robot #3 (x=1 y=2)``; the global pseudo-entity (index = entity count) is ``global``."""
        if index == len(self.entities):
            return "global"
        entity = self.entities[index]
        details = [
            f"{name}={format_value(value)}"
            for name, value in zip(
                self.feature_names(entity.type_name), entity.features, strict=True
            )
        ]
        if entity.hidden:
            details.append("hidden")
        suffix = f" ({' '.join(details)})" if details else ""
        return f"{entity.type_name} #{index}{suffix}"
