"""Between per-environment objects and batches: Observations -> VecObs, ragged actions -> Actions.

This is the only place that walks over individual environments. The walk only collects what
each environment gave (one short pass per environment, entity type and action); conversion to
numpy happens once per batch, and everything per entity is vectorized.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from itertools import chain
from typing import Any

import numpy as np
import numpy.typing as npt

from entityrl.env.observation import (
    Action,
    CategoricalAction,
    EntityID,
    GlobalCategoricalAction,
    Observation,
    SelectEntityAction,
    named_entities,
)
from entityrl.env.spaces import (
    ActionSpace,
    CategoricalActionSpace,
    GlobalCategoricalActionSpace,
    ObsSpace,
    SelectEntityActionSpace,
)
from entityrl.env.vec_obs import VecActionMask, VecCategoricalMask, VecObs, VecSelectEntityMask
from entityrl.ragged import RaggedArray, ranges

Selection = tuple[Sequence[EntityID] | None, Sequence[str] | None] | None
"""Which entities of a row an actor or actee specification names: ``(ids, types)``, or None
for no entity at all (action not offered, or candidates of a row without actors)."""


ActionConstructor = Callable[..., Any]
"""Builds the action handed to an environment, from the arguments of entityrl's own action
classes (in their order): ``(actors, indices, choices)`` for a categorical action,
``(actors, actees)`` for a select-entity action, ``(index, label)`` for a global one."""

_OWN_ACTIONS: dict[type[ActionSpace], ActionConstructor] = {
    CategoricalActionSpace: CategoricalAction,
    SelectEntityActionSpace: SelectEntityAction,
    GlobalCategoricalActionSpace: GlobalCategoricalAction,
}


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
        # Each distinct type selection gets a code: its row in a table of the selected
        # columns (padded with -1 to one per type). Code 0 selects nothing.
        self._column_codes: dict[tuple[str, ...] | None, int] = {(): 0}
        self.column_table = np.full((1, len(self.type_names)), -1, dtype=np.int64)
        self._make = {name: _OWN_ACTIONS[type(space)] for name, space in self.action_space.items()}
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
            data = _stack([rows for rows in given if rows is not None], width, np.float32)
            features[name] = RaggedArray(data, lengths)
            shown = [
                (i, obs.visible[name]) for i, obs in enumerate(observations) if name in obs.visible
            ]
            if shown:
                visible[name] = _fill_rows(shown, lengths, [flags for _, flags in shown], 1)

        index = _EntityIndex(self, observations, counts)
        action_masks = {
            name: self._action_mask(name, space, observations, index)
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
        )

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

    def _action_mask(
        self,
        name: str,
        space: ActionSpace,
        observations: Sequence[Observation],
        index: _EntityIndex,
    ) -> VecActionMask:
        specs = [obs.actions.get(name) for obs in observations]
        if isinstance(space, GlobalCategoricalActionSpace):
            # The actor is the row's pseudo-entity, indexed after all real entities.
            present = np.fromiter((s is not None for s in specs), np.bool_, count=len(specs))
            actors = RaggedArray(index.totals[present].reshape(-1, 1), present.astype(np.int64))
            masks = [
                (i, s.mask) for i, s in enumerate(specs) if s is not None and s.mask is not None
            ]
            # A global mask is one row of choices: wrap it so it stacks like actor rows.
            return VecCategoricalMask(
                actors, _fill_rows(masks, actors.lengths, [[m] for _, m in masks], len(space))
            )
        actors = index.select([None if s is None else (s.actor_ids, s.actor_types) for s in specs])  # type: ignore[union-attr]
        masks = [(i, s.mask) for i, s in enumerate(specs) if s is not None and s.mask is not None]
        if isinstance(space, CategoricalActionSpace):
            return VecCategoricalMask(
                actors, _fill_rows(masks, actors.lengths, [m for _, m in masks], len(space))
            )
        # Candidates matter only to actors; rows without actors carry none.
        acting = actors.lengths > 0
        actees = index.select(
            [
                (s.actee_ids, s.actee_types) if acting[i] else None  # type: ignore[union-attr]
                for i, s in enumerate(specs)
            ]
        )
        # Select-entity masks are (actors, actees) per row, stored flat and actor-major.
        flat = [np.asarray(m, dtype=np.bool_).reshape(-1) for _, m in masks]
        mask = _fill_rows(masks, actors.lengths * actees.lengths, flat, 1)
        return VecSelectEntityMask(actors, actees, mask)

    # ------------------------------------------------------------------ ragged actions -> Actions
    def unbatch(
        self, actions: Mapping[str, RaggedArray], observations: Sequence[Observation]
    ) -> list[dict[str, Action]]:
        """Split per-row actions into one ``{action name: Action}`` per environment.

        ``actions[name]`` holds, for each row, one int64 per actor: the choice index for
        categorical actions, or the position in the row's actee list for select-entity actions.
        """
        per_env: list[dict[str, Action]] = [{} for _ in observations]
        type_names = self.type_names
        # One pass per action over the environments, the kind of action decided outside it:
        # this loop runs for every environment and action of every step.
        for name, space in self.action_space.items():
            chosen = actions.get(name)
            if chosen is None:
                continue
            make = self._make[name]
            kind = type(space)
            choices = getattr(space, "choices", None)
            values = chosen.data[:, 0]
            bounds = chosen.offsets.tolist()
            for i, obs in enumerate(observations):
                spec = obs.actions.get(name)
                if spec is None:
                    continue
                lo, hi = bounds[i], bounds[i + 1]
                if kind is GlobalCategoricalActionSpace:
                    index = int(values[lo])
                    per_env[i][name] = make(index, choices[index])  # type: ignore[index]
                    continue
                # Rows without actors are common (an action offered to nobody this step):
                # naming the actors and candidates would be wasted work.
                actors = (
                    named_entities(obs, type_names, spec.actor_ids, spec.actor_types)
                    if hi > lo
                    else []
                )
                if len(actors) != hi - lo:  # ids that do not match the entities batched
                    raise ValueError(
                        f"row {i}: action {name!r}: {hi - lo} actors were batched, but their "
                        f"ids name {len(actors)}"
                    )
                if kind is CategoricalActionSpace:
                    per_env[i][name] = make(actors, values[lo:hi], choices)
                elif hi > lo:
                    candidates = named_entities(obs, type_names, spec.actee_ids, spec.actee_types)
                    per_env[i][name] = make(actors, [candidates[j] for j in values[lo:hi].tolist()])
                else:
                    per_env[i][name] = make([], [])
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


def _stack(blocks: Sequence[Any], width: int, dtype: npt.DTypeLike) -> npt.NDArray[Any]:
    """Blocks of rows (each an array or a list of rows of ``width`` values) as one
    ``(rows, width)`` array. Lists are joined first and converted in one numpy call, which is
    far cheaper than converting many short lists one by one."""
    if blocks and all(type(block) is np.ndarray and block.ndim == 2 for block in blocks):
        # The common case, one 2-D array per environment: no per-block conversion.
        stacked = np.concatenate(blocks, dtype=dtype, casting="unsafe")  # type: ignore[arg-type]
        if stacked.shape[1] == width:
            return stacked
    if any(isinstance(block, np.ndarray) for block in blocks):
        arrays = [np.asarray(block, dtype=dtype).reshape(len(block), width) for block in blocks]
        return np.concatenate(arrays) if arrays else np.zeros((0, width), dtype=dtype)
    rows = list(chain.from_iterable(blocks))
    return np.array(rows, dtype=dtype).reshape(len(rows), width)


def _fill_rows(
    given: Sequence[tuple[int, Any]],
    lengths: npt.NDArray[np.int64],
    blocks: Sequence[Any],
    width: int,
) -> RaggedArray | None:
    """A boolean ragged array of ``lengths`` rows of ``width`` flags: True everywhere except
    in the rows ``given`` (their numbers), which hold ``blocks``. None if no row is given."""
    if not given:
        return None
    data = np.ones((int(lengths.sum()), width), dtype=np.bool_)
    rows = np.fromiter((i for i, _ in given), dtype=np.int64, count=len(given))
    offsets = np.cumsum(lengths) - lengths
    data[ranges(offsets[rows], lengths[rows])] = _stack(blocks, width, np.bool_)
    return RaggedArray(data, lengths)
