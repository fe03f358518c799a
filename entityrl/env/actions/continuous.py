"""Continuous actions: each acting entity gives a vector of numbers within bounds.

The rule for bounds: a policy may give any finite numbers (a Gaussian policy samples them
unbounded, and is scored on what it sampled); the environment receives them clipped to
``[low, high]``, component by component. So ``Environment.act`` always gets values within the
bounds, while VecEnvs, rollouts and recordings keep the policy's own values.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from entityrl.env.actions.kind import ActionKind, Column, PerActorKind, Unbatching
from entityrl.env.entities import EntityID
from entityrl.env.rows import locate
from entityrl.ragged import RaggedArray


def _bounds(kind: str, dims: Sequence[str], low: Any, high: Any) -> tuple[tuple[float, ...], ...]:
    """``low`` and ``high`` (a number for every component, or one number each) as tuples of
    one finite float per component, ``low < high``."""
    if not dims:
        raise ValueError(f"{kind} needs at least one component (dims), got none")
    if len(set(dims)) != len(dims):
        raise ValueError(f"{kind}: expected each component name once, got {list(dims)}")
    bounds = []
    for what, value in (("low", low), ("high", high)):
        values = np.broadcast_to(np.asarray(value, dtype=np.float64), (len(dims),)).tolist()
        if not all(math.isfinite(v) for v in values):
            raise ValueError(f"{kind}: expected finite {what} bounds, got {value}")
        bounds.append(tuple(values))
    narrow = [d for d, lo, hi in zip(dims, *bounds, strict=True) if not lo < hi]
    if narrow:
        raise ValueError(f"{kind}: expected low < high for every component, not for {narrow}")
    return tuple(bounds)


@dataclass(frozen=True)
class BoundedSpace:
    """One number per component ``dims`` (names, shown to people and in logs), within
    ``[low, high]`` (one bound for all components, or one per component); the environment
    receives the policy's numbers clipped to the bounds."""

    dims: Sequence[str]
    low: float | Sequence[float] = -1.0
    high: float | Sequence[float] = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "dims", tuple(self.dims))
        low, high = _bounds(type(self).__name__, self.dims, self.low, self.high)
        object.__setattr__(self, "low", low)
        object.__setattr__(self, "high", high)

    def __len__(self) -> int:
        return len(self.dims)


@dataclass(frozen=True)
class ContinuousActionSpace(BoundedSpace):
    """Each acting entity gives one number per component ``dims``, within ``[low, high]``
    (see :class:`BoundedSpace`)."""


@dataclass
class ContinuousActionMask:
    """Which entities take a continuous action this step: by ``actor_types`` or
    ``actor_ids``, every entity with neither."""

    actor_ids: Sequence[EntityID] | None = None
    actor_types: Sequence[str] | None = None


@dataclass
class ContinuousAction:
    """``values[i]`` (one number per component, within the bounds) is what ``actors[i]``
    gave."""

    actors: Sequence[EntityID]
    values: npt.NDArray[np.float32]  # (actors, dims)
    dims: Sequence[str] = ()

    def as_dict(self) -> dict[EntityID, npt.NDArray[np.float32]]:
        """``{actor id: its values}``."""
        return dict(zip(self.actors, self.values, strict=True))


@dataclass
class VecContinuousMask:
    """Actors of a continuous (or global continuous) action: int64 (rows, actors, 1), entity
    index within the row. Every value within the bounds is legal, so there is no mask."""

    actors: RaggedArray

    mask = None  # (as the other batched masks' "everything is legal")

    def take(self, rows: npt.NDArray[np.int64]) -> VecContinuousMask:
        return VecContinuousMask(self.actors.take(rows))

    @staticmethod
    def concat(masks: Sequence[VecContinuousMask], choices: int = 0) -> VecContinuousMask:
        return VecContinuousMask(RaggedArray.concat([m.actors for m in masks]))


