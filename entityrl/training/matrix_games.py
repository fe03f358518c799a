"""Two-player zero-sum matrix games: how far a pair of mixed strategies is from equilibrium
(NashConv, and exploitability for symmetric games), the completely mixed equilibrium of a small
game, and a suite of games with fixed seeds whose equilibria are mixed and not uniform.

``payoff[i, j]`` (shape ``(m, n)``) is what the row player wins when it picks ``i`` and the
column player picks ``j``; the column player wins ``-payoff[i, j]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch

from entityrl.env.vec_env import VecEnv
from entityrl.env.vec_obs import VecObs
from entityrl.nn.rogue_net import RogueNet
from entityrl.ragged import RaggedArray

TOLERANCE = 1e-9
Matrix = npt.NDArray[np.float64]


class NotAMatrixGameError(ValueError):
    """A game whose exploitability :func:`matrix_game_nash_conv` cannot compute exactly."""


@dataclass(frozen=True)
class NashConv:
    """How much each seat would gain by switching to a best response against the other's
    strategy; both gains are >= 0, and both are 0 exactly at an equilibrium."""

    row_gain: float
    """The row player's best reply payoff minus its payoff under the two strategies."""
    column_gain: float
    """The column player's best reply payoff minus its payoff under the two strategies."""

    @property
    def total(self) -> float:
        """NashConv: the sum of both gains (equally, the row player's best-reply payoff minus
        the column player's best-reply payoff in the row player's terms: what the two best
        responses win over the game's value, added)."""
        return self.row_gain + self.column_gain

    @property
    def half(self) -> float:
        """NashConv / 2, the "exploitability" of OpenSpiel's convention; for a symmetric game
        with both seats playing one strategy, what a best response wins against it."""
        return self.total / 2


def payoff_matrix(payoff: npt.ArrayLike, who: str) -> Matrix:
    """``payoff`` as a non-empty 2-D float matrix, else a ValueError naming ``who`` asked."""
    matrix = np.asarray(payoff, dtype=np.float64)
    if matrix.ndim != 2 or matrix.size == 0 or not np.isfinite(matrix).all():
        raise ValueError(
            f"{who}: payoff must be a finite (row choices, column choices) matrix, got shape "
            f"{matrix.shape}: {matrix.tolist()}"
        )
    return matrix


def mixed_strategy(strategy: npt.ArrayLike, choices: int, who: str) -> npt.NDArray[np.float64]:
    """``strategy`` as probabilities of ``choices`` choices, else a ValueError."""
    probabilities = np.asarray(strategy, dtype=np.float64)
    if probabilities.shape != (choices,):
        raise ValueError(
            f"{who}: strategy must have one probability per choice, shape ({choices},), got "
            f"shape {probabilities.shape}"
        )
    if (probabilities < -TOLERANCE).any() or abs(probabilities.sum() - 1.0) > 1e-6:
        raise ValueError(
            f"{who}: strategy must be probabilities (>= 0, summing to 1), got "
            f"{probabilities.tolist()}"
        )
    return probabilities


def nash_conv(row: npt.ArrayLike, column: npt.ArrayLike, payoff: npt.ArrayLike) -> NashConv:
    """NashConv of the row player's strategy ``row`` and the column player's ``column``.

    With ``A = payoff``: the row player's gain is ``max_i (A column)_i - row' A column``, the
    column player's ``row' A column - min_j (row' A)_j``. Their sum does not depend on the
    game's value ``v``: it is ``(max_i (A column)_i - v) + (v - min_j (row' A)_j)``.
    """
    matrix = payoff_matrix(payoff, "nash_conv")
    x = mixed_strategy(row, matrix.shape[0], "nash_conv (row player)")
    y = mixed_strategy(column, matrix.shape[1], "nash_conv (column player)")
    against_column, against_row = matrix @ y, x @ matrix
    played = float(x @ against_column)
    return NashConv(float(against_column.max()) - played, played - float(against_row.min()))


