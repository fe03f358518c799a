"""The Nash equilibrium of a two-player zero-sum matrix game: the meta-game of a pool.

Self-play's pool with ``selfplay.opponent_mix=nash`` (policy-space response oracles, Lanctot et
al. 2017) draws the learner's opponents from the equilibrium of the game whose strategies are
the pool's snapshots and whose payoffs are their measured margins against one another, rather
than uniformly: a snapshot that every other one beats, or that another one beats everywhere the
first one wins, is never played, and the learner trains against the mixture no single policy
exploits.

:func:`zero_sum_nash` solves it by predictive regret matching+ (Farina, Kroer and Sandholm
2021: regret matching+ that plays as if the last regrets came again) with alternating updates
and linearly weighted averages, in numpy: each iteration is two products of the matrix with a
vector, and the averages' duality gap (the best row's payoff against the column average less
the best column's against the row average) is checked as it goes and bounds how far both
averages are from an equilibrium. Random zero-sum games of 50 strategies reach a gap of 1e-6 of
their largest payoff in about 3,000 iterations (0.05 s); plain regret matching+ needed 200,000
and more.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

CHECK_EVERY = 25  # iterations between checks of the averages' duality gap

FloatArray = npt.NDArray[np.float64]


@dataclass
class MetaNash:
    """A (near-)equilibrium of a zero-sum game: the row player's mixture (it maximizes the
    payoff), the column player's (it minimizes it), the value and the duality gap."""

    row: FloatArray
    column: FloatArray
    value: float
    gap: float
    iterations: int


def duality_gap(payoff: FloatArray, row: FloatArray, column: FloatArray) -> float:
    """How much the two players together gain by best responding to each other's mixture (0
    exactly at an equilibrium)."""
    return float((payoff @ column).max() - (row @ payoff).min())


def zero_sum_nash(
    payoff: npt.ArrayLike, tolerance: float = 1e-6, max_iterations: int = 200_000
) -> MetaNash:
    """An equilibrium of the zero-sum game ``payoff`` (rows: the maximizer's strategies,
    columns: the minimizer's), to a duality gap of ``tolerance`` times the largest absolute
    payoff (or ``max_iterations``, whichever comes first; the result says which gap it
    reached)."""
    matrix = np.asarray(payoff, dtype=np.float64)
    if matrix.ndim != 2 or 0 in matrix.shape or not np.isfinite(matrix).all():
        raise ValueError(
            "the meta-game's payoff must be a finite matrix with a row and a column at least, "
            f"got shape {matrix.shape}"
        )
    if tolerance <= 0 or max_iterations < 1:
        raise ValueError(
            f"tolerance must be > 0 and max_iterations >= 1, got {tolerance} and {max_iterations}"
        )
    target = tolerance * max(float(np.abs(matrix).max()), np.finfo(np.float64).tiny)
    rows, columns = matrix.shape
    row_regret, column_regret = np.zeros(rows), np.zeros(columns)
    row, column = np.full(rows, 1.0 / rows), np.full(columns, 1.0 / columns)
    row_sum, column_sum = np.zeros(rows), np.zeros(columns)
    gap = np.inf
    iteration = 0
    while iteration < max_iterations:
        iteration += 1
        gains = matrix @ column
        instant = gains - row @ gains
        row_regret = np.maximum(row_regret + instant, 0.0)
        row = regret_matching(np.maximum(row_regret + instant, 0.0))  # predicted: again
        losses = row @ matrix  # the column player's, who minimizes
        instant = column @ losses - losses
        column_regret = np.maximum(column_regret + instant, 0.0)
        column = regret_matching(np.maximum(column_regret + instant, 0.0))
        row_sum += iteration * row
        column_sum += iteration * column
        if iteration % CHECK_EVERY == 0 or iteration == max_iterations:
            gap = duality_gap(matrix, row_sum / row_sum.sum(), column_sum / column_sum.sum())
            if gap <= target:
                break
    row_average, column_average = row_sum / row_sum.sum(), column_sum / column_sum.sum()
    return MetaNash(
        row_average,
        column_average,
        float(row_average @ matrix @ column_average),
        float(gap),
        iteration,
    )


def regret_matching(regret: FloatArray) -> FloatArray:
    """The mixture proportional to the positive regrets (uniform when none is positive)."""
    total = regret.sum()
    return regret / total if total > 0 else np.full(regret.shape, 1.0 / regret.shape[0])
