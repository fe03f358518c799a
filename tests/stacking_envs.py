"""Environments for the observation-stacking tests (module-level, for worker processes)."""

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


class Blinking(Environment):
    """Entities ``0..5`` whose feature ``x`` is ``10 * id + t`` on step ``t`` of the episode;
    entity ``i`` is absent on steps where ``(i + t) % 4 == 0``, and the entities come in a random
    order every step. Episodes last ``length`` steps and end truncated (a time limit).
    ``ids``: "int" or "str" (``"e3"``), to exercise both kinds of keys."""

    def __init__(self, length: int = 6, ids: str = "int") -> None:
        self.length = length
        self.ids = ids
        self.t = 0

    def obs_space(self) -> ObsSpace:
        return ObsSpace(entities={"E": Entity(["x"])}, global_features=["t"])

    def action_space(self) -> dict:
        return {"Noop": CategoricalActionSpace(["noop"])}

    def reset(self) -> Observation:
        self.t = 0
        return self.observe()

    def act(self, actions: Mapping[str, Action]) -> Observation:
        self.t += 1
        return self.observe()

    def observe(self) -> Observation:
        present = np.array([i for i in range(6) if (i + self.t) % 4 != 0])
        present = self.rng.permutation(present)
        done = self.t >= self.length
        return Observation(
            features={"E": (10.0 * present + self.t).reshape(-1, 1)},
            ids={"E": [int(i) if self.ids == "int" else f"e{i}" for i in present]},
            global_features=[float(self.t)],
            actions={"Noop": CategoricalActionMask(actor_types=["E"])},
            done=done,
            truncated=done,
        )


class Drift(Environment):
    """Three balls drift around a circle of circumference 1 (positions in [0, 1)), each at its
    own constant velocity, +-0.1 per step, from a random start; each step every ball guesses
    which way it moves. The balls come in a random order every step, so only ids tell which is
    which. Reward per step: the fraction of right guesses (``length`` per episode at most).
    Positions are uniform whatever the direction, so one step's observation tells nothing
    (chance: 0.5 per step); two steps of the same ball tell it (the difference is +-0.1, or
    -+0.9 on the steps that wrap around)."""

    def __init__(self, length: int = 8) -> None:
        self.length = length
        self.t = 0
        self.x = np.zeros(3)
        self.v = np.zeros(3)
        self.order = np.arange(3)

    def obs_space(self) -> ObsSpace:
        return ObsSpace(entities={"Ball": Entity(["x"])})

    def action_space(self) -> dict:
        return {"Guess": CategoricalActionSpace(["left", "right"])}

    def reset(self) -> Observation:
        self.t = 0
        self.x = self.rng.uniform(0, 1, size=3)
        self.v = self.rng.choice([-0.1, 0.1], size=3)
        return self.observe(0.0)

    def act(self, actions: Mapping[str, Action]) -> Observation:
        guess = actions["Guess"]
        assert isinstance(guess, CategoricalAction)
        right = dict(zip(guess.actors, guess.indices.tolist(), strict=True))
        correct = [(right[i] == 1) == (self.v[i] > 0) for i in range(3)]
        self.t += 1
        self.x = (self.x + self.v) % 1.0
        return self.observe(float(np.mean(correct)))

    def observe(self, reward: float) -> Observation:
        self.order = self.rng.permutation(3)
        return Observation(
            features={"Ball": self.x[self.order].reshape(-1, 1).astype(np.float32)},
            ids={"Ball": self.order.tolist()},
            actions={"Guess": CategoricalActionMask(actor_types=["Ball"])},
            reward=reward,
            done=self.t >= self.length,
        )
