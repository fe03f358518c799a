"""Count: say how many beans there are; some wrong answers are masked out."""

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

MAX_COUNT = 9


class Count(Environment):
    """Between 0 and ``masked_choices - 1`` featureless ``Bean`` entities; the ``Player`` says
    how many with the ``count`` action (choices 0 to 9).

    Reward 1 for the right count, 0 otherwise; every episode is one step. Only the first
    ``masked_choices`` answers are ever legal; the mask keeps the right answer and, of the
    other legal-range answers, each with probability 1/2 (so ``masked_choices=1`` means no
    beans and only "0" legal; the default 10 puts every answer in play).
    Optimal return: 1.0.
    """

    def __init__(self, masked_choices: int = MAX_COUNT + 1) -> None:
        if not 1 <= masked_choices <= MAX_COUNT + 1:
            raise ValueError(
                f"Count: masked_choices must be between 1 and {MAX_COUNT + 1}, got {masked_choices}"
            )
        self.masked_choices = masked_choices
        self.count = 0
        self.legal = np.ones(MAX_COUNT + 1, dtype=np.bool_)

    def obs_space(self) -> ObsSpace:
        return ObsSpace(entities={"Player": Entity([]), "Bean": Entity([])})

    def action_space(self) -> dict[str, CategoricalActionSpace]:
        return {"count": CategoricalActionSpace([str(i) for i in range(MAX_COUNT + 1)])}

    def reset(self) -> Observation:
        self.count = int(self.rng.integers(0, self.masked_choices))
        self.legal = np.zeros(MAX_COUNT + 1, dtype=np.bool_)
        self.legal[: self.masked_choices] = self.rng.random(self.masked_choices) < 0.5
        self.legal[self.count] = True
        return self.observe(reward=0.0, done=False)

    def act(self, actions: Mapping[str, Action]) -> Observation:
        answer = actions.get("count")
        correct = isinstance(answer, CategoricalAction) and answer.indices.tolist() == [self.count]
        return self.observe(reward=1.0 if correct else 0.0, done=True)

    def observe(self, reward: float, done: bool) -> Observation:
        return Observation(
            features={
                "Player": np.zeros((1, 0), dtype=np.float32),
                "Bean": np.zeros((self.count, 0), dtype=np.float32),
            },
            actions={
                "count": CategoricalActionMask(actor_types=["Player"], mask=self.legal[None, :])
            },
            reward=reward,
            done=done,
        )

    def render(self) -> str:
        legal = " ".join(str(i) for i in np.flatnonzero(self.legal).tolist())
        return f"beans: {'o' * self.count or '(none)'}  legal answers: {legal}"
