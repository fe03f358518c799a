"""A small environment with every kind of action at once, for the continuous-action tests."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from entityrl.env import (
    Action,
    CategoricalActionMask,
    CategoricalActionSpace,
    ContinuousActionMask,
    ContinuousActionSpace,
    Entity,
    Environment,
    GlobalCategoricalActionMask,
    GlobalCategoricalActionSpace,
    GlobalContinuousActionMask,
    GlobalContinuousActionSpace,
    Observation,
    ObsSpace,
    SelectEntityActionMask,
    SelectEntityActionSpace,
)


class Mixed(Environment):
    """Robots (some of which move this step) and boxes; every action kind is offered:
    ``move`` (continuous, 2 components, only the robots with an even id act), ``grip``
    (categorical), ``pick`` (select a box), ``speed`` (global continuous) and ``mode``
    (global categorical). The reward is the negative distance of the moving robots' ``move``
    from a target that a global feature shows; it keeps the last actions it received."""

    def __init__(self, robots: int = 3, boxes: int = 2) -> None:
        self.robots, self.boxes = robots, boxes
        self.received: Mapping[str, Action] = {}
        self.target = np.zeros(2)
        self.steps = 0

    def obs_space(self) -> ObsSpace:
        return ObsSpace(
            {"Robot": Entity(["x"]), "Box": Entity(["w"])}, global_features=["tx", "ty"]
        )

    def action_space(self) -> dict[str, object]:  # type: ignore[override]
        return {
            "move": ContinuousActionSpace(["dx", "dy"], low=[-1.0, 0.0], high=[1.0, 2.0]),
            "grip": CategoricalActionSpace(["open", "close"]),
            "pick": SelectEntityActionSpace(),
            "speed": GlobalContinuousActionSpace(["throttle"], low=0.0, high=5.0),
            "mode": GlobalCategoricalActionSpace(["calm", "alert"]),
        }

    def reset(self) -> Observation:
        self.steps = 0
        return self.observe(0.0)

    def act(self, actions: Mapping[str, Action]) -> Observation:
        self.received = actions
        self.steps += 1
        move = actions["move"]
        reward = -float(np.abs(move.values - self.target).sum()) if len(move.actors) else 0.0  # type: ignore[union-attr]
        return self.observe(reward)

    def observe(self, reward: float) -> Observation:
        self.target = self.rng.uniform([-1.0, 0.0], [1.0, 2.0])
        robot_ids = [10 + i for i in range(self.robots)]
        return Observation(
            features={
                "Robot": np.arange(self.robots, dtype=np.float32).reshape(-1, 1),
                "Box": np.ones((self.boxes, 1), dtype=np.float32),
            },
            ids={"Robot": robot_ids, "Box": [100 + i for i in range(self.boxes)]},
            global_features=self.target.astype(np.float32),
            actions={
                "move": ContinuousActionMask(actor_ids=[i for i in robot_ids if i % 2 == 0]),
                "grip": CategoricalActionMask(actor_types=["Robot"]),
                "pick": SelectEntityActionMask(actor_types=["Robot"], actee_types=["Box"]),
                "speed": GlobalContinuousActionMask(),
                "mode": GlobalCategoricalActionMask(),
            },
            reward=reward,
            done=self.steps >= 4,
        )
