"""Elo ratings: the expected score between two ratings, the update after a game, and the rating
difference a match result implies (with a 95% confidence interval).

On the Elo scale a difference of ``d`` points means an expected score of
``1 / (1 + 10 ** (-d / 400))`` for the stronger side: +400 points is a 10:1 favourite.
"""

from __future__ import annotations

import math

SCALE = 400.0
"""Rating points per factor of 10 in the odds of winning."""
Z_95 = 1.959963984540054
"""The two-sided 95% quantile of the standard normal distribution."""


def expected_score(ra: float, rb: float) -> float:
    """The score (win 1, draw 0.5, loss 0) a player rated ``ra`` expects against ``rb``."""
    return 1.0 / (1.0 + 10.0 ** ((rb - ra) / SCALE))


def update(ra: float, rb: float, score: float, k: float = 32.0) -> tuple[float, float]:
    """Both ratings after one game in which the player rated ``ra`` scored ``score`` (1 win,
    0.5 draw, 0 loss) against ``rb``; ``k`` is the most a rating moves per game. The
    points one side gains the other loses."""
    if not 0.0 <= score <= 1.0:
        raise ValueError(f"update: score must be between 0 and 1, got {score}")
    if k <= 0:
        raise ValueError(f"update: k must be > 0, got {k}")
    change = k * (score - expected_score(ra, rb))
    return ra + change, rb - change


def score_to_elo(score: float) -> float:
    """The rating difference at which ``score`` is the expected score: -inf at 0, +inf at 1."""
    if score <= 0.0:
        return -math.inf
    if score >= 1.0:
        return math.inf
    return -SCALE * math.log10(1.0 / score - 1.0)


def elo_difference(wins: int, draws: int, losses: int) -> tuple[float, float, float]:
    """``(difference, low, high)``: the rating difference a match of ``wins``, ``draws`` and
    ``losses`` implies, and its 95% confidence interval.

    The score fraction ``s = (wins + draws / 2) / games`` has the standard error of the mean
    of the per-game scores (1, 1/2, 0 drawn from the observed win/draw/loss frequencies); the
    interval ``s -/+ 1.96 * error`` is mapped through :func:`score_to_elo`. A score of 0 or 1
    (every game lost, or won) gives an infinite difference, and a bound that reaches 0 or 1
    an infinite bound: the match says the difference is large, not how large. With every
    game drawn, or a single game, the interval is empty (low == high == difference).
    """
    counts = {"wins": wins, "draws": draws, "losses": losses}
    for name, count in counts.items():
        if count < 0:
            raise ValueError(f"elo_difference: {name} must be >= 0, got {count}")
    games = wins + draws + losses
    if games == 0:
        raise ValueError("elo_difference: need at least one game, got wins=draws=losses=0")
    score = (wins + 0.5 * draws) / games
    variance = (wins * (1.0 - score) ** 2 + draws * (0.5 - score) ** 2 + losses * score**2) / games
    margin = Z_95 * math.sqrt(variance / games)
    return (
        score_to_elo(score),
        score_to_elo(score - margin),
        score_to_elo(score + margin),
    )
