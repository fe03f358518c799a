"""Between per-environment objects and batches: Observations -> VecObs, ragged actions -> Actions.

This is the only place that walks over individual environments. The walk only collects what
each environment gave (one short pass per environment, entity type and action); conversion to
numpy happens once per batch, and everything per entity is vectorized.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from itertools import chain
from typing import Any

import numpy as np
import numpy.typing as npt

from entityrl.env.actions import ActionConstructor, kind_of
from entityrl.env.actions.kind import Unbatching
from entityrl.env.entities import EntityID, named_entities
from entityrl.env.observation import Action, Observation
from entityrl.env.rows import fill_rows, stack_rows
from entityrl.env.spaces import ActionSpace, Image, ObsSpace
from entityrl.env.vec_obs import VecObs
from entityrl.ragged import RaggedArray, ranges

__all__ = ["ActionConstructor", "Batcher", "Selection", "checked_image"]

Selection = tuple[Sequence[EntityID] | None, Sequence[str] | None] | None
"""Which entities of a row an actor or actee specification names: ``(ids, types)``, or None
for no entity at all (action not offered, or candidates of a row without actors)."""


class Batcher:
    """Converts between one observation per environment and the batched :class:`VecObs`.

    Observations are read by attribute only, so objects with :class:`Observation`'s attributes
    (and masks with its masks' attributes) batch as well; ``make_actions`` (per action name)
    builds the actions handed back (entityrl's own classes by default).
    """

    def __init__(
        self,
        obs_space: ObsSpace,
        action_space: Mapping[str, ActionSpace],
        make_actions: Mapping[str, ActionConstructor] | None = None,
    ) -> None:
        self.obs_space = obs_space
        self.action_space = dict(action_space)
        self.type_names = list(obs_space.entities)
        self.num_features = [len(e.features) for e in obs_space.entities.values()]
        self.type_column = {name: t for t, name in enumerate(self.type_names)}
        self.num_global = len(obs_space.global_features)
        self.images = dict(obs_space.images)
        # Each distinct type selection gets a code: its row in a table of the selected
        # columns (padded with -1 to one per type). Code 0 selects nothing.
        self._column_codes: dict[tuple[str, ...] | None, int] = {(): 0}
        self.column_table = np.full((1, len(self.type_names)), -1, dtype=np.int64)
        self._kinds = {name: kind_of(space) for name, space in self.action_space.items()}
        self._make = {name: kind.action for name, kind in self._kinds.items()}
        self._make.update(make_actions or {})
        # Also give each entity's id as an int64 key (VecObs.ids), for wrappers that follow
        # entities across steps; off by default, as it costs a pass over every id.
        self.entity_keys = False

    def column_code(self, types: Sequence[str] | None) -> int:
        """The code of the selection of ``types`` (all types if None); see ``column_table``."""
        key = None if types is None else tuple(types)
        code = self._column_codes.get(key)
        if code is None:
            width = len(self.type_names)
            named = range(width) if key is None else [self.type_column[t] for t in key]
            row = np.array([*named, *(-1,) * (width - len(named))], dtype=np.int64)
            code = self._column_codes[key] = len(self.column_table)
            self.column_table = np.vstack([self.column_table, row])
        return code

    # ------------------------------------------------------------------ observations -> VecObs
    def batch(
        self,
        observations: Sequence[Observation],
        reward: npt.NDArray[np.float32] | None = None,
        done: npt.NDArray[np.bool_] | None = None,
    ) -> VecObs:
        """Stack observations into one :class:`VecObs`; reward and done are taken from each
        observation unless given (a step's, when the observation is a reset's)."""
        n = len(observations)
        counts = np.zeros((n, len(self.type_names)), dtype=np.int64)
        features: dict[str, RaggedArray] = {}
        visible: dict[str, RaggedArray] = {}
        for t, (name, width) in enumerate(zip(self.type_names, self.num_features, strict=True)):
            given = [obs.features.get(name) for obs in observations]
            counts[:, t] = [0 if rows is None else len(rows) for rows in given]
            lengths = counts[:, t].copy()
            data = stack_rows([rows for rows in given if rows is not None], width, np.float32)
            features[name] = RaggedArray(data, lengths)
            shown = [
                (i, obs.visible[name]) for i, obs in enumerate(observations) if name in obs.visible
            ]
            if shown:
                visible[name] = fill_rows(shown, lengths, [flags for _, flags in shown], 1)

        index = _EntityIndex(self, observations, counts)
        action_masks = {
            name: self._kinds[name].batch_mask(
                space, [obs.actions.get(name) for obs in observations], index
            )
            for name, space in self.action_space.items()
        }
        if self.num_global:
            global_features = np.array(
                [obs.global_features for obs in observations], dtype=np.float32
            ).reshape(n, self.num_global)
        else:
            global_features = np.zeros((n, 0), dtype=np.float32)
        return VecObs(
            features=features,
            global_features=global_features,
            action_masks=action_masks,
            reward=np.fromiter((obs.reward for obs in observations), np.float32, count=n)
            if reward is None
            else reward,
            done=np.fromiter((obs.done for obs in observations), np.bool_, count=n)
            if done is None
            else done,
            visible=visible,
            ids=self._keys(observations, features) if self.entity_keys else {},
            images=self._images(observations) if self.images else {},
        )

    def _images(self, observations: Sequence[Observation]) -> dict[str, npt.NDArray]:
        """Per declared image, every observation's stacked ``(rows, height, width, channels)``;
        a ValueError (which the step checks explain with the validator's message) naming the
        first observation whose image is missing or has another shape or dtype, instead of a
        silent cast."""
        images = {}
        for name, image in self.images.items():
            given = [obs.images.get(name) for obs in observations]
            try:
                stacked = np.stack(given)
            except (ValueError, TypeError):  # shapes differ: the first culprit says which
                stacked = None
            if stacked is None or stacked.shape[1:] != image.shape or stacked.dtype != image.dtype:
                for row, pixels in enumerate(given):
                    try:
                        checked_image(name, pixels, image)
                    except ValueError as err:
                        raise ValueError(f"observation {row}: {err}") from None
            images[name] = stacked
        return images

    def _keys(
        self, observations: Sequence[Observation], features: Mapping[str, RaggedArray]
    ) -> dict[str, RaggedArray]:
        """Per entity type, an int64 key of each entity's id: integer ids are their own keys,
        other ids a 64-bit digest of their ``repr`` (stable across processes and restarts,
        unlike ``hash`` of a string); entities without ids are keyed by position, as their
        default ids ``(type, i)`` are."""
        keys: dict[str, RaggedArray] = {}
        for name, feats in features.items():
            given = [obs.ids.get(name) for obs in observations]
            if all(ids is None for ids in given):
                data = feats.position_in_row()
            else:
                rows = [
                    range(n) if ids is None else ids
                    for ids, n in zip(given, feats.lengths, strict=True)
                ]
                data = _entity_keys(list(chain.from_iterable(rows)))
            keys[name] = RaggedArray(data.reshape(-1, 1), feats.lengths)
        return keys

    # ------------------------------------------------------------------ ragged actions -> Actions
    def unbatch(
        self, actions: Mapping[str, RaggedArray], observations: Sequence[Observation]
    ) -> list[dict[str, Action]]:
        """Split per-row actions into one ``{action name: Action}`` per environment.

        ``actions[name]`` holds, for each row, one row of values per actor: one int64 for
        categorical actions (the choice) and select-entity actions (the position in the row's
        actee list), one float32 per component for continuous actions (clipped to the bounds
        on the way to the environment); see :mod:`entityrl.env.actions`.
        """
        per_env: list[dict[str, Action]] = [{} for _ in observations]
        # One pass per action over the environments, the kind of action decided outside it:
        # this loop runs for every environment and action of every step.
        for name, space in self.action_space.items():
            chosen = actions.get(name)
            if chosen is None:
                continue
            to = Unbatching(observations, name, self.type_names, self._make[name])
            for i, action in self._kinds[name].unbatch(space, chosen, to):
                per_env[i][name] = action
        return per_env


class _EntityIndex:
    """Entity indices within the rows of one batch, for actor and actee specifications."""

    def __init__(
        self, batcher: Batcher, observations: Sequence[Observation], counts: npt.NDArray[np.int64]
    ) -> None:
        self.batcher = batcher
        self.observations = observations
        self.counts = counts
        self.starts = np.cumsum(counts, axis=1) - counts
        self.totals = counts.sum(axis=1)
        self._row_starts: list[list[int]] | None = None
        # Per row, every entity's index by id, built once per batch, on demand; None for a row
        # whose ids are their own indices.
        self._positions: dict[int, dict[EntityID, int] | None] = {}

    def select(self, selections: Sequence[Selection]) -> RaggedArray:
        """For each row, the indices of the entities its selection names, in the order named:
        the ids given; else all entities of the types given; else (both None) every entity."""
        n = len(selections)
        code_of = self.batcher.column_code
        codes: list[int] = []
        by_id: list[tuple[int, Sequence[EntityID]]] = []
        for i, selection in enumerate(selections):
            if selection is None:
                codes.append(0)
            elif selection[0] is not None:
                by_id.append((i, selection[0]))
                codes.append(0)
            else:
                codes.append(code_of(selection[1]))
        # Rows by type: the ranges of the selected columns, row after row, column after column.
        columns = self.batcher.column_table[np.array(codes, dtype=np.int64)]
        valid = columns >= 0
        rows = np.arange(n)[:, None]
        safe = np.where(valid, columns, 0)
        counts = np.where(valid, self.counts[rows, safe], 0)
        lengths = counts.sum(axis=1)
        data = ranges(self.starts[rows, safe].reshape(-1), counts.reshape(-1))
        if by_id:
            data, lengths = self._merge_ids(data, lengths, by_id)
        return RaggedArray(data.reshape(-1, 1), lengths)

    def _merge_ids(
        self,
        by_type: npt.NDArray[np.int64],
        lengths: npt.NDArray[np.int64],
        by_id: list[tuple[int, Sequence[EntityID]]],
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Insert the rows that name entities by id among the rows selected by type."""
        id_rows = np.fromiter((i for i, _ in by_id), dtype=np.int64, count=len(by_id))
        lengths[id_rows] = [len(ids) for _, ids in by_id]
        offsets = np.cumsum(lengths) - lengths
        merged = np.empty(int(lengths.sum()), dtype=np.int64)
        typed = np.ones(lengths.shape[0], dtype=np.bool_)
        typed[id_rows] = False
        merged[ranges(offsets[typed], lengths[typed])] = by_type
        named: list[int] = []
        for i, ids in by_id:
            named.extend(self._indices(i, ids))
        indices = np.array(named, dtype=np.int64)
        # Ids taken as their own indices (see _indices) are checked here, all rows at once.
        row_of = np.repeat(id_rows, lengths[id_rows])
        outside = np.flatnonzero((indices < 0) | (indices >= self.totals[row_of]))
        if outside.size:
            k = outside[0]
            raise KeyError(
                f"row {row_of[k]}: an action names entity id {indices[k]}, but the row's "
                f"entities are numbered 0 to {self.totals[row_of[k]] - 1}"
            )
        merged[ranges(offsets[id_rows], lengths[id_rows])] = indices
        return merged, lengths

    def _indices(self, row: int, ids: Sequence[EntityID]) -> Sequence[int]:
        """The indices within ``row`` of the entities ``ids`` names."""
        obs = self.observations[row]
        type_names = self.batcher.type_names
        for t, name in enumerate(type_names):
            if obs.ids.get(name) is ids:
                # A type's own id list (candidates often are) needs no lookup.
                if self._row_starts is None:
                    self._row_starts = self.starts.tolist()
                start = self._row_starts[row][t]
                return range(start, start + len(ids))
        if row not in self._positions:
            every = named_entities(obs, type_names)
            # Many environments number their entities 0, 1, 2, ... in the order they list
            # them: then an id is its index, and no dictionary needs building or reading.
            count = len(every)
            own = every == list(range(count))
            self._positions[row] = None if own else dict(zip(every, range(count), strict=True))
        position = self._positions[row]
        return ids if position is None else [position[x] for x in ids]  # type: ignore[return-value]


def _entity_keys(ids: Sequence[EntityID]) -> npt.NDArray[np.int64]:
    """One int64 key per id (see :meth:`Batcher._keys`)."""
    if all(isinstance(i, int | np.integer) and -(2**63) <= i < 2**63 for i in ids):
        return np.fromiter(ids, dtype=np.int64, count=len(ids))
    return np.fromiter(map(_digest, ids), dtype=np.int64, count=len(ids))


def _digest(entity_id: EntityID) -> int:
    digest = hashlib.blake2b(repr(entity_id).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


def checked_image(
    name: str, pixels: Any, image: Image, rows: tuple[int, ...] = ()
) -> npt.NDArray[Any]:
    """``pixels`` if it is an array of ``rows`` images of ``image``'s shape and dtype; else a
    ValueError naming image ``name``, what was expected and what came (no silent cast)."""
    if isinstance(pixels, np.ndarray):
        if pixels.shape == (*rows, *image.shape) and pixels.dtype == image.dtype:
            return pixels
        got = f"{pixels.shape[len(rows) :]} of {pixels.dtype}"
    else:
        got = "none" if pixels is None else type(pixels).__name__
    raise ValueError(f"image {name!r}: expected {image.shape} of {image.dtype}, got {got}")
