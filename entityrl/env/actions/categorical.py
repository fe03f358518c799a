"""Categorical actions: each acting entity picks one of a fixed list of choices."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from entityrl.env.actions.kind import ActionKind, Column, Options, PerActorKind, Unbatching
from entityrl.env.entities import EntityID
from entityrl.env.rows import all_true, fill_rows, locate
from entityrl.ragged import RaggedArray


@dataclass(frozen=True)
class ChoiceSpace:
    """One of ``choices`` (labels, shown to people and in logs) per actor."""

    choices: Sequence[str]

    def __post_init__(self) -> None:
        object.__setattr__(self, "choices", tuple(self.choices))
        if not self.choices:
            raise ValueError(f"{type(self).__name__} needs at least one choice")

    def __len__(self) -> int:
        return len(self.choices)


@dataclass(frozen=True)
class CategoricalActionSpace(ChoiceSpace):
    """Each acting entity picks one of ``choices`` (labels, shown to people and in logs)."""


@dataclass
class CategoricalActionMask:
    """Which entities take a categorical action this step, and which choices each may pick.

    Name the actors by ``actor_types`` (every entity of those types acts) or by ``actor_ids``;
    with neither, every entity acts. ``mask`` (optional, shape ``(actors, choices)``) marks the
    legal choices of each actor, in actor order; every actor needs at least one.
    """

    actor_ids: Sequence[EntityID] | None = None
    actor_types: Sequence[str] | None = None
    mask: npt.ArrayLike | None = None


@dataclass
class CategoricalAction:
    """The choice of each actor: ``indices[i]`` is what ``actors[i]`` picked."""

    actors: Sequence[EntityID]
    indices: npt.NDArray[np.int64]
    choices: Sequence[str] = ()

    @property
    def labels(self) -> list[str]:
        """The picked choices as their labels."""
        return [self.choices[i] for i in self.indices]

    def as_dict(self) -> dict[EntityID, int]:
        """``{actor id: choice index}``."""
        return dict(zip(self.actors, self.indices.tolist(), strict=True))


@dataclass
class VecCategoricalMask:
    """Actors of a categorical (or global categorical) action and their legal choices.

    ``actors``: int64 (rows, actors, 1), entity index within the row. ``mask``: bool
    (rows, actors, choices) or None when every choice is legal everywhere.
    """

    actors: RaggedArray
    mask: RaggedArray | None = None

    def take(self, rows: npt.NDArray[np.int64]) -> VecCategoricalMask:
        return VecCategoricalMask(
            self.actors.take(rows), None if self.mask is None else self.mask.take(rows)
        )

    @staticmethod
    def concat(masks: Sequence[VecCategoricalMask], choices: int) -> VecCategoricalMask:
        actors = RaggedArray.concat([m.actors for m in masks])
        if all(m.mask is None for m in masks):
            return VecCategoricalMask(actors, None)
        filled = [
            m.mask if m.mask is not None else all_true(m.actors.lengths, choices) for m in masks
        ]
        return VecCategoricalMask(actors, RaggedArray.concat(filled))


class Choices(ActionKind):
    """What categorical and global categorical kinds share: one choice among the space's
    ``choices`` per actor, masked."""

    vec_mask = VecCategoricalMask

    def from_data(self, data: Mapping[str, Any]) -> Any:
        return self.space(data["choices"])

    def choices(self, space: Any) -> Sequence[str]:
        return space.choices  # type: ignore[no-any-return]

    def options(self, space: Any, mask: VecCategoricalMask, row: int) -> Options:
        actors = mask.actors[row][:, 0].tolist()
        legal = (
            np.ones((len(actors), len(space)), dtype=np.bool_)
            if mask.mask is None
            else mask.mask[row]
        )
        return Options(actors, legal, labels=self.choices(space))

    def mask_columns(self, space: Any) -> dict[str, Column]:
        return {**super().mask_columns(space), "mask": Column(np.dtype(np.bool_), len(space))}

    def mask_to_columns(self, space: Any, mask: VecCategoricalMask) -> dict[str, RaggedArray]:
        legal = mask.mask if mask.mask is not None else all_true(mask.actors.lengths, len(space))
        return {**super().mask_to_columns(space, mask), "mask": legal}

    def mask_from_columns(
        self, space: Any, columns: Mapping[str, RaggedArray]
    ) -> VecCategoricalMask:
        legal = columns["mask"]
        return VecCategoricalMask(columns["actors"], None if legal.data.all() else legal)

    def check_values(self, name: str, space: Any, values: RaggedArray, mask: Any) -> None:
        super().check_values(name, space, values, mask)
        check_choices(name, values, mask, len(space))

    def random(
        self, space: Any, mask: VecCategoricalMask, rng: np.random.Generator
    ) -> npt.NDArray[np.int64]:
        return random_choices(mask, len(space), rng)

    def mask_rows(self, mask: Any) -> Any:
        """One observation's mask as rows of choices, one per actor."""
        return mask

    def batch_mask(self, space: Any, specs: Sequence[Any], index: Any) -> VecCategoricalMask:
        actors = self.actors(specs, index)  # type: ignore[attr-defined]
        masks = [(i, s.mask) for i, s in enumerate(specs) if s is not None and s.mask is not None]
        rows = [self.mask_rows(m) for _, m in masks]
        return VecCategoricalMask(actors, fill_rows(masks, actors.lengths, rows, len(space)))