def exploitability(strategy: npt.ArrayLike, payoff: npt.ArrayLike) -> float:
    """The expected payoff of the best response to ``strategy`` in a symmetric zero-sum game.

    ``payoff[i, j]`` is what a player choosing ``i`` wins against one choosing ``j``; a
    symmetric zero-sum game has ``payoff == -payoff.T`` and value 0, so this is 0 exactly at
    an equilibrium strategy and positive elsewhere (rock-paper-scissors: 0 for the uniform
    strategy, 1 for always rock). ``strategy`` gives each choice's probability. It is
    :func:`nash_conv` ``.half`` with both seats playing ``strategy``.
    """
    matrix = np.asarray(payoff, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or matrix.size == 0:
        raise ValueError(
            f"exploitability: payoff must be a square (choices, choices) matrix, got shape "
            f"{matrix.shape}"
        )
    if not np.allclose(matrix, -matrix.T, atol=TOLERANCE):
        raise ValueError(
            "exploitability: payoff must be of a symmetric zero-sum game (payoff == -payoff.T), "
            f"got {matrix.tolist()} (nash_conv takes any zero-sum game)"
        )
    mixed_strategy(strategy, matrix.shape[0], "exploitability")
    return nash_conv(strategy, strategy, matrix).half


@dataclass(frozen=True)
class Equilibrium:
    """Both seats' equilibrium strategies and the game's value (to the row player)."""

    row: npt.NDArray[np.float64]
    column: npt.NDArray[np.float64]
    value: float


def completely_mixed_equilibrium(payoff: npt.ArrayLike) -> Equilibrium | None:
    """The equilibrium of a square game in which both seats play every choice, or None if
    there is none. Exact (one linear solve per seat): every choice of each seat earns the same
    against the other's strategy (the value ``v``), ``x' A = v 1`` and ``A y = v 1``, and the
    probabilities are positive. Such an equilibrium is the game's only one (Kaplansky, 1945)."""
    matrix = payoff_matrix(payoff, "completely_mixed_equilibrium")
    m, n = matrix.shape
    if m != n:
        return None
    # Unknowns (strategy, v): the indifference equations and the probabilities' sum.
    ones = np.ones((m, 1))
    system = np.block([[matrix, -ones], [ones.T, np.zeros((1, 1))]])
    target = np.zeros(m + 1)
    target[-1] = 1.0
    try:
        column = np.linalg.solve(system, target)
        row = np.linalg.solve(np.block([[matrix.T, -ones], [ones.T, np.zeros((1, 1))]]), target)
    except np.linalg.LinAlgError:
        return None
    x, y = row[:m], column[:m]
    if (x <= TOLERANCE).any() or (y <= TOLERANCE).any():
        return None
    return Equilibrium(x, y, float(column[-1]))


def equilibrium_suite(
    games: int = 6, seed: int = 0, min_probability: float = 0.1, min_skew: float = 0.1
) -> list[tuple[Matrix, Equilibrium]]:
    """``games`` zero-sum games, 2x2 and 3x3 in turn, with payoffs drawn uniformly in
    [-1, 1] from ``seed``, kept only if their equilibrium is completely mixed with every
    probability >= ``min_probability`` and some probability of each seat at least
    ``min_skew`` away from uniform. The same arguments give the same games."""
    rng = np.random.default_rng(seed)
    suite: list[tuple[Matrix, Equilibrium]] = []
    while len(suite) < games:
        size = 2 + len(suite) % 2
        matrix = np.round(rng.uniform(-1.0, 1.0, size=(size, size)), 2)
        found = completely_mixed_equilibrium(matrix)
        if found is None:
            continue
        strategies = (found.row, found.column)
        if min(s.min() for s in strategies) < min_probability:
            continue
        if min(np.abs(s - 1 / size).max() for s in strategies) < min_skew:
            continue
        suite.append((matrix, found))
    return suite


def choice_probabilities(net: RogueNet, obs: VecObs, action: str) -> npt.NDArray[np.float64]:
    """The probability of each choice of the categorical ``action`` under ``net``, for the
    single actor of the one-row observation ``obs`` (a matrix game's strategy)."""
    choices = len(net.action_space[action])  # type: ignore[arg-type]
    rows = obs.take(np.zeros(choices, dtype=np.int64))
    each = RaggedArray(
        np.arange(choices, dtype=np.int64).reshape(-1, 1), np.ones(choices, np.int64)
    )
    with torch.no_grad():
        out = net.evaluate(rows, {action: each})
    return out.heads[action].logprob.exp().double().cpu().numpy()


def matrix_game_nash_conv(net: RogueNet, env: VecEnv, name: str) -> NashConv:
    """The exact NashConv of ``net``'s strategies in both seats of the matrix game that
    ``env`` (a batch of :class:`~entityrl.envs.matrix_game.MatrixGame`, ``name`` in messages)
    plays; a :class:`NotAMatrixGameError` for any other game, whose exploitability is not
    computable exactly."""
    return mixture_nash_conv([net], [1.0], env, name)


def mixture_nash_conv(
    nets: Sequence[RogueNet], weights: Sequence[float], env: VecEnv, name: str
) -> NashConv:
    """:func:`matrix_game_nash_conv` of the mixture that plays ``nets[i]`` with probability
    ``weights[i]`` (normalized): in a one-shot game, the weighted sum of their strategies."""
    games = getattr(env, "games", None)
    payoff = getattr(games[0], "payoff", None) if games else None
    action = getattr(games[0], "action", None) if games else None
    if not isinstance(payoff, np.ndarray) or not isinstance(action, str):
        raise NotAMatrixGameError(
            f"exploitability is computed exactly only for two-player matrix games (MatrixGame, "
            f"RockPaperScissorsDuel) and small OpenSpiel games (openspiel:NAME); {name} is "
            "neither"
        )
    mixture = np.asarray(weights, dtype=np.float64)
    if mixture.shape != (len(nets),) or not len(nets) or (mixture < 0).any() or mixture.sum() <= 0:
        raise ValueError(
            "mixture_nash_conv: expected one non-negative weight per policy (some positive), "
            f"got {mixture.tolist()} for {len(nets)} policies"
        )
    mixture = mixture / mixture.sum()
    obs = env.reset()  # rows game by game, each game's row player first
    row = sum(
        w * choice_probabilities(net, obs.take(np.array([0])), action)[: payoff.shape[0]]
        for net, w in zip(nets, mixture, strict=True)
    )
    column = sum(
        w * choice_probabilities(net, obs.take(np.array([1])), action)[: payoff.shape[1]]
        for net, w in zip(nets, mixture, strict=True)
    )
    return nash_conv(row, column, payoff)
