"""Batches split and joined: VecObs.concat and VecObs.take agree with batching the rows
directly, and the random policy only picks legal actions, each legal one sometimes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import batches
from vec_env_checks import assert_vec_obs_equal

from entityrl.env import (
    Batcher,
    CategoricalActionMask,
    CategoricalActionSpace,
    Entity,
    GlobalCategoricalActionMask,
    GlobalCategoricalActionSpace,
    Observation,
    ObsSpace,
    RandomPolicy,
    SelectEntityActionMask,
    SelectEntityActionSpace,
    VecObs,
)

Case = tuple[ObsSpace, dict[str, Any], list[Observation]]
PROPERTY = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def choices(action_space: dict[str, Any]) -> dict[str, int]:
    return {name: len(space) for name, space in action_space.items() if hasattr(space, "choices")}


@PROPERTY
@given(batches(), st.data())
def test_concat_of_parts_is_the_batch_of_all(case: Case, data: st.DataObject) -> None:
    obs_space, action_space, observations = case
    batcher = Batcher(obs_space, action_space)
    cut = data.draw(st.integers(0, len(observations)))
    parts = [batcher.batch(part) for part in (observations[:cut], observations[cut:]) if part]
    assert_vec_obs_equal(VecObs.concat(parts, choices(action_space)), batcher.batch(observations))


@PROPERTY
@given(batches(), st.data())
def test_take_is_the_batch_of_the_taken_rows(case: Case, data: st.DataObject) -> None:
    obs_space, action_space, observations = case
    batcher = Batcher(obs_space, action_space)
    rows = data.draw(st.lists(st.integers(0, len(observations) - 1), min_size=1, max_size=6))
    taken = batcher.batch(observations).take(np.array(rows))
    direct = batcher.batch([observations[r] for r in rows])
    # Taking rows keeps masks and visibility of the whole batch (all True where none was given).
    for name, mask in direct.action_masks.items():
        if mask.mask is None and taken.action_masks[name].mask is not None:
            assert taken.action_masks[name].mask.data.all()  # type: ignore[union-attr]
            taken.action_masks[name].mask = None
    for name in list(taken.visible):
        if name not in direct.visible:
            assert taken.visible[name].data.all()
            del taken.visible[name]
    assert_vec_obs_equal(taken, direct)


def test_random_policy_picks_every_legal_choice_and_nothing_else() -> None:
    obs_space = ObsSpace(entities={"Unit": Entity(["x"])})
    action_space = {
        "Move": CategoricalActionSpace(["a", "b", "c"]),
        "Target": SelectEntityActionSpace(),
        "Plan": GlobalCategoricalActionSpace(["p", "q", "r"]),
    }
    obs = Observation(
        features={"Unit": [[0.0], [1.0], [2.0]]},
        actions={
            "Move": CategoricalActionMask(
                mask=[[True, False, True], [False, True, False], [True] * 3]
            ),
            "Target": SelectEntityActionMask(actor_ids=[("Unit", 0)], mask=[[False, True, True]]),
            "Plan": GlobalCategoricalActionMask(mask=[False, False, True]),
        },
    )
    vec = Batcher(obs_space, action_space).batch([obs] * 500)
    actions = RandomPolicy(action_space, seed=0).act(vec)
    move = actions["Move"].data[:, 0].reshape(500, 3)
    assert set(move[:, 0]) == {0, 2}
    assert set(move[:, 1]) == {1}
    assert set(move[:, 2]) == {0, 1, 2}
    assert set(actions["Target"].data[:, 0]) == {1, 2}
    assert set(actions["Plan"].data[:, 0]) == {2}
    # Roughly uniform: each of two legal choices about half the time.
    assert 0.4 < (move[:, 0] == 0).mean() < 0.6


def picking(ids: dict[str, list[Any]], picker: list[Any], targets: list[Any]) -> Observation:
    return Observation(
        features={"Ball": np.zeros((len(ids["Ball"]), 1)), "Hand": np.zeros((1, 0))},
        ids=ids,
        actions={"pick": SelectEntityActionMask(actor_ids=picker, actee_ids=targets)},
    )


def test_integer_ids_numbered_in_order_select_the_same_entities_as_any_ids() -> None:
    # Environments often number their entities 0, 1, 2, ... in the order they list them; the
    # batcher then takes the ids as indices. Named differently, the same choices must give the
    # same indices.
    space = ObsSpace({"Ball": Entity(["x"]), "Hand": Entity([])})
    batcher = Batcher(space, {"pick": SelectEntityActionSpace()})
    rows = [(4, [3, 0, 2]), (2, [1]), (3, [0, 1, 2])]
    numbered = [
        picking({"Ball": list(range(n)), "Hand": [n]}, [n], list(targets)) for n, targets in rows
    ]
    named = [
        picking(
            {"Ball": [f"b{i}" for i in range(n)], "Hand": ["hand"]},
            ["hand"],
            [f"b{i}" for i in targets],
        )
        for n, targets in rows
    ]
    ours, reference = batcher.batch(numbered), batcher.batch(named)
    for part in ("actors", "actees"):
        got = getattr(ours.action_masks["pick"], part)
        want = getattr(reference.action_masks["pick"], part)
        np.testing.assert_array_equal(got.data, want.data)
        np.testing.assert_array_equal(got.lengths, want.lengths)
    np.testing.assert_array_equal(ours.action_masks["pick"].actors.data[:, 0], [4, 2, 3])
    # An id past the row's entities is named, with its row.
    bad = [*numbered[:2], picking({"Ball": [0, 1, 2], "Hand": [3]}, [3], [0, 7])]
    with pytest.raises(KeyError, match="row 2: an action names entity id 7"):
        batcher.batch(bad)
