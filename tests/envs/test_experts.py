"""The scripted experts play their environments optimally, from the observation alone."""

from __future__ import annotations

import numpy as np
import pytest

from entityrl.envs import make_vec
from entityrl.envs.experts import EXPERTS, TreasureHuntExpert, ball_colors
from entityrl.training import evaluate

# (environment, constructor arguments, the optimal return of every episode)
CASES = [
    ("CherryPick", {}, 1.0),
    ("PickMatchingBalls", {"one_hot": True}, 1.0),
    ("PickMatchingBalls", {"randomize": True, "max_balls": 12}, 1.0),
    ("TreasureHunt", {}, 5.0),
    ("TreasureHunt", {"num_traps": 20, "num_treasures": 8}, 8.0),
    ("ContinuousMoveToOrigin", {}, 1.0),
]


@pytest.mark.parametrize(("name", "kwargs", "optimum"), CASES)
def test_every_episode_reaches_the_optimal_return(name: str, kwargs: dict, optimum: float) -> None:
    env = make_vec(name, 8, seed=0, validate=True, **kwargs)
    result = evaluate(EXPERTS[name](), env, episodes=100)
    np.testing.assert_allclose(result.returns, optimum, rtol=1e-5)


def test_ball_colors_read_one_hot_and_repeated_features() -> None:
    one_hot = np.eye(6, dtype=np.float32)[[0, 5, 2]]
    repeated = np.repeat(np.array([[0], [5], [1]], dtype=np.float32), 6, axis=1)
    assert ball_colors(one_hot).tolist() == [0, 5, 2]
    assert ball_colors(repeated).tolist() == [0, 5, 1]


def test_treasure_hunt_walks_around_a_trap() -> None:
    # Treasure two cells to the right behind a trap: the first step goes up or down, not right.
    move = TreasureHuntExpert().first_move((0, 0), goals={(2, 0)}, walls={(1, 0)})
    assert move in (0, 1)  # up, down
    assert TreasureHuntExpert().first_move((0, 0), goals={(0, -3)}, walls=set()) == 1  # down
