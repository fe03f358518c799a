"""Global continuous actions: one vector of numbers per step, for the whole observation
(bounds and their clipping rule as for :mod:`entityrl.env.actions.continuous`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from entityrl.env.actions.continuous import BoundedSpace, BoundedValues
from entityrl.env.actions.kind import GlobalKind, Unbatching
from entityrl.ragged import RaggedArray


@dataclass(frozen=True)
class GlobalContinuousActionSpace(BoundedSpace):
    """One number per component ``dims`` per step, made for the whole observation, within
    ``[low, high]`` (see :class:`~entityrl.env.actions.continuous.BoundedSpace`)."""


@dataclass
class GlobalContinuousActionMask:
    """A global continuous action is taken this step."""


@dataclass
class GlobalContinuousAction:
    """The values (one per component, within the bounds) given for the whole observation."""

    values: npt.NDArray[np.float32]  # (dims,)
    dims: Sequence[str] = ()


class GlobalContinuousKind(BoundedValues, GlobalKind):
    space = GlobalContinuousActionSpace
    mask = GlobalContinuousActionMask
    action = GlobalContinuousAction

    def unbatch(self, space: Any, values: RaggedArray, to: Unbatching) -> Iterator[tuple[int, Any]]:
        clipped = self.to_env(space, values).data
        for i, item in self.offered_rows(values, to):
            yield i, to.make(clipped[item], space.dims)

    def validate_mask(self, check: Any, field: str, space: Any, spec: Any) -> None:
        """Nothing to check: the mask only says that the action is taken."""

    def validate_vec_mask(self, check: Any, field: str, space: Any, mask: Any) -> None:
        self.validate_vec_actors(check, field, mask)

    def validate_action(self, check: Any, space: Any, action: Any, spec: Any) -> None:
        self.validate_values(check, space, action.values, None)
