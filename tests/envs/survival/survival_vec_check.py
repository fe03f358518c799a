"""A batch-level consistency check of a VecObs against its spaces, vectorized so it can run on
every step of long random rollouts."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from entityrl.env import (
    ActionSpace,
    CategoricalActionSpace,
    GlobalCategoricalActionSpace,
    ObsSpace,
    SelectEntityActionSpace,
    VecCategoricalMask,
    VecObs,
    VecSelectEntityMask,
)
from entityrl.ragged import RaggedArray


def check_vec_obs(
    obs: VecObs, obs_space: ObsSpace, action_space: Mapping[str, ActionSpace], rows: int
) -> None:
    """Assert that ``obs`` is a well-formed batch of ``rows`` rows: entity features of the
    declared widths and finite; actors and actees that exist in their row; every actor has a
    legal choice (or candidate); a global action's actor is the row's pseudo-entity."""
    assert list(obs.features) == list(obs_space.entities)
    counts = np.zeros(rows, dtype=np.int64)
    for name, entity in obs_space.entities.items():
        feats = obs.features[name]
        assert feats.data.dtype == np.float32, name
        assert feats.features == len(entity.features), name
        _check_rows(feats, rows, name)
        assert np.isfinite(feats.data).all(), f"{name}: non-finite features"
        counts += feats.lengths
    assert obs.global_features.shape == (rows, len(obs_space.global_features))
    assert obs.global_features.dtype == np.float32
    assert np.isfinite(obs.global_features).all(), "non-finite global features"
    assert obs.reward.shape == (rows,) and np.isfinite(obs.reward).all()
    assert obs.done.shape == (rows,) and obs.done.dtype == np.bool_
    assert set(obs.action_masks) == set(action_space)
    for name, space in action_space.items():
        mask = obs.action_masks[name]
        actors = mask.actors
        _check_rows(actors, rows, name)
        row = actors.row_index()
        index = actors.data[:, 0]
        pairs = row * (counts.max(initial=0) + 2) + index
        assert np.unique(pairs).size == pairs.size, f"{name}: an actor listed twice in a row"
        if isinstance(space, GlobalCategoricalActionSpace):
            assert isinstance(mask, VecCategoricalMask), name
            assert (index == counts[row]).all(), f"{name}: global actor is not the pseudo-entity"
        else:
            assert ((index >= 0) & (index < counts[row])).all(), f"{name}: actor not in its row"
        if isinstance(space, (CategoricalActionSpace, GlobalCategoricalActionSpace)):
            assert isinstance(mask, VecCategoricalMask), name
            if mask.mask is not None:
                assert mask.mask.data.shape == (actors.items, len(space)), name
                assert np.array_equal(mask.mask.lengths, actors.lengths), name
                assert mask.mask.data.any(axis=1).all(), f"{name}: an actor with no legal choice"
        else:
            assert isinstance(space, SelectEntityActionSpace)
            assert isinstance(mask, VecSelectEntityMask), name
            actees = mask.actees
            _check_rows(actees, rows, name)
            actee_row = actees.row_index()
            candidate = actees.data[:, 0]
            assert ((candidate >= 0) & (candidate < counts[actee_row])).all(), (
                f"{name}: actee not in its row"
            )
            assert (actees.lengths[actors.lengths > 0] > 0).all(), f"{name}: nothing to select"
            if mask.mask is not None:
                sizes = actors.lengths * actees.lengths
                assert np.array_equal(mask.mask.lengths, sizes), name
                per_actor = np.repeat(actees.lengths, actors.lengths)
                starts = np.cumsum(per_actor) - per_actor
                assert np.logical_or.reduceat(mask.mask.data[:, 0], starts).all(), name


def _check_rows(array: RaggedArray, rows: int, name: str) -> None:
    assert array.size0 == rows, f"{name}: {array.size0} rows for {rows} environments"
    assert (array.lengths >= 0).all() and array.lengths.sum() == array.items, name
