"""Global categorical actions: one choice per step, made for the whole observation."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from entityrl.env.actions.categorical import (
    Choices,
    ChoiceSpace,
    validate_vec_choices,
)
from entityrl.env.actions.kind import GlobalKind, Unbatching
from entityrl.ragged import RaggedArray


@dataclass(frozen=True)
class GlobalCategoricalActionSpace(ChoiceSpace):
    """One choice among ``choices`` per step, made for the whole observation."""


@dataclass
class GlobalCategoricalActionMask:
    """A global categorical action is taken this step; ``mask`` (shape ``(choices,)``) marks
    the legal choices (all, if omitted)."""

    mask: npt.ArrayLike | None = None


@dataclass
class GlobalCategoricalAction:
    """The one choice made for the whole observation."""

    index: int
    label: str


class GlobalCategoricalKind(Choices, GlobalKind):
    space = GlobalCategoricalActionSpace
    mask = GlobalCategoricalActionMask
    action = GlobalCategoricalAction

    def numbers(self, action: GlobalCategoricalAction) -> npt.ArrayLike:
        return action.index

    def mask_rows(self, mask: Any) -> Any:
        # A global mask is one row of choices: wrap it so it stacks like actor rows.
        return [mask]

    def unbatch(self, space: Any, values: RaggedArray, to: Unbatching) -> Iterator[tuple[int, Any]]:
        chosen = values.data[:, 0]
        for i, item in self.offered_rows(values, to):
            index = int(chosen[item])
            yield i, to.make(index, space.choices[index])

    def validate_mask(self, check: Any, field: str, space: Any, spec: Any) -> None:
        mask = check.mask(f"{field}.mask", spec.mask, (len(space),), "(choices,)")
        if mask is not None and not mask.any():
            check.fail(
                f"{field}.mask", "expected at least one legal choice, got every choice masked out"
            )

    def validate_vec_mask(self, check: Any, field: str, space: Any, mask: Any) -> None:
        self.validate_vec_actors(check, field, mask)
        validate_vec_choices(check, f"{field}.mask", mask, mask.actors, space.choices)

    def validate_action(self, check: Any, space: Any, action: Any, spec: Any) -> None:
        chosen = np.asarray([action.index])
        check.check_range(None, chosen, len(space), "choice")
        check.check_legal(None, np.zeros(1, np.int64), chosen, check.legal(), "choice")
