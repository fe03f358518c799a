"""NotHotdog: classify one object as hotdog or not."""

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

LABELS = ("hotdog", "not_hotdog")


class NotHotdog(Environment):
    """One thing to classify: either an ``Object`` entity whose ``is_hotdog`` feature tells the
    answer, or (for hotdogs, half of the time) a featureless ``Hotdog`` entity.

    The ``Player`` takes the ``classify`` action ("hotdog" or "not_hotdog"): reward 1 if right,
    0 otherwise; every episode is one step. ``unused_action`` has no actors (it tests that an
    action nobody takes is handled). Optimal return: 1.0.
    """

    def __init__(self) -> None:
        self.is_hotdog = False
        self.shown_as_hotdog = False
        self.steps = 0

    def obs_space(self) -> ObsSpace:
        return ObsSpace(
            entities={
                "Player": Entity(["step"]),
                "Object": Entity(["is_hotdog"]),
                "Hotdog": Entity([]),
            }
        )

    def action_space(self) -> dict[str, CategoricalActionSpace]:
        return {
            "classify": CategoricalActionSpace(LABELS),
            "unused_action": CategoricalActionSpace(["0", "1"]),
        }

    def reset(self) -> Observation:
        is_hotdog, hotdog_entity = self.rng.integers(0, 2, size=2).tolist()
        self.is_hotdog = bool(is_hotdog)
        self.shown_as_hotdog = self.is_hotdog and bool(hotdog_entity)
        self.steps = 0
        return self.observe(reward=0.0)

    def act(self, actions: Mapping[str, Action]) -> Observation:
        self.steps += 1
        label = actions.get("classify")
        answer = LABELS.index("hotdog" if self.is_hotdog else "not_hotdog")
        correct = isinstance(label, CategoricalAction) and label.indices.tolist() == [answer]
        return self.observe(reward=1.0 if correct else 0.0)

    def observe(self, reward: float) -> Observation:
        hotdogs = 1 if self.shown_as_hotdog else 0
        return Observation(
            features={
                "Player": np.array([[self.steps]], dtype=np.float32),
                "Object": np.full((1 - hotdogs, 1), float(self.is_hotdog), dtype=np.float32),
                "Hotdog": np.zeros((hotdogs, 0), dtype=np.float32),
            },
            actions={
                "classify": CategoricalActionMask(actor_types=["Player"]),
                "unused_action": CategoricalActionMask(actor_types=[]),
            },
            reward=reward,
            done=self.steps > 0,
        )

    def render(self) -> str:
        if self.shown_as_hotdog:
            return "a Hotdog entity"
        return f"an Object entity with is_hotdog={int(self.is_hotdog)}"
