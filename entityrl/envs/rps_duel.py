"""RockPaperScissorsDuel: two players throw at once; the simplest game of self-play."""

from __future__ import annotations

import numpy as np

from entityrl.env import (
    CategoricalAction,
    CategoricalActionMask,
    CategoricalActionSpace,
    Entity,
    Observation,
    ObsSpace,
)
from entityrl.env.multiplayer import MultiPlayerEnvironment, PlayerActions
from entityrl.envs.in_play import check_in_play

THROWS = ("rock", "paper", "scissors")
PAYOFF = np.array([[0, -1, 1], [1, 0, -1], [-1, 1, 0]], dtype=np.float64)
"""``PAYOFF[mine, theirs]``: the reward of a throw against the other's (rock, paper, scissors)."""
PLAYERS = ("0", "1")


class RockPaperScissorsDuel(MultiPlayerEnvironment):
    """Players "0" and "1" throw rock, paper or scissors at once; each game is one step.

    Each player observes one ``Player`` entity (itself, without features), which takes the
    categorical ``throw`` action. Rewards are :data:`PAYOFF`: +1 for a win, -1 for a loss, 0
    for a draw, for each player (zero-sum).
    Optimal return: 0.0, the value of the game; its only Nash equilibrium throws uniformly
    (exploitability 0), any other strategy loses to a best response
    (:func:`entityrl.training.matrix_games.exploitability` with :data:`PAYOFF`).
    """

    def __init__(self) -> None:
        self.in_play: tuple[str, ...] = ()
        self.throws: dict[str, int] = {}

    def players(self) -> tuple[str, ...]:
        return PLAYERS

    def obs_space(self) -> ObsSpace:
        return ObsSpace(entities={"Player": Entity([])})

    def action_space(self) -> dict[str, CategoricalActionSpace]:
        return {"throw": CategoricalActionSpace(list(THROWS))}

    def reset(self) -> dict[str, Observation]:
        self.in_play = PLAYERS
        self.throws = {}
        return {player: self.observe(0.0, done=False) for player in PLAYERS}

    def act(self, actions: PlayerActions) -> dict[str, Observation]:
        check_in_play("RockPaperScissorsDuel", actions, self.in_play)
        for player, chosen in actions.items():
            throw = chosen.get("throw")
            if not isinstance(throw, CategoricalAction) or len(throw.indices) != 1:
                raise ValueError(
                    f"RockPaperScissorsDuel.act: player {player!r} must throw (one "
                    f"CategoricalAction 'throw' for its Player), got {throw!r}"
                )
            self.throws[player] = int(throw.indices[0])
        first, second = self.throws["0"], self.throws["1"]
        self.in_play = ()
        return {
            "0": self.observe(float(PAYOFF[first, second]), done=True),
            "1": self.observe(float(PAYOFF[second, first]), done=True),
        }

    @staticmethod
    def observe(reward: float, done: bool) -> Observation:
        return Observation(
            features={"Player": np.zeros((1, 0), dtype=np.float32)},
            actions={"throw": CategoricalActionMask(actor_types=["Player"])},
            reward=reward,
            done=done,
        )

    def render(self) -> str:
        if not self.throws:
            return "waiting for both throws"
        return " vs ".join(f"{p}: {THROWS[self.throws[p]]}" for p in PLAYERS)


def always_rock(obs: Observation) -> dict[str, CategoricalAction]:
    """A scripted player that always throws rock: the most exploitable strategy (a best
    response, paper, wins every game)."""
    return {"throw": CategoricalAction(actors=[("Player", 0)], indices=np.array([0]))}
