"""Recall: remember a colour shown once, say it later (a memory test)."""

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

COLORS = ("red", "blue")


class Recall(Environment):
    """On the first step a ``Cue`` entity shows one of two colours (one-hot); it is gone on
    the ``delay`` steps that follow, which all look alike whatever the colour; on the last step
    the ``Player``'s ``question`` feature is 1 and its ``answer`` (the colour) earns 1 if it
    names the cue, else 0. Answers before the question are ignored.

    What the player sees when asked is the same for both colours, so a policy without memory
    answers right half of the time at best (expected return 0.5); one that remembers the cue
    answers right every time. Optimal return: 1.0.
    """

    def __init__(self, delay: int = 4) -> None:
        if delay < 1:
            raise ValueError(
                f"Recall: delay must be >= 1 (steps between cue and question), got {delay}"
            )
        self.delay = delay
        self.t = 0
        self.cue = 0

    def obs_space(self) -> ObsSpace:
        return ObsSpace(entities={"Player": Entity(["question"]), "Cue": Entity(list(COLORS))})

    def action_space(self) -> dict[str, CategoricalActionSpace]:
        return {"answer": CategoricalActionSpace(list(COLORS))}

    def reset(self) -> Observation:
        self.t = 0
        self.cue = int(self.rng.integers(len(COLORS)))
        return self.observe(reward=0.0, done=False)

    def act(self, actions: Mapping[str, Action]) -> Observation:
        if self.t < self.delay:
            self.t += 1
            return self.observe(reward=0.0, done=False)
        answer = actions.get("answer")
        right = isinstance(answer, CategoricalAction) and answer.indices.tolist() == [self.cue]
        return self.observe(reward=1.0 if right else 0.0, done=True)

    def observe(self, reward: float, done: bool) -> Observation:
        cue = np.zeros((1 if self.t == 0 else 0, len(COLORS)), dtype=np.float32)
        cue[:, self.cue] = 1.0
        question = float(self.t == self.delay)
        return Observation(
            features={"Player": np.array([[question]], dtype=np.float32), "Cue": cue},
            actions={"answer": CategoricalActionMask(actor_types=["Player"])},
            reward=reward,
            done=done,
        )

    def render(self) -> str:
        if self.t == 0:
            return f"cue: {COLORS[self.cue]}"
        return "which colour was it?" if self.t == self.delay else f"(wait, step {self.t})"
