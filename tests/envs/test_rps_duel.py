"""RockPaperScissorsDuel: the payoff of every pair of throws, for both players."""

from __future__ import annotations

import numpy as np
import pytest

from entityrl.env import CategoricalAction
from entityrl.envs import RockPaperScissorsDuel
from entityrl.envs.rps_duel import PAYOFF, THROWS


def throw(index: int) -> dict[str, CategoricalAction]:
    return {"throw": CategoricalAction([("Player", 0)], np.array([index]), THROWS)}


def test_payoff_is_the_game_of_rock_paper_scissors() -> None:
    rock, paper, scissors = range(3)
    assert PAYOFF[paper, rock] == PAYOFF[rock, scissors] == PAYOFF[scissors, paper] == 1
    np.testing.assert_array_equal(PAYOFF, -PAYOFF.T)
    np.testing.assert_array_equal(np.diag(PAYOFF), 0)


@pytest.mark.parametrize("first", range(3))
@pytest.mark.parametrize("second", range(3))
def test_each_player_is_paid_its_row_of_the_payoff(first: int, second: int) -> None:
    env = RockPaperScissorsDuel()
    start = env.reset()
    assert [obs.reward for obs in start.values()] == [0.0, 0.0]
    end = env.act({"0": throw(first), "1": throw(second)})
    assert end["0"].done and end["1"].done
    assert end["0"].reward == PAYOFF[first, second]
    assert end["1"].reward == PAYOFF[second, first] == -end["0"].reward
    assert THROWS[first] in env.render() and THROWS[second] in env.render()


def test_a_player_that_does_not_throw_is_refused() -> None:
    env = RockPaperScissorsDuel()
    env.reset()
    with pytest.raises(ValueError, match="player '1' must pick one of its 3 choices"):
        env.act({"0": throw(0), "1": {}})
