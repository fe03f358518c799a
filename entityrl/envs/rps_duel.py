"""RockPaperScissorsDuel: two players throw at once; the simplest game of self-play."""

from __future__ import annotations

import numpy as np

from entityrl.env import CategoricalAction, Observation
from entityrl.envs.matrix_game import MatrixGame

THROWS = ("rock", "paper", "scissors")
PAYOFF = np.array([[0, -1, 1], [1, 0, -1], [-1, 1, 0]], dtype=np.float64)
"""``PAYOFF[mine, theirs]``: the reward of a throw against the other's (rock, paper, scissors)."""
PLAYERS = ("0", "1")


class RockPaperScissorsDuel(MatrixGame):
    """Players "0" and "1" throw rock, paper or scissors at once; each game is one step.

    Each player observes one ``Player`` entity (itself, without features: the game is
    symmetric), which takes the categorical ``throw`` action. Rewards are :data:`PAYOFF`: +1
    for a win, -1 for a loss, 0 for a draw, for each player (zero-sum).
    Optimal return: 0.0, the value of the game; its only Nash equilibrium throws uniformly
    (exploitability 0), any other strategy loses to a best response
    (:func:`entityrl.training.matrix_games.exploitability` with :data:`PAYOFF`).
    """

    action = "throw"
    seat_feature = False
    player_names = PLAYERS

    def __init__(self) -> None:
        super().__init__(PAYOFF)

    def choice_labels(self) -> list[str]:
        return list(THROWS)


def always_rock(obs: Observation) -> dict[str, CategoricalAction]:
    """A scripted player that always throws rock: the most exploitable strategy (a best
    response, paper, wins every game)."""
    return {"throw": CategoricalAction(actors=[("Player", 0)], indices=np.array([0]))}
