"""The MineSweeper walk-through of the Internals document, reproduced exactly.

Three environments in the states it gives are batched into the VecObs it shows, and the ragged
actions it shows travel back as the per-environment actions it shows.
"""

from __future__ import annotations

import numpy as np

from entityrl.env import (
    Batcher,
    CategoricalAction,
    RaggedArray,
    SelectEntityAction,
    VecCategoricalMask,
    VecSelectEntityMask,
)
from entityrl.envs.minesweeper import MineSweeper


def ragged(rows: list[list[list[float]]], dtype=np.float32, features: int | None = None):
    return RaggedArray.from_arrays(rows, features=features, dtype=dtype)


def walkthrough_states():
    envs = [MineSweeper(width=3, height=3) for _ in range(3)]
    observations = [
        envs[0].set_state([(0, 2), (0, 1), (2, 2), (0, 0), (1, 0)], [(1, 1)], 5, False),
        envs[1].set_state([(2, 1)], [(2, 0)], 0, True),
        envs[2].set_state([(1, 0), (0, 1), (2, 2)], [(0, 0), (2, 0)], 5, False),
    ]
    return envs, observations


def test_the_vec_obs_of_the_walkthrough() -> None:
    envs, observations = walkthrough_states()
    vec = Batcher(envs[0].obs_space(), envs[0].action_space()).batch(observations)

    assert list(vec.features) == ["Mine", "Robot", "Orbital Cannon"]
    assert vec.features["Mine"] == ragged(
        [[[0, 2], [0, 1], [2, 2], [0, 0], [1, 0]], [[2, 1]], [[1, 0], [0, 1], [2, 2]]]
    )
    assert vec.features["Robot"] == ragged([[[1, 1]], [[2, 0]], [[0, 0], [2, 0]]])
    assert vec.features["Orbital Cannon"] == ragged([[], [[0.0]], []], features=1)

    move = vec.action_masks["Move"]
    assert isinstance(move, VecCategoricalMask)
    assert move.actors == ragged([[[5]], [[1]], [[3], [4]]], dtype=np.int64)
    assert move.mask == ragged(
        [
            [[True, True, True, True, True]],
            [[False, True, True, False, True]],
            [[True, False, True, False, True], [False, True, True, False, True]],
        ],
        dtype=np.bool_,
    )
    fire = vec.action_masks["Fire Orbital Cannon"]
    assert isinstance(fire, VecSelectEntityMask)
    assert fire.actors == ragged([[], [[2]], []], dtype=np.int64, features=1)
    assert fire.actees == ragged([[], [[0], [1]], []], dtype=np.int64, features=1)
    np.testing.assert_array_equal(vec.reward, np.zeros(3, np.float32))
    np.testing.assert_array_equal(vec.done, np.zeros(3, np.bool_))


def test_the_padding_metadata_of_the_walkthrough() -> None:
    _, observations = walkthrough_states()
    envs = MineSweeper(width=3, height=3)
    vec = Batcher(envs.obs_space(), envs.action_space()).batch(observations)
    entities = RaggedArray.from_flat(np.arange(14, dtype=np.int64), vec.entity_counts())
    pad = entities.padding()
    np.testing.assert_array_equal(
        pad.index, [[0, 1, 2, 3, 4, 5], [6, 7, 8, 0, 0, 0], [9, 10, 11, 12, 13, 0]]
    )
    nan = np.nan
    np.testing.assert_array_equal(
        pad.batch, [[0, 0, 0, 0, 0, 0], [1, 1, 1, nan, nan, nan], [2, 2, 2, 2, 2, nan]]
    )
    np.testing.assert_array_equal(
        pad.inverse_index, [0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 13, 14, 15, 16]
    )
    # "actors + offsets": Move actors shifted by each row's first entity index.
    move = Batcher(envs.obs_space(), envs.action_space()).batch(observations).action_masks["Move"]
    shifted = move.actors.add_per_row(entities.offsets[:-1])
    assert shifted == ragged([[[5]], [[7]], [[12], [13]]], dtype=np.int64)


def test_the_actions_of_the_walkthrough_reach_the_environments() -> None:
    envs, observations = walkthrough_states()
    batcher = Batcher(envs[0].obs_space(), envs[0].action_space())
    actions = {
        "Fire Orbital Cannon": ragged([[], [[0]], []], dtype=np.int64, features=1),
        "Move": ragged([[[4]], [[1]], [[4], [2]]], dtype=np.int64),
    }
    per_env = batcher.unbatch(actions, observations)

    expected = [
        ([], [], [("Robot", 0)], [4]),
        ([("Orbital Cannon", 0)], [("Mine", 0)], [("Robot", 0)], [1]),
        ([], [], [("Robot", 0), ("Robot", 1)], [4, 2]),
    ]
    for got, (fire_actors, fire_actees, move_actors, move_choices) in zip(
        per_env, expected, strict=True
    ):
        fire = got.get("Fire Orbital Cannon", SelectEntityAction([], []))
        assert isinstance(fire, SelectEntityAction)
        assert list(fire.actors) == fire_actors and list(fire.actees) == fire_actees
        move = got["Move"]
        assert isinstance(move, CategoricalAction)
        assert list(move.actors) == move_actors
        assert move.indices.tolist() == move_choices