class BoundedValues(ActionKind):
    """What per-actor and global continuous kinds share: values, bounds and their rule."""

    vec_mask = VecContinuousMask
    dtype = np.dtype(np.float32)
    discrete = False

    def width(self, space: Any) -> int:
        return len(space)

    def value_column(self, space: Any) -> Column:
        return Column(self.dtype, len(space))

    def mask_from_columns(
        self, space: Any, columns: Mapping[str, RaggedArray]
    ) -> VecContinuousMask:
        return VecContinuousMask(columns["actors"])

    def numbers(self, action: Any) -> npt.ArrayLike:
        return action.values  # type: ignore[no-any-return]

    def _per_actor(self, space: Any) -> str:
        return f"{len(space)} values per actor ({', '.join(space.dims)})"

    def to_data(self, space: Any) -> dict[str, Any]:
        return {"dims": list(space.dims), "low": list(space.low), "high": list(space.high)}

    def from_data(self, data: Mapping[str, Any]) -> Any:
        return self.space(data["dims"], data["low"], data["high"])

    def batch_mask(self, space: Any, specs: Sequence[Any], index: Any) -> VecContinuousMask:
        return VecContinuousMask(self.actors(specs, index))  # type: ignore[attr-defined]

    def to_env(self, space: Any, values: RaggedArray) -> RaggedArray:
        low = np.asarray(space.low, dtype=np.float32)
        high = np.asarray(space.high, dtype=np.float32)
        return RaggedArray(np.clip(values.data, low, high), values.lengths)

    def check_values(self, name: str, space: Any, values: RaggedArray, mask: Any) -> None:
        super().check_values(name, space, values, mask)
        bad = np.flatnonzero(~np.isfinite(values.data).all(axis=1))
        if bad.size:
            k = int(bad[0])
            raise ValueError(
                f"action {name!r}: {locate(values, k)}: expected finite values, got "
                f"{values.data[k].tolist()}"
            )

    def random(self, space: Any, mask: Any, rng: np.random.Generator) -> npt.NDArray[np.float32]:
        shape = (mask.actors.items, len(space))
        return rng.uniform(space.low, space.high, size=shape).astype(np.float32)

    def validate_values(
        self, check: Any, space: Any, values: Any, actors: Sequence[Any] | None
    ) -> None:
        """One action's values: ``(actors, dims)`` (``(dims,)`` for a global one, ``actors``
        None), finite and within the bounds."""
        shape = (len(space),) if actors is None else (len(actors), len(space))
        array = np.asarray(values)
        if array.shape != shape or array.dtype.kind not in "iuf":
            check.fail(
                f"expected numbers of shape {shape} ({self._per_actor(space)}), got "
                f"{array.dtype} of shape {array.shape}"
            )
        # Bounds in the values' precision: float32 values clipped to float32(0.1) are within.
        precision = array.dtype if array.dtype.kind == "f" else np.float64
        low = np.asarray(space.low, dtype=precision)
        high = np.asarray(space.high, dtype=precision)
        wrong = ~np.isfinite(array) | (array < low) | (array > high)
        if wrong.any():
            index = tuple(int(k) for k in np.argwhere(wrong)[0])
            who = "the global action" if actors is None else f"actor {actors[index[0]]!r}"
            d = index[-1]
            check.fail(
                f"{who} gave {array[index]} for component {space.dims[d]!r}, expected a "
                f"finite number in [{space.low[d]}, {space.high[d]}]"
            )


class ContinuousKind(BoundedValues, PerActorKind):
    space = ContinuousActionSpace
    mask = ContinuousActionMask
    action = ContinuousAction

    def unbatch(self, space: Any, values: RaggedArray, to: Unbatching) -> Iterator[tuple[int, Any]]:
        clipped = self.to_env(space, values).data
        for i, _, actors, lo, hi in self.named_actors(values, to):
            yield i, to.make(actors, clipped[lo:hi], space.dims)

    def validate_mask(self, check: Any, field: str, space: Any, spec: Any) -> None:
        check.entities(f"{field}.actor", spec.actor_ids, spec.actor_types)

    def validate_vec_mask(self, check: Any, field: str, space: Any, mask: Any) -> None:
        actors = check.ragged(
            f"{field}.actors", mask.actors, np.int64, 1, "one entity index per actor"
        )
        check.entities_of_row(f"{field}.actors", actors, "actor")

    def validate_action(self, check: Any, space: Any, action: Any, spec: Any) -> None:
        actors, _ = check.actor_rows()
        self.validate_values(check, space, action.values, actors)
