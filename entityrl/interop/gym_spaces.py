"""The rule that turns Gymnasium spaces into entityrl's: observations into global features and
entities, discrete actions into global categorical actions.

Observations (any nesting of Dict and Tuple spaces; leaves in the order Gymnasium lists them):

* Box: its values, flattened, become global features (``name[i]``), except an image: a
  uint8 Box of shape ``(height, width, channels)`` with 1, 3 or 4 channels becomes an image of
  the observation (named as the features would be, ``obs`` for a bare Box), which the
  network encodes with a CNN (see docs/images.md);
* Discrete and MultiDiscrete: one-hot per component (``name=value``);
* MultiBinary: its bits as 0/1 global features;
* a top-level Dict key named in ``entities``: a Box of shape ``(n, f)`` whose ``n`` rows are
  entities of a type named after the key, with ``f`` features each. Its mask (the Dict key
  given as the value, a MultiBinary or Box of shape ``(n,)``) says which rows are present;
  without a mask all ``n`` are;
* top-level Dict keys named in ``ignore`` are dropped (text missions, images you encode
  yourself). Any other space (Text, Graph, Sequence, ...) is refused with its name.

Actions: Discrete is one global categorical action ``action``; MultiDiscrete one per
component (``action[i]``); a Box with finite bounds is one global continuous action
``action`` with one component per value, flattened (``action[i]``), which Gymnasium receives
clipped to the bounds and in the Box's shape and dtype. A Box with an infinite bound is
refused (entityrl's continuous actions are bounded).

Every method works on a batch: a leading axis of ``batch`` rows (a single environment's
observation is a batch of one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from entityrl.env import (
    Action,
    ActionSpace,
    Entity,
    GlobalCategoricalActionSpace,
    GlobalContinuousActionSpace,
    Image,
    ObsSpace,
)
from entityrl.env.actions import kind_of
from entityrl.ragged import RaggedArray

Path = tuple[str | int, ...]


class UnsupportedSpaceError(ValueError):
    """A Gymnasium space that entityrl cannot express (yet)."""


def _leaf(value: Any, path: Path) -> Any:
    for key in path:
        value = value[key]
    return value


def _label(path: Path) -> str:
    return ".".join(str(p) for p in path) or "obs"


@dataclass(frozen=True)
class _GlobalLeaf:
    """One Box/Discrete/MultiDiscrete/MultiBinary leaf read into global features."""

    path: Path
    space: spaces.Space[Any]

    def feature_names(self) -> list[str]:
        label = _label(self.path)
        if isinstance(self.space, spaces.Discrete):
            start = int(self.space.start)
            return [f"{label}={start + i}" for i in range(int(self.space.n))]
        if isinstance(self.space, spaces.MultiDiscrete):
            starts = np.broadcast_to(self.space.start, self.space.nvec.shape).reshape(-1)
            return [
                f"{label}[{k}]={int(starts[k]) + i}"
                for k, n in enumerate(self.space.nvec.reshape(-1))
                for i in range(int(n))
            ]
        size = int(np.prod(self.space.shape))  # type: ignore[arg-type]
        return [f"{label}[{i}]" for i in range(size)]

    def encode(self, obs: Any, batch: int) -> npt.NDArray[np.float32]:
        value = np.asarray(_leaf(obs, self.path))
        if isinstance(self.space, spaces.Discrete):
            index = value.reshape(batch) - int(self.space.start)
            return np.eye(int(self.space.n), dtype=np.float32)[index]
        if isinstance(self.space, spaces.MultiDiscrete):
            nvec = self.space.nvec.reshape(-1)
            starts = np.broadcast_to(self.space.start, self.space.nvec.shape).reshape(-1)
            index = value.reshape(batch, -1) - starts
            out = np.zeros((batch, int(nvec.sum())), dtype=np.float32)
            offsets = np.concatenate([[0], np.cumsum(nvec)[:-1]])
            out[np.arange(batch)[:, None], offsets + index] = 1.0
            return out
        return value.reshape(batch, -1).astype(np.float32, copy=False)


@dataclass(frozen=True)
class _EntityLeaf:
    """A top-level Dict key whose Box rows are entities (with an optional presence mask)."""

    key: str
    space: spaces.Box
    mask_key: str | None

    def encode(self, obs: Any, batch: int) -> RaggedArray:
        rows, width = self.space.shape
        data = np.asarray(obs[self.key], dtype=np.float32).reshape(batch, rows, width)
        if self.mask_key is None:
            return RaggedArray(data.reshape(-1, width), np.full(batch, rows, dtype=np.int64))
        present = np.asarray(obs[self.mask_key]).reshape(batch, rows).astype(np.bool_)
        return RaggedArray(data[present], present.sum(axis=1).astype(np.int64))


IMAGE_CHANNELS = (1, 3, 4)
"""Channels of a Box that is read as an image (grey, RGB, RGBA)."""


def is_image(space: spaces.Space[Any]) -> bool:
    """Whether a Box holds an image: uint8 of shape (height, width, 1, 3 or 4 channels)."""
    return (
        isinstance(space, spaces.Box)
        and space.dtype == np.uint8
        and len(space.shape) == 3
        and space.shape[2] in IMAGE_CHANNELS
    )


@dataclass(frozen=True)
class _ImageLeaf:
    """A Box leaf read as an image of the observation."""

    path: Path
    space: spaces.Box

    def encode(self, obs: Any, batch: int) -> npt.NDArray[np.uint8]:
        return np.asarray(_leaf(obs, self.path), dtype=np.uint8).reshape(batch, *self.space.shape)


class ObservationRule:
    """How the observations of one Gymnasium space become entityrl observations."""

    def __init__(
        self,
        space: spaces.Space[Any],
        entities: Mapping[str, str | None] | None = None,
        ignore: Sequence[str] = (),
        env_name: str = "environment",
    ) -> None:
        self.env_name = env_name
        entities = dict(entities or {})
        if (entities or ignore) and not isinstance(space, spaces.Dict):
            raise UnsupportedSpaceError(
                f"{env_name}: entities/ignore name keys of a Dict observation space, got {space}"
            )
        top = dict(space.spaces) if isinstance(space, spaces.Dict) else {}
        for key in [*entities, *ignore, *(m for m in entities.values() if m)]:
            if key not in top:
                raise UnsupportedSpaceError(
                    f"{env_name}: observation key {key!r} does not exist; keys: "
                    + ", ".join(map(repr, top))
                )
        self.entity_leaves = [self._entity_leaf(key, top, mask) for key, mask in entities.items()]
        skipped = {*ignore, *entities, *(m for m in entities.values() if m)}
        self.global_leaves: list[_GlobalLeaf] = []
        self.image_leaves: list[_ImageLeaf] = []
        if isinstance(space, spaces.Dict):
            for key, sub in space.spaces.items():
                if key not in skipped:
                    self._collect(sub, (key,))
        else:
            self._collect(space, ())
        self.obs_space = ObsSpace(
            entities={
                leaf.key: Entity([f"{leaf.key}[{i}]" for i in range(leaf.space.shape[1])])
                for leaf in self.entity_leaves
            },
            global_features=[n for leaf in self.global_leaves for n in leaf.feature_names()],
            images={
                _label(leaf.path): Image(leaf.space.shape)  # type: ignore[arg-type]
                for leaf in self.image_leaves
            },
        )

    def _entity_leaf(
        self, key: str, top: Mapping[str, spaces.Space[Any]], mask_key: str | None
    ) -> _EntityLeaf:
        space = top[key]
        if not isinstance(space, spaces.Box) or len(space.shape) != 2:
            raise UnsupportedSpaceError(
                f"{self.env_name}: observation key {key!r}: an entity set must be a Box of "
                f"shape (entities, features), got {space}"
            )
        if mask_key is not None:
            mask = top[mask_key]
            if not isinstance(mask, (spaces.MultiBinary, spaces.Box)) or mask.shape != (
                space.shape[0],
            ):
                raise UnsupportedSpaceError(
                    f"{self.env_name}: observation key {mask_key!r}: the mask of {key!r} must be "
                    f"a MultiBinary or Box of shape ({space.shape[0]},), got {mask}"
                )
        return _EntityLeaf(key, space, mask_key)

    def _collect(self, space: spaces.Space[Any], path: Path) -> None:
        if isinstance(space, spaces.Dict):
            for key, sub in space.spaces.items():
                self._collect(sub, (*path, key))
        elif isinstance(space, spaces.Tuple):
            for i, sub in enumerate(space.spaces):
                self._collect(sub, (*path, i))
        elif is_image(space):
            self.image_leaves.append(_ImageLeaf(path, space))  # type: ignore[arg-type]
        elif isinstance(
            space, (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)
        ):
            self.global_leaves.append(_GlobalLeaf(path, space))
        else:
            raise UnsupportedSpaceError(
                f"{self.env_name}: observation {_label(path)!r}: {type(space).__name__} spaces "
                f"cannot be expressed as entityrl features ({space}); expected Box, Discrete, "
                "MultiDiscrete, MultiBinary, Dict or Tuple"
                + (" (drop it with ignore=[...])" if len(path) == 1 else "")
            )

    def global_features(self, obs: Any, batch: int) -> npt.NDArray[np.float32]:
        """``(batch, global features)``."""
        if not self.global_leaves:
            return np.zeros((batch, 0), dtype=np.float32)
        return np.concatenate([leaf.encode(obs, batch) for leaf in self.global_leaves], axis=1)

    def images(self, obs: Any, batch: int) -> dict[str, npt.NDArray[np.uint8]]:
        """Per image, ``(batch, height, width, channels)``."""
        return {_label(leaf.path): leaf.encode(obs, batch) for leaf in self.image_leaves}

    def entities(self, obs: Any, batch: int) -> dict[str, RaggedArray]:
        """Per entity type, its entities in each of the ``batch`` rows."""
        return {leaf.key: leaf.encode(obs, batch) for leaf in self.entity_leaves}


class ActionRule:
    """How entityrl's global actions (categorical choices, or one continuous action for a Box)
    become one Gymnasium action."""

    def __init__(self, space: spaces.Space[Any], env_name: str = "environment") -> None:
        self.box = space if isinstance(space, spaces.Box) else None
        if self.box is not None:
            low, high = self.box.low.reshape(-1), self.box.high.reshape(-1)
            if not (np.isfinite(low).all() and np.isfinite(high).all()):
                raise UnsupportedSpaceError(
                    f"{env_name}: action space {space}: a Box action needs finite bounds "
                    "(entityrl's continuous actions are bounded)"
                )
            dims = [f"action[{i}]" for i in range(low.size)]
            self.action_space: dict[str, ActionSpace] = {
                "action": GlobalContinuousActionSpace(dims, low, high)
            }
            return
        if isinstance(space, spaces.Discrete):
            self.shape: tuple[int, ...] = ()
            sizes = np.array([space.n])
            starts = np.array([space.start])
            names = ["action"]
        elif isinstance(space, spaces.MultiDiscrete):
            self.shape = space.nvec.shape
            sizes = space.nvec.reshape(-1)
            starts = np.broadcast_to(space.start, space.nvec.shape).reshape(-1)
            names = [f"action[{i}]" for i in range(sizes.size)]
        else:
            raise UnsupportedSpaceError(
                f"{env_name}: action space {space}: {type(space).__name__} actions cannot be "
                "expressed; expected Discrete, MultiDiscrete or Box"
            )
        self.starts = starts.astype(np.int64)
        self.action_space = {
            name: GlobalCategoricalActionSpace([str(int(start) + i) for i in range(int(n))])
            for name, n, start in zip(names, sizes, starts, strict=True)
        }

    def values(self, actions: Mapping[str, Action]) -> npt.NDArray[Any]:
        """One environment's actions (one per action of :attr:`action_space`, as
        ``Environment.act`` receives them) as the ``(1, values)`` row :meth:`decode` takes."""
        row = [
            kind_of(space).action_values(space, actions[name]).reshape(-1)
            for name, space in self.action_space.items()
        ]
        return np.concatenate(row).reshape(1, -1)

    def decode(self, values: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """``(batch, actions)`` choice indices (in :attr:`action_space` order), or ``(batch,
        components)`` values of a Box's continuous action -> a batch of Gymnasium actions."""
        if self.box is not None:
            clipped = np.clip(values, self.box.low.reshape(-1), self.box.high.reshape(-1))
            return clipped.astype(self.box.dtype).reshape(values.shape[0], *self.box.shape)
        return (values + self.starts).reshape(values.shape[0], *self.shape)