class CategoricalKind(Choices, PerActorKind):
    space = CategoricalActionSpace
    mask = CategoricalActionMask
    action = CategoricalAction

    def numbers(self, action: CategoricalAction) -> npt.ArrayLike:
        return action.indices

    def unbatch(self, space: Any, values: RaggedArray, to: Unbatching) -> Iterator[tuple[int, Any]]:
        chosen = values.data[:, 0]
        for i, _, actors, lo, hi in self.named_actors(values, to):
            yield i, to.make(actors, chosen[lo:hi], space.choices)

    def validate_mask(self, check: Any, field: str, space: Any, spec: Any) -> None:
        actors = check.entities(f"{field}.actor", spec.actor_ids, spec.actor_types)
        mask = check.mask(f"{field}.mask", spec.mask, (actors, len(space)), "(actors, choices)")
        check.every_row_legal(f"{field}.mask", mask, "choice")

    def validate_vec_mask(self, check: Any, field: str, space: Any, mask: Any) -> None:
        actors = check.ragged(
            f"{field}.actors", mask.actors, np.int64, 1, "one entity index per actor"
        )
        check.entities_of_row(f"{field}.actors", actors, "actor")
        validate_vec_choices(check, f"{field}.mask", mask, actors, space.choices)

    def validate_action(self, check: Any, space: Any, action: Any, spec: Any) -> None:
        actors, rows = check.actor_rows()
        chosen = np.asarray(action.indices)
        if chosen.shape != (len(actors),) or chosen.dtype.kind not in "iu":
            check.fail(
                f"expected {len(actors)} integer choice indices (one per actor), "
                f"got {chosen.dtype} of shape {chosen.shape}"
            )
        check.check_range(actors, chosen, len(space), "choice")
        check.check_legal(actors, rows, chosen, check.legal(), "choice")


def check_choices(name: str, values: RaggedArray, mask: VecCategoricalMask, choices: int) -> None:
    """Each actor's value is a choice in ``[0, choices)`` that its mask allows."""
    chosen = values.data[:, 0]
    out_of_range = np.flatnonzero((chosen < 0) | (chosen >= choices))
    if out_of_range.size:
        k = int(out_of_range[0])
        raise ValueError(
            f"action {name!r}: {locate(values, k)}: expected a choice in "
            f"[0, {choices}), got {chosen[k]}"
        )
    if mask.mask is not None and chosen.shape[0]:
        legal = mask.mask.data[np.arange(chosen.shape[0]), chosen]
        if not legal.all():
            k = int(np.flatnonzero(~legal)[0])
            raise ValueError(
                f"action {name!r}: {locate(values, k)}: expected a choice its mask allows, "
                f"got {chosen[k]}, which the mask forbids"
            )


def random_choices(
    mask: VecCategoricalMask, choices: int, rng: np.random.Generator
) -> npt.NDArray[np.int64]:
    """A uniformly random legal choice per actor, ``(actors, 1)``."""
    actors = mask.actors.items
    if mask.mask is None:
        picked = rng.integers(0, choices, size=actors, dtype=np.int64)
    else:
        # The largest random score among the legal choices is a uniform pick among them.
        scores = rng.random((actors, choices))
        scores[~mask.mask.data] = -1.0
        picked = scores.argmax(axis=1).astype(np.int64)
    return picked.reshape(-1, 1)


def validate_vec_choices(
    check: Any,
    field: str,
    mask: VecCategoricalMask,
    actors: RaggedArray,
    choices: Sequence[str],
) -> None:
    """A batched categorical mask: one row of ``len(choices)`` flags per actor, each row with
    a legal choice."""
    if mask.mask is None:
        return
    want = f"{len(choices)} choices per actor ({', '.join(choices) or 'none'})"
    legal = check.ragged(field, mask.mask, np.bool_, len(choices), want)
    check.same_lengths(field, legal, actors.lengths, "rows of choices (one per actor)")
    dead = np.flatnonzero(~legal.data.any(axis=1))
    if dead.size:
        item = int(dead[0])
        row = int(np.searchsorted(legal.offsets, item, side="right")) - 1
        check.fail(
            field,
            f"row {row}, actor {actors.data[item, 0]}: expected at least one legal choice, "
            "got every choice masked out; leave the actor out instead",
        )
