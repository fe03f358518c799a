"""Between per-environment objects and batches: Observations -> VecObs, ragged actions -> Actions.

This is the only place that walks over individual environments; it does one pass per
environment and entity type and leaves everything per entity to numpy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from entityrl.env.observation import (
    Action,
    CategoricalAction,
    EntityID,
    GlobalCategoricalAction,
    GlobalCategoricalActionMask,
    Observation,
    SelectEntityAction,
    SelectEntityActionMask,
)
from entityrl.env.spaces import (
    ActionSpace,
    CategoricalActionSpace,
    GlobalCategoricalActionSpace,
    ObsSpace,
    SelectEntityActionSpace,
)
from entityrl.env.vec_obs import VecActionMask, VecCategoricalMask, VecObs, VecSelectEntityMask
from entityrl.ragged import RaggedArray

_EMPTY_INDEX = np.zeros(0, dtype=np.int64)


class Batcher:
    """Converts between one observation per environment and the batched :class:`VecObs`."""

    def __init__(self, obs_space: ObsSpace, action_space: Mapping[str, ActionSpace]) -> None:
        self.obs_space = obs_space
        self.action_space = dict(action_space)
        self.type_names = list(obs_space.entities)
        self.num_features = [len(e.features) for e in obs_space.entities.values()]
        self.type_column = {name: t for t, name in enumerate(self.type_names)}
        self.num_global = len(obs_space.global_features)

    # ------------------------------------------------------------------ observations -> VecObs
    def batch(self, observations: Sequence[Observation]) -> VecObs:
        """Stack observations into one :class:`VecObs` (reward and done taken from each)."""
        n = len(observations)
        counts = np.zeros((n, len(self.type_names)), dtype=np.int64)
        features: dict[str, RaggedArray] = {}
        visible: dict[str, RaggedArray] = {}
        for t, (name, width) in enumerate(zip(self.type_names, self.num_features, strict=True)):
            arrays = []
            for i, obs in enumerate(observations):
                feats = obs.features.get(name)
                if feats is None:
                    continue
                array = np.asarray(feats, dtype=np.float32)
                if array.ndim == 1 and array.size == 0:  # an empty list of rows
                    array = array.reshape(0, width)
                counts[i, t] = array.shape[0]
                arrays.append(array)
            data = np.concatenate(arrays) if arrays else np.zeros((0, width), dtype=np.float32)
            lengths = counts[:, t].copy()
            features[name] = RaggedArray(data, lengths)
            if any(name in obs.visible for obs in observations):
                visible[name] = self._visible(observations, name, lengths)

        starts = np.cumsum(counts, axis=1) - counts
        totals = counts.sum(axis=1)
        resolver = _IndexResolver(self, observations, starts, counts, totals)
        action_masks = {
            name: self._action_mask(name, space, observations, resolver)
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
            reward=np.fromiter((obs.reward for obs in observations), np.float32, count=n),
            done=np.fromiter((obs.done for obs in observations), np.bool_, count=n),
            visible=visible,
        )

    @staticmethod
    def _visible(
        observations: Sequence[Observation], name: str, lengths: npt.NDArray[np.int64]
    ) -> RaggedArray:
        parts = [
            np.asarray(obs.visible[name], dtype=np.bool_).reshape(-1)
            if name in obs.visible
            else np.ones(int(length), dtype=np.bool_)
            for obs, length in zip(observations, lengths, strict=True)
        ]
        return RaggedArray(np.concatenate(parts).reshape(-1, 1), lengths)

    def _action_mask(
        self,
        name: str,
        space: ActionSpace,
        observations: Sequence[Observation],
        resolver: _IndexResolver,
    ) -> VecActionMask:
        n = len(observations)
        actor_parts: list[npt.NDArray[np.int64]] = []
        actee_parts: list[npt.NDArray[np.int64]] = []
        mask_parts: list[npt.NDArray[np.bool_] | None] = []
        actor_lengths = np.zeros(n, dtype=np.int64)
        actee_lengths = np.zeros(n, dtype=np.int64)
        present = np.zeros(n, dtype=np.bool_)
        for i, obs in enumerate(observations):
            spec = obs.actions.get(name)
            if spec is None:
                continue
            present[i] = True
            if isinstance(spec, GlobalCategoricalActionMask):
                actors = resolver.totals[i : i + 1]
            else:
                actors = resolver.indices(i, spec.actor_ids, spec.actor_types)
            actor_lengths[i] = actors.shape[0]
            actor_parts.append(actors)
            mask = None if spec.mask is None else np.asarray(spec.mask, dtype=np.bool_)
            if isinstance(spec, SelectEntityActionMask):
                # Candidates matter only to actors; rows without actors carry none.
                actees = (
                    resolver.indices(i, spec.actee_ids, spec.actee_types)
                    if actors.shape[0]
                    else _EMPTY_INDEX
                )
                actee_lengths[i] = actees.shape[0]
                actee_parts.append(actees)
                mask_parts.append(None if mask is None else mask.reshape(-1, 1))
            else:
                width = len(space)  # type: ignore[arg-type]
                mask_parts.append(None if mask is None else mask.reshape(-1, width))

        actors_ragged = _index_ragged(actor_parts, actor_lengths)
        if isinstance(space, SelectEntityActionSpace):
            sizes = actor_lengths * actee_lengths
            mask = _mask_ragged(mask_parts, sizes[present], 1, sizes)
            return VecSelectEntityMask(
                actors_ragged, _index_ragged(actee_parts, actee_lengths), mask
            )
        width = len(space)  # type: ignore[arg-type]
        return VecCategoricalMask(
            actors_ragged, _mask_ragged(mask_parts, actor_lengths[present], width, actor_lengths)
        )

    # ------------------------------------------------------------------ ragged actions -> Actions
    def unbatch(
        self, actions: Mapping[str, RaggedArray], observations: Sequence[Observation]
    ) -> list[dict[str, Action]]:
        """Split per-row actions into one ``{action name: Action}`` per environment.

        ``actions[name]`` holds, for each row, one int64 per actor: the choice index for
        categorical actions, or the position in the row's actee list for select-entity actions.
        """
        per_env: list[dict[str, Action]] = [{} for _ in observations]
        for name, space in self.action_space.items():
            chosen = actions.get(name)
            if chosen is None:
                continue
            rows = chosen.to_list()
            for i, (obs, row) in enumerate(zip(observations, rows, strict=True)):
                spec = obs.actions.get(name)
                if spec is None:
                    continue
                values = row[:, 0]
                if isinstance(space, GlobalCategoricalActionSpace):
                    index = int(values[0])
                    per_env[i][name] = GlobalCategoricalAction(index, space.choices[index])
                    continue
                actor_ids = obs.named_entities(self.type_names, spec.actor_ids, spec.actor_types)  # type: ignore[union-attr]
                if isinstance(space, CategoricalActionSpace):
                    per_env[i][name] = CategoricalAction(actor_ids, values, space.choices)
                else:
                    assert isinstance(spec, SelectEntityActionMask)
                    candidates = obs.named_entities(
                        self.type_names, spec.actee_ids, spec.actee_types
                    )
                    per_env[i][name] = SelectEntityAction(
                        actor_ids, [candidates[j] for j in values.tolist()]
                    )
        return per_env


class _IndexResolver:
    """Maps actor/actee specifications of one batch of observations to entity indices."""

    def __init__(
        self,
        batcher: Batcher,
        observations: Sequence[Observation],
        starts: npt.NDArray[np.int64],
        counts: npt.NDArray[np.int64],
        totals: npt.NDArray[np.int64],
    ) -> None:
        self.batcher = batcher
        self.observations = observations
        self.starts = starts
        self.counts = counts
        self.totals = totals
        self._id_maps: dict[int, dict[EntityID, int]] = {}

    def indices(
        self, i: int, ids: Sequence[EntityID] | None, types: Sequence[str] | None
    ) -> npt.NDArray[np.int64]:
        if ids is not None:
            id_map = self._id_maps.get(i)
            if id_map is None:
                id_map = self._id_maps[i] = self._id_map(i)
            return np.fromiter((id_map[x] for x in ids), dtype=np.int64, count=len(ids))
        if types is None:
            return np.arange(self.totals[i], dtype=np.int64)
        column = self.batcher.type_column
        parts = [
            np.arange(self.starts[i, c], self.starts[i, c] + self.counts[i, c], dtype=np.int64)
            for c in (column[t] for t in types)
        ]
        if not parts:
            return _EMPTY_INDEX
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def _id_map(self, i: int) -> dict[EntityID, int]:
        ids = self.observations[i].named_entities(self.batcher.type_names)
        return dict(zip(ids, range(len(ids)), strict=True))


def _index_ragged(
    parts: list[npt.NDArray[np.int64]], lengths: npt.NDArray[np.int64]
) -> RaggedArray:
    data = np.concatenate(parts) if parts else _EMPTY_INDEX
    return RaggedArray(data.reshape(-1, 1), lengths)


def _mask_ragged(
    parts: list[npt.NDArray[np.bool_] | None],
    part_sizes: npt.NDArray[np.int64],
    width: int,
    lengths: npt.NDArray[np.int64],
) -> RaggedArray | None:
    """One ragged mask from the masks given per environment; None where none was given."""
    if all(p is None for p in parts):
        return None
    filled = [
        np.ones((int(size), width), dtype=np.bool_) if p is None else p
        for p, size in zip(parts, part_sizes, strict=True)
    ]
    return RaggedArray(np.concatenate(filled), lengths)
