"""NashConv of any two-player zero-sum matrix game, the completely mixed equilibrium of a small
game and the suite of games with mixed equilibria, against hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

from entityrl.envs.rps_duel import PAYOFF
from entityrl.training.matrix_games import (
    completely_mixed_equilibrium,
    equilibrium_suite,
    exploitability,
    nash_conv,
)

# Row player's equilibrium: 2x - (1 - x) = -x + (1 - x), x = 0.4; column: y = 0.4; value 0.2.
SKEWED = [[2.0, -1.0], [-1.0, 1.0]]


def test_nash_conv_adds_both_seats_best_response_gains() -> None:
    # Both play the first choice: the row player gets 2 and cannot do better; the column
    # player gets -2 and would get +1 with its second choice: a gain of 3.
    result = nash_conv([1, 0], [1, 0], SKEWED)
    assert (result.row_gain, result.column_gain) == (0.0, 3.0)
    assert result.total == 3.0 and result.half == 1.5
    # Uniform play: the row player's replies earn 0.5 and 0 (it earns 0.25), the column
    # player's pay -0.5 and 0 in its own terms (it pays 0.25): gains 0.25 each.
    result = nash_conv([0.5, 0.5], [0.5, 0.5], SKEWED)
    assert result.row_gain == pytest.approx(0.25) and result.column_gain == pytest.approx(0.25)
    assert nash_conv([0.4, 0.6], [0.4, 0.6], SKEWED).total == pytest.approx(0.0, abs=1e-12)


def test_nash_conv_takes_games_of_different_sizes_per_seat() -> None:
    # 3 row choices, 2 column choices: the row player's third choice dominates.
    payoff = [[0.0, 0.0], [1.0, -1.0], [1.0, 1.0]]
    assert nash_conv([0, 0, 1], [0.3, 0.7], payoff).total == pytest.approx(0.0)
    assert nash_conv([1, 0, 0], [0.5, 0.5], payoff).row_gain == pytest.approx(1.0)


def test_exploitability_of_a_symmetric_game_is_half_of_nash_conv() -> None:
    strategy = [0.5, 0.25, 0.25]
    assert exploitability(strategy, PAYOFF) == pytest.approx(0.25)
    assert nash_conv(strategy, strategy, PAYOFF).total == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("row", "column", "payoff", "message"),
    [
        ([1.0], [1.0], [1.0, 2.0], r"finite \(row choices, column choices\) matrix, got shape"),
        ([1.0], [1.0], [[np.nan]], "finite"),
        ([0.5, 0.5], [1.0], SKEWED, r"\(column player\): strategy must have one probability"),
        ([0.7, 0.7], [0.5, 0.5], SKEWED, r"\(row player\): strategy must be probabilities"),
    ],
    ids=["one-dimensional payoff", "not finite", "short strategy", "not summing to 1"],
)
def test_nash_conv_names_what_it_cannot_judge(row, column, payoff, message) -> None:
    with pytest.raises(ValueError, match=message):
        nash_conv(row, column, payoff)


def test_the_completely_mixed_equilibrium_is_solved_exactly() -> None:
    found = completely_mixed_equilibrium(SKEWED)
    assert found is not None
    np.testing.assert_allclose(found.row, [0.4, 0.6])
    np.testing.assert_allclose(found.column, [0.4, 0.6])
    assert found.value == pytest.approx(0.2)
    np.testing.assert_allclose(completely_mixed_equilibrium(PAYOFF).row, np.full(3, 1 / 3))
    # A dominated choice: the equilibrium is pure, so there is no completely mixed one.
    assert completely_mixed_equilibrium([[1.0, 2.0], [0.0, 0.5]]) is None
    assert completely_mixed_equilibrium([[1.0, 2.0, 3.0], [0.0, 1.0, 2.0]]) is None


def test_the_suite_holds_skewed_mixed_equilibria_and_is_fixed_by_its_seed() -> None:
    suite = equilibrium_suite(6)
    assert [m.shape for m, _ in suite] == [(2, 2), (3, 3)] * 3
    for payoff, found in suite:
        assert nash_conv(found.row, found.column, payoff).total == pytest.approx(0, abs=1e-9)
        for strategy in (found.row, found.column):
            assert strategy.min() >= 0.1
            assert np.abs(strategy - 1 / len(strategy)).max() >= 0.1
    again = equilibrium_suite(6)
    assert all((a == b).all() for (a, _), (b, _) in zip(suite, again, strict=True))
    assert not (equilibrium_suite(1, seed=1)[0][0] == suite[0][0]).all()
