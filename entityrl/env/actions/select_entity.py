"""Select-entity actions: each acting entity selects one entity among its candidates."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from entityrl.env.actions.kind import (
    ENTITY_INDICES,
    Column,
    Options,
    PerActorKind,
    Unbatching,
)
from entityrl.env.entities import EntityID, named_entities
from entityrl.env.rows import all_true, fill_rows, locate
from entityrl.ragged import RaggedArray


@dataclass(frozen=True)
class SelectEntityActionSpace:
    """Each acting entity selects one entity among a set of candidates (the actees)."""


@dataclass
class SelectEntityActionMask:
    """Which entities select another entity this step, and which entities they may select.

    Actors as in :class:`~entityrl.env.CategoricalActionMask`. Candidates (actees) by
    ``actee_types`` or ``actee_ids``; with neither, every entity is a candidate. ``mask``
    (optional, shape ``(actors, actees)``) marks the legal actees of each actor.
    """

    actor_ids: Sequence[EntityID] | None = None
    actor_types: Sequence[str] | None = None
    actee_ids: Sequence[EntityID] | None = None
    actee_types: Sequence[str] | None = None
    mask: npt.ArrayLike | None = None


@dataclass
class SelectEntityAction:
    """``actees[i]`` is the entity selected by ``actors[i]``."""

    actors: Sequence[EntityID]
    actees: Sequence[EntityID]

    def as_dict(self) -> dict[EntityID, EntityID]:
        """``{actor id: selected entity id}``."""
        return dict(zip(self.actors, self.actees, strict=True))


@dataclass
class VecSelectEntityMask:
    """Actors of a select-entity action, their candidates, and which candidates are legal.

    ``actors`` and ``actees``: int64 (rows, n, 1), entity indices within the row. ``mask``: bool
    (rows, actors * actees, 1), actor-major (actor ``a``'s row of candidates is contiguous), or
    None when every actor may select every actee.
    """

    actors: RaggedArray
    actees: RaggedArray
    mask: RaggedArray | None = None

    def take(self, rows: npt.NDArray[np.int64]) -> VecSelectEntityMask:
        return VecSelectEntityMask(
            self.actors.take(rows),
            self.actees.take(rows),
            None if self.mask is None else self.mask.take(rows),
        )

    @staticmethod
    def concat(masks: Sequence[VecSelectEntityMask], choices: int = 0) -> VecSelectEntityMask:
        """The masks' rows in order (``choices`` is unused: candidates vary by row)."""
        actors = RaggedArray.concat([m.actors for m in masks])
        actees = RaggedArray.concat([m.actees for m in masks])
        if all(m.mask is None for m in masks):
            return VecSelectEntityMask(actors, actees, None)
        filled = [
            m.mask if m.mask is not None else all_true(m.actors.lengths * m.actees.lengths, 1)
            for m in masks
        ]
        return VecSelectEntityMask(actors, actees, RaggedArray.concat(filled))


class SelectEntityKind(PerActorKind):
    space = SelectEntityActionSpace
    mask = SelectEntityActionMask
    action = SelectEntityAction
    vec_mask = VecSelectEntityMask

    def from_data(self, data: Mapping[str, Any]) -> Any:
        return self.space()

    def options(self, space: Any, mask: VecSelectEntityMask, row: int) -> Options:
        actors = mask.actors[row][:, 0].tolist()
        actees = mask.actees[row][:, 0].tolist()
        legal = (
            np.ones((len(actors), len(actees)), dtype=np.bool_)
            if mask.mask is None
            else mask.mask[row].reshape(len(actors), len(actees))
        )
        return Options(actors, legal, entities=actees)

    def mask_columns(self, space: Any) -> dict[str, Column]:
        # The flags are actor-major, a variable number per actor: one plain flag per item.
        return {
            **super().mask_columns(space),
            "actees": ENTITY_INDICES,
            "mask": Column(np.dtype(np.bool_)),
        }

    def mask_to_columns(self, space: Any, mask: VecSelectEntityMask) -> dict[str, RaggedArray]:
        legal = mask.mask
        if legal is None:
            legal = all_true(mask.actors.lengths * mask.actees.lengths, 1)
        return {**super().mask_to_columns(space, mask), "actees": mask.actees, "mask": legal}

    def mask_from_columns(
        self, space: Any, columns: Mapping[str, RaggedArray]
    ) -> VecSelectEntityMask:
        legal = columns["mask"]
        return VecSelectEntityMask(
            columns["actors"], columns["actees"], None if legal.data.all() else legal
        )

    def batch_mask(self, space: Any, specs: Sequence[Any], index: Any) -> VecSelectEntityMask:
        actors = self.actors(specs, index)
        # Candidates matter only to actors; rows without actors carry none.
        acting = actors.lengths > 0
        actees = index.select(
            [(s.actee_ids, s.actee_types) if acting[i] else None for i, s in enumerate(specs)]
        )
        # Select-entity masks are (actors, actees) per row, stored flat and actor-major.
        masks = [(i, s.mask) for i, s in enumerate(specs) if s is not None and s.mask is not None]
        flat = [np.asarray(m, dtype=np.bool_).reshape(-1) for _, m in masks]
        mask = fill_rows(masks, actors.lengths * actees.lengths, flat, 1)
        return VecSelectEntityMask(actors, actees, mask)

    def unbatch(self, space: Any, values: RaggedArray, to: Unbatching) -> Iterator[tuple[int, Any]]:
        chosen = values.data[:, 0]
        for i, spec, actors, lo, hi in self.named_actors(values, to):
            if hi > lo:
                obs = to.observations[i]
                candidates = named_entities(obs, to.type_names, spec.actee_ids, spec.actee_types)
                yield i, to.make(actors, [candidates[j] for j in chosen[lo:hi].tolist()])
            else:
                yield i, to.make([], [])

    def check_values(self, name: str, space: Any, values: RaggedArray, mask: Any) -> None:
        super().check_values(name, space, values, mask)
        chosen = values.data[:, 0]
        limit = np.repeat(mask.actees.lengths, mask.actors.lengths)
        out_of_range = np.flatnonzero((chosen < 0) | (chosen >= limit))
        if out_of_range.size:
            k = int(out_of_range[0])
            raise ValueError(
                f"action {name!r}: {locate(values, k)}: expected an actee position in "
                f"[0, {limit[k]}), got {chosen[k]}"
            )
        if mask.mask is not None and chosen.shape[0]:
            legal = mask.mask.data[_mask_positions(mask.actors, mask.actees, chosen), 0]
            if not legal.all():
                k = int(np.flatnonzero(~legal)[0])
                raise ValueError(
                    f"action {name!r}: {locate(values, k)}: expected an actee position its "
                    f"mask allows, got {chosen[k]}, which the mask forbids"
                )

    def random(
        self, space: Any, mask: VecSelectEntityMask, rng: np.random.Generator
    ) -> npt.NDArray[np.int64]:
        widths = np.repeat(mask.actees.lengths, mask.actors.lengths)
        if mask.mask is None:
            return (rng.random(widths.shape[0]) * widths).astype(np.int64).reshape(-1, 1)
        if not widths.size:
            return np.zeros((0, 1), dtype=np.int64)
        # One random score per (actor, candidate) pair; pick each actor's best legal candidate.
        legal = mask.mask.data[:, 0]
        scores = np.where(legal, rng.random(legal.shape[0]), -1.0)
        starts = np.cumsum(widths) - widths
        best = np.maximum.reduceat(scores, starts) if scores.size else scores
        segment = np.repeat(np.arange(widths.shape[0]), widths)
        winners = np.flatnonzero(scores == best[segment])
        # Ties have probability ~0; keep the first winner of each segment to be safe.
        first = np.unique(segment[winners], return_index=True)[1]
        return (winners[first] - starts).astype(np.int64).reshape(-1, 1)

    def validate_mask(self, check: Any, field: str, space: Any, spec: Any) -> None:
        actors = check.entities(f"{field}.actor", spec.actor_ids, spec.actor_types)
        actees = check.entities(f"{field}.actee", spec.actee_ids, spec.actee_types)
        if actors and not actees:
            check.fail(
                field,
                f"expected at least one entity to select for its {actors} actors, got none; "
                "leave the action out of Observation.actions when nothing can be selected",
            )
        mask = check.mask(f"{field}.mask", spec.mask, (actors, actees), "(actors, actees)")
        check.every_row_legal(f"{field}.mask", mask, "actee")

    def validate_vec_mask(self, check: Any, field: str, space: Any, mask: Any) -> None:
        actors = check.ragged(
            f"{field}.actors", mask.actors, np.int64, 1, "one entity index per actor"
        )
        check.entities_of_row(f"{field}.actors", actors, "actor")
        actees = check.ragged(
            f"{field}.actees", mask.actees, np.int64, 1, "one entity index per actee"
        )
        check.entities_of_row(f"{field}.actees", actees, "actee")
        stranded = np.flatnonzero((actors.lengths > 0) & (actees.lengths == 0))
        if stranded.size:
            row = int(stranded[0])
            check.fail(
                field,
                f"row {row}: expected at least one entity to select for its "
                f"{actors.lengths[row]} actors, got none; give the row no actors when nothing "
                "can be selected",
            )
        if mask.mask is None:
            return
        legal = check.ragged(f"{field}.mask", mask.mask, np.bool_, 1, "one flag per pair")
        check.same_lengths(
            f"{field}.mask", legal, actors.lengths * actees.lengths, "flags (actors x actees)"
        )
        if not actors.items:
            return
        # Actor-major: each actor's flags are one contiguous block, never empty (see above).
        widths = np.repeat(actees.lengths, actors.lengths)
        alive = np.logical_or.reduceat(legal.data[:, 0], np.cumsum(widths) - widths)
        dead = np.flatnonzero(~alive)
        if dead.size:
            item = int(dead[0])
            row = int(np.searchsorted(actors.offsets, item, side="right")) - 1
            check.fail(
                f"{field}.mask",
                f"row {row}, actor {actors.data[item, 0]}: expected at least one legal actee, "
                "got every actee masked out; leave the actor out instead",
            )

    def validate_action(self, check: Any, space: Any, action: Any, spec: Any) -> None:
        actors, rows = check.actor_rows()
        candidates = check.last.named_entities(check.type_order, spec.actee_ids, spec.actee_types)
        column_of = dict(zip(candidates, range(len(candidates)), strict=True))
        if len(action.actees) != len(actors):
            check.fail(f"expected {len(actors)} actees (one per actor), got {len(action.actees)}")
        for actor, actee in zip(actors, action.actees, strict=True):
            if actee not in column_of:
                check.fail(
                    f"actor {actor!r} selected {actee!r}, expected one of its candidates "
                    f"{candidates}"
                )
        chosen = np.fromiter((column_of[a] for a in action.actees), np.int64, len(actors))
        check.check_legal(actors, rows, chosen, check.legal(), "actee")


def _mask_positions(
    actors: RaggedArray, actees: RaggedArray, chosen: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """Flat position in a select-entity mask of each actor's chosen actee."""
    sizes = actors.lengths * actees.lengths
    row_start = np.repeat(np.cumsum(sizes) - sizes, actors.lengths)
    width = np.repeat(actees.lengths, actors.lengths)
    return row_start + actors.position_in_row() * width + chosen
