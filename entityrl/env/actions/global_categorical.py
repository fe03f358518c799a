"""Global categorical actions: one choice per step, made for the whole observation."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from entityrl.env.actions.categorical import (
    VecCategoricalMask,
    check_choices,
    random_choices,
    validate_vec_choices,
)
from entityrl.env.actions.kind import ActionConstructor, GlobalKind
from entityrl.env.rows import fill_rows
from entityrl.ragged import RaggedArray


@dataclass(frozen=True)
class GlobalCategoricalActionSpace:
    """One choice among ``choices`` per step, made for the whole observation."""

    choices: Sequence[str]

    def __post_init__(self) -> None:
        object.__setattr__(self, "choices", tuple(self.choices))
        if not self.choices:
            raise ValueError("GlobalCategoricalActionSpace needs at least one choice")

    def __len__(self) -> int:
        return len(self.choices)


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


class GlobalCategoricalKind(GlobalKind):
    space = GlobalCategoricalActionSpace
    mask = GlobalCategoricalActionMask
    action = GlobalCategoricalAction
    vec_mask = VecCategoricalMask

    def from_data(self, data: Mapping[str, Any]) -> Any:
        return self.space(data["choices"])

    def batch_mask(self, space: Any, specs: Sequence[Any], index: Any) -> VecCategoricalMask:
        actors = self.actors(specs, index)
        masks = [(i, s.mask) for i, s in enumerate(specs) if s is not None and s.mask is not None]
        # A global mask is one row of choices: wrap it so it stacks like actor rows.
        return VecCategoricalMask(
            actors, fill_rows(masks, actors.lengths, [[m] for _, m in masks], len(space))
        )

    def unbatch(
        self,
        space: Any,
        values: RaggedArray,
        observations: Sequence[Any],
        name: str,
        type_names: Sequence[str],
        make: ActionConstructor,
    ) -> Iterator[tuple[int, Any]]:
        chosen = values.data[:, 0]
        starts = values.offsets.tolist()
        choices = space.choices
        for i, obs in enumerate(observations):
            if name in obs.actions:
                index = int(chosen[starts[i]])
                yield i, make(index, choices[index])

    def check_values(self, name: str, space: Any, values: RaggedArray, mask: Any) -> None:
        super().check_values(name, space, values, mask)
        check_choices(name, values, mask, len(space))

    def random(
        self, space: Any, mask: VecCategoricalMask, rng: np.random.Generator
    ) -> npt.NDArray[np.int64]:
        return random_choices(mask, len(space), rng)

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
