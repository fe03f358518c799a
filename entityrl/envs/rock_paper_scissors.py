"""RockPaperScissors: beat an opponent whose throw only the value function sees."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from entityrl.env import (
    Action,
    CategoricalAction,
    CategoricalActionMask,
    CategoricalActionSpace,
    Entity,
    Environment,
    Observation,
    ObsSpace,
)

THROWS = ("rock", "paper", "scissors")
OPPONENT_ODDS = (0.5, 0.3, 0.2)  # rock, paper, scissors


class RockPaperScissors(Environment):
    """The opponent throws rock, paper or scissors with probability 0.5, 0.3 and 0.2.

    The ``Opponent`` entity (its throw, one-hot) is hidden from the policy but visible to the
    value function (``Observation.visible``), unless ``cheat`` makes it visible to both. The
    ``Player`` throws too: reward 2 for a win, 0 otherwise; every episode is one step.
    Optimal return: 1.0 (always paper), or 2.0 with ``cheat``.
    """

    def __init__(self, cheat: bool = False) -> None:
        self.cheat = cheat
        self.opponent = 0
        self.steps = 0

    def obs_space(self) -> ObsSpace:
        return ObsSpace(entities={"Player": Entity([]), "Opponent": Entity(list(THROWS))})

    def action_space(self) -> dict[str, CategoricalActionSpace]:
        return {"throw": CategoricalActionSpace(list(THROWS))}

    def reset(self) -> Observation:
        self.opponent = int(self.rng.choice(len(THROWS), p=OPPONENT_ODDS))
        self.steps = 0
        return self.observe(reward=0.0)

    def act(self, actions: Mapping[str, Action]) -> Observation:
        throw = actions.get("throw")
        # Each throw beats the one before it in THROWS (paper beats rock, ...).
        won = isinstance(throw, CategoricalAction) and throw.indices.tolist() == [
            (self.opponent + 1) % len(THROWS)
        ]
        self.steps += 1
        return self.observe(reward=2.0 if won else 0.0)

    def observe(self, reward: float) -> Observation:
        return Observation(
            features={
                "Player": np.zeros((1, 0), dtype=np.float32),
                "Opponent": np.eye(len(THROWS), dtype=np.float32)[[self.opponent]],
            },
            actions={"throw": CategoricalActionMask(actor_types=["Player"])},
            visible={"Opponent": np.array([self.cheat])},
            reward=reward,
            done=self.steps > 0,
        )

    def render(self) -> str:
        shown = THROWS[self.opponent] if self.cheat else "hidden"
        return f"opponent throws: {shown}"
