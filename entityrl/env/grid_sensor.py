"""A grid sensor: entities rasterized into an image, as ML-Agents' GridSensor sees the world.

The sensor lays a grid of ``height x width`` cells of ``cell_size`` over the plane of two
position features, either fixed (cell ``(0, 0)`` covers ``[0, cell_size)`` on both axes) or
centred on the first entity of one type (the agent's own cell is ``(height // 2, width // 2)``).
Every entity of the listed types inside the grid marks its cell: one channel per type says an
entity of that type is there (1, else 0), and one more channel per listed feature of the type
holds that feature's value (the last such entity's, where several share a cell). Row ``i`` of
the image holds the cells whose ``y`` falls in the ``i``-th band, column ``j`` those whose ``x``
falls in the ``j``-th.

The result is a float32 image for :attr:`ObsSpace.images <entityrl.env.spaces.ObsSpace>`: an
environment declares :attr:`GridSensor.image` and adds ``sensor(observation)`` to the
observation's ``images``; the network then encodes it with its CNN (docs/images.md). Feature
channels must hold values in [0, 1], as every float32 image (the validator checks).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from entityrl.env.observation import Observation
from entityrl.env.spaces import Image, ObsSpace

__all__ = ["GridSensor"]


class GridSensor:
    """Rasterizes the entities of an observation of ``obs_space`` into an image.

    ``channels`` maps each entity type drawn to the features it draws beside its presence
    channel (an empty list: presence only); ``position`` names the two features (x, y) every
    drawn type (and ``center``) has; ``center``: the entity type whose first entity sits in
    the middle cell (None: the grid is fixed, from the origin on).
    """

    def __init__(
        self,
        obs_space: ObsSpace,
        channels: Mapping[str, Sequence[str]],
        size: tuple[int, int],
        cell_size: float = 1.0,
        position: tuple[str, str] = ("x", "y"),
        center: str | None = None,
    ) -> None:
        height, width = size
        if height < 1 or width < 1:
            raise ValueError(f"GridSensor size must be (height, width) >= 1, got {size}")
        if not cell_size > 0:
            raise ValueError(f"GridSensor cell_size must be > 0, got {cell_size}")
        if not channels:
            raise ValueError("GridSensor channels: expected at least one entity type, got none")
        self.size = (int(height), int(width))
        self.cell_size = float(cell_size)
        drawn = [*channels, *([center] if center is not None else [])]
        for name in drawn:
            if name not in obs_space.entities:
                raise ValueError(
                    f"GridSensor: unknown entity type {name!r}; entity types: "
                    f"{list(obs_space.entities)}"
                )
        # Per drawn type: its (x, y) columns, its feature columns and its first channel.
        self._types: list[tuple[str, list[int], list[int], int]] = []
        channel = 0
        for name, features in channels.items():
            columns = self._columns(obs_space, name, [*position, *features])
            self._types.append((name, columns[:2], columns[2:], channel))
            channel += 1 + len(features)
        self.center = center
        self._center_columns = (
            None if center is None else self._columns(obs_space, center, list(position))
        )
        self.image = Image((*self.size, channel), "float32")
        """What an environment declares in ``ObsSpace.images`` for this sensor."""

    @staticmethod
    def _columns(obs_space: ObsSpace, name: str, features: list[str]) -> list[int]:
        known = obs_space.entities[name].features
        missing = [f for f in features if f not in known]
        if missing:
            raise ValueError(
                f"GridSensor: entity type {name!r} has no features {missing}; its features: "
                f"{list(known)}"
            )
        return [known.index(f) for f in features]

    def __call__(self, obs: Observation) -> npt.NDArray[np.float32]:
        """The ``(height, width, channels)`` image of ``obs``'s entities."""
        height, width = self.size
        grid = np.zeros(self.image.shape, dtype=np.float32)
        origin = np.zeros(2)
        middle = np.zeros(2, dtype=np.int64)
        if self.center is not None:
            anchor = np.asarray(obs.features.get(self.center, ()), dtype=np.float64)
            if anchor.size == 0:
                raise ValueError(
                    f"GridSensor: the grid is centred on {self.center!r}, but the observation "
                    f"has no {self.center!r} entity"
                )
            origin = anchor[0, self._center_columns]
            middle = np.array([width // 2, height // 2])
            # The anchor's own cell is the middle one: shift by half a cell.
            origin = origin - self.cell_size / 2
        for name, xy, features, channel in self._types:
            rows = np.asarray(obs.features.get(name, ()), dtype=np.float64)
            if rows.size == 0:
                continue
            cells = np.floor((rows[:, xy] - origin) / self.cell_size).astype(np.int64) + middle
            inside = (cells >= 0).all(axis=1) & (cells[:, 0] < width) & (cells[:, 1] < height)
            col, row = cells[inside, 0], cells[inside, 1]
            grid[row, col, channel] = 1.0
            for k, column in enumerate(features):
                grid[row, col, channel + 1 + k] = rows[inside, column]
        return grid
