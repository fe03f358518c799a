"""Impossible or meaningless constructor arguments are refused with a message that says why."""

from __future__ import annotations

from typing import Any

import pytest

from entityrl.envs import make, make_vec

BAD_ARGUMENTS = [
    ("MoveToOrigin", {"max_steps": 0}, "max_steps must be >= 1, got 0"),
    ("CherryPick", {"num_cherries": 1}, "num_cherries must be >= 2"),
    ("PickMatchingBalls", {"max_balls": 0}, "max_balls must be >= 1, got 0"),
    (
        "PickMatchingBalls",
        {"max_balls": 2, "randomize": True},
        "max_balls must be >= 3 with randomize",
    ),
    ("Minefield", {"width": 10.0}, "width must be >= 30"),
    ("Minefield", {"max_mines": -1}, "max_mines >= 0"),
    (
        "MultiSnake",
        {"board_size": 3, "num_snakes": 2, "max_snake_length": 5},
        "3x3 board cannot hold 2 snakes",
    ),
    ("MultiSnake", {"max_snake_length": 1}, "max_snake_length >= 2"),
    ("Count", {"masked_choices": 11}, "masked_choices must be between 1 and 10, got 11"),
    ("FloorIsLava", {"width": 0}, "width must be >= 1"),
    ("MultiArmedBandit", {"num_steps": 0}, "num_steps must be >= 1"),
    ("TreasureHunt", {"num_traps": 100, "num_treasures": 30}, "at most 120 items"),
    ("TreasureHunt", {"num_treasures": 0}, "num_treasures >= 1"),
    ("MineSweeper", {"width": 2, "height": 2, "nmines": 4, "nrobots": 1}, "2x2 grid cannot hold"),
]


@pytest.mark.parametrize(("name", "kwargs", "message"), BAD_ARGUMENTS)
def test_bad_arguments_are_refused(name: str, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=name) as error:
        make(name, **kwargs)
    assert message in str(error.value)


def test_the_batched_cherry_pick_refuses_bad_arguments() -> None:
    with pytest.raises(ValueError, match="CherryPickBatched: num_cherries must be >= 2"):
        make_vec("CherryPickBatched", 4, num_cherries=1)
    with pytest.raises(ValueError, match="num_envs must be >= 1"):
        make_vec("CherryPickBatched", 0)


def test_treasure_hunt_says_when_traps_leave_too_little_room() -> None:
    env = make("TreasureHunt", num_traps=118, num_treasures=2)
    env.seed(0)
    with pytest.raises(RuntimeError, match="fewer than 2 reachable cells"):
        env.reset()
