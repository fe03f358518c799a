"""Two-player zero-sum symmetric matrix games: how much a best response wins against a mixed
strategy (its exploitability), the measure of how far a strategy is from equilibrium."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import torch

from entityrl.env.vec_obs import VecObs
from entityrl.nn.rogue_net import RogueNet
from entityrl.ragged import RaggedArray

TOLERANCE = 1e-9


def exploitability(strategy: npt.ArrayLike, payoff: npt.ArrayLike) -> float:
    """The expected payoff of the best response to ``strategy``.

    ``payoff[i, j]`` is what a player choosing ``i`` wins against one choosing ``j``; a
    symmetric zero-sum game has ``payoff == -payoff.T`` and value 0, so this is 0 exactly at
    an equilibrium strategy and positive elsewhere (rock-paper-scissors: 0 for the uniform
    strategy, 1 for always rock). ``strategy`` gives each choice's probability.
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
            f"got {matrix.tolist()}"
        )
    probabilities = np.asarray(strategy, dtype=np.float64)
    if probabilities.shape != (matrix.shape[0],):
        raise ValueError(
            f"exploitability: strategy must have one probability per choice, shape "
            f"({matrix.shape[0]},), got shape {probabilities.shape}"
        )
    if (probabilities < -TOLERANCE).any() or abs(probabilities.sum() - 1.0) > 1e-6:
        raise ValueError(
            "exploitability: strategy must be probabilities (>= 0, summing to 1), got "
            f"{probabilities.tolist()}"
        )
    # Each pure reply's expected payoff against the strategy; a best response picks the most.
    return float((matrix @ probabilities).max())


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
