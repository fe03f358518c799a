"""MatrixGame: each seat's reward, observation and legal choices, from the payoff matrix."""

from __future__ import annotations

import numpy as np
import pytest

from entityrl.env import CategoricalAction
from entityrl.envs import MatrixGame
from entityrl.training.matrix_games import equilibrium_suite


def pick(index: int) -> dict[str, CategoricalAction]:
    return {"choice": CategoricalAction([("Player", 0)], np.array([index]))}


@pytest.mark.parametrize(("row", "column"), [(0, 0), (0, 1), (2, 0), (2, 1)])
def test_the_row_player_wins_the_payoff_and_the_column_player_loses_it(row, column) -> None:
    payoff = [[1.0, -2.0], [0.5, 0.0], [-1.5, 3.0]]
    env = MatrixGame(payoff)
    start = env.reset()
    assert [obs.reward for obs in start.values()] == [0.0, 0.0]
    end = env.act({"row": pick(row), "column": pick(column)})
    assert end["row"].done and end["column"].done
    assert end["row"].reward == payoff[row][column] == -end["column"].reward
    assert f"row: {row}" in env.render() and f"column: {column}" in env.render()


def test_each_seat_observes_which_it_is_and_only_its_own_choices() -> None:
    env = MatrixGame([[1.0, -2.0], [0.5, 0.0], [-1.5, 3.0]])
    assert len(env.action_space()["choice"]) == 3
    start = env.reset()
    assert start["row"].features["Player"].tolist() == [[0.0]]
    assert start["column"].features["Player"].tolist() == [[1.0]]
    assert start["row"].actions["choice"].mask is None
    np.testing.assert_array_equal(start["column"].actions["choice"].mask, [[True, True, False]])
    with pytest.raises(ValueError, match="player 'column' must pick one of its 2 choices"):
        env.act({"row": pick(0), "column": pick(2)})


def test_without_a_payoff_the_game_comes_from_the_suite() -> None:
    np.testing.assert_array_equal(MatrixGame(game=3).payoff, equilibrium_suite(4)[3][0])
    with pytest.raises(ValueError, match="game must be >= 0, got -1"):
        MatrixGame(game=-1)
    with pytest.raises(ValueError, match=r"MatrixGame: payoff must be a finite"):
        MatrixGame([1.0, 2.0])  # type: ignore[list-item]
