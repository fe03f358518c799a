"""Elo arithmetic and the exploitability of matrix-game strategies, against hand-computed
values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from entityrl.envs.rps_duel import PAYOFF
from entityrl.training.elo import elo_difference, expected_score, score_to_elo, update
from entityrl.training.matrix_games import exploitability


def test_expected_score_follows_the_logistic_curve() -> None:
    assert expected_score(1500, 1500) == 0.5
    assert expected_score(1900, 1500) == pytest.approx(10 / 11)  # 400 points: 10:1 odds
    assert expected_score(1500, 1700) == pytest.approx(1 / (1 + math.sqrt(10)))
    assert expected_score(1600, 1500) + expected_score(1500, 1600) == pytest.approx(1.0)


def test_update_moves_k_times_the_surprise_and_keeps_the_sum() -> None:
    assert update(1500, 1500, 1.0, k=32) == (1516.0, 1484.0)
    assert update(1500, 1500, 0.5, k=32) == (1500.0, 1500.0)
    winner, loser = update(1900, 1500, 0.0, k=20)  # the favourite lost: 20 * 10/11 points
    assert winner == pytest.approx(1900 - 200 / 11) and loser == pytest.approx(1500 + 200 / 11)


def test_update_refuses_scores_outside_zero_to_one_and_bad_k() -> None:
    with pytest.raises(ValueError, match="score must be between 0 and 1, got 2"):
        update(1500, 1500, 2)
    with pytest.raises(ValueError, match="k must be > 0, got 0"):
        update(1500, 1500, 1, k=0)


def test_elo_difference_of_a_match() -> None:
    # 60 wins, 20 draws, 20 losses: score 0.7; per-game variance
    # (60 * 0.09 + 20 * 0.04 + 20 * 0.49) / 100 = 0.16, standard error 0.04.
    diff, low, high = elo_difference(60, 20, 20)
    assert diff == pytest.approx(-400 * math.log10(1 / 0.7 - 1))  # about +147
    margin = 1.959963984540054 * 0.04
    assert low == pytest.approx(score_to_elo(0.7 - margin))
    assert high == pytest.approx(score_to_elo(0.7 + margin))
    assert low < diff < high
    assert elo_difference(20, 20, 60) == pytest.approx((-diff, -high, -low))


def test_an_even_match_is_zero_and_all_draws_have_no_spread() -> None:
    diff, low, high = elo_difference(10, 0, 10)
    assert diff == 0 and low == pytest.approx(-high) and low < 0
    assert elo_difference(0, 7, 0) == (0.0, 0.0, 0.0)


def test_a_perfect_score_is_infinite() -> None:
    assert elo_difference(12, 0, 0) == (math.inf, math.inf, math.inf)
    assert elo_difference(0, 0, 5)[0] == -math.inf
    diff, low, high = elo_difference(9, 0, 1)  # 0.9 +- 0.186 reaches past 1
    assert math.isfinite(diff) and math.isfinite(low) and high == math.inf


def test_elo_difference_refuses_empty_and_negative_counts() -> None:
    with pytest.raises(ValueError, match="need at least one game"):
        elo_difference(0, 0, 0)
    with pytest.raises(ValueError, match="losses must be >= 0, got -1"):
        elo_difference(3, 0, -1)


def test_exploitability_of_rock_paper_scissors_strategies() -> None:
    assert exploitability(np.full(3, 1 / 3), PAYOFF) == pytest.approx(0.0)
    assert exploitability([1, 0, 0], PAYOFF) == 1.0  # paper beats always-rock
    # Rock half the time: paper wins 0.5 - 0.25 (scissors) on average.
    assert exploitability([0.5, 0.25, 0.25], PAYOFF) == pytest.approx(0.25)


def test_exploitability_refuses_games_and_strategies_it_cannot_judge() -> None:
    with pytest.raises(ValueError, match="symmetric zero-sum"):
        exploitability([0.5, 0.5], [[1, 0], [0, 1]])
    with pytest.raises(ValueError, match=r"square \(choices, choices\) matrix, got shape \(3,\)"):
        exploitability([1.0], [0, 1, -1])
    with pytest.raises(ValueError, match=r"one probability per choice, shape \(3,\), got"):
        exploitability([0.5, 0.5], PAYOFF)
    with pytest.raises(ValueError, match="probabilities"):
        exploitability([0.5, 0.5, 0.5], PAYOFF)
