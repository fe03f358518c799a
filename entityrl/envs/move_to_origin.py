"""MoveToOrigin: fire two thrusters to bring a drifting spaceship to the origin."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from entityrl.env import (
    Action,
    ActionMask,
    CategoricalAction,
    CategoricalActionMask,
    CategoricalActionSpace,
    ContinuousAction,
    ContinuousActionMask,
    ContinuousActionSpace,
    Entity,
    Environment,
    Observation,
    ObsSpace,
)

# Velocity change of each thruster choice, in choice order (full, 10%, hold, -10%, -full).
THRUST = (0.01, 0.001, 0.0, -0.001, -0.01)


class MoveToOrigin(Environment):
    """A spaceship starts at rest at a random point of the unit circle and must reach the origin.

    Each step the ``horizontal_thruster`` and ``vertical_thruster`` actions each change the
    velocity along their axis by +-0.01 (100%), +-0.001 (10%) or 0 (hold); then the ship moves
    by its velocity. The reward of a step is how much closer to the origin the ship got, so the
    return is 1 minus the final distance. Episodes last ``max_steps`` steps.
    Optimal return: 1.0 (to within 0.001, the finest thrust; needs ``max_steps`` >= 14, the
    fewest steps that can cover a distance of 1 from rest).
    """

    def __init__(self, max_steps: int = 32) -> None:
        if max_steps < 1:
            raise ValueError(f"MoveToOrigin: max_steps must be >= 1, got {max_steps}")
        self.max_steps = max_steps
        self.position = np.zeros(2)
        self.velocity = np.zeros(2)
        self.steps = 0

    def obs_space(self) -> ObsSpace:
        return ObsSpace(
            entities={"Spaceship": Entity(["x_pos", "y_pos", "x_velocity", "y_velocity", "step"])}
        )

    def action_space(self) -> dict[str, CategoricalActionSpace]:
        return {
            "horizontal_thruster": CategoricalActionSpace(
                ["100% right", "10% right", "hold", "10% left", "100% left"]
            ),
            "vertical_thruster": CategoricalActionSpace(
                ["100% up", "10% up", "hold", "10% down", "100% down"]
            ),
        }

    def reset(self) -> Observation:
        angle = self.rng.uniform(0, 2 * np.pi)
        self.position = np.array([np.cos(angle), np.sin(angle)])
        self.velocity = np.zeros(2)
        self.steps = 0
        return self.observe(reward=0.0)

    def act(self, actions: Mapping[str, Action]) -> Observation:
        for axis, name in enumerate(("horizontal_thruster", "vertical_thruster")):
            thruster = actions.get(name)
            if isinstance(thruster, CategoricalAction):
                self.velocity[axis] += sum(THRUST[i] for i in thruster.indices.tolist())
        return self.move()

    def move(self) -> Observation:
        """Move the ship by its velocity; the reward is how much closer it got."""
        distance_before = float(np.hypot(*self.position))
        self.position = self.position + self.velocity
        self.steps += 1
        return self.observe(reward=distance_before - float(np.hypot(*self.position)))

    def observe(self, reward: float) -> Observation:
        ship = [[*self.position, *self.velocity, self.steps]]
        return Observation(
            features={"Spaceship": np.array(ship, dtype=np.float32)},
            actions=self.masks(),
            reward=reward,
            done=self.steps >= self.max_steps,
        )

    def masks(self) -> dict[str, ActionMask]:
        return {
            "horizontal_thruster": CategoricalActionMask(actor_types=["Spaceship"]),
            "vertical_thruster": CategoricalActionMask(actor_types=["Spaceship"]),
        }

    def render(self) -> str:
        x, y = self.position
        vx, vy = self.velocity
        return (
            f"step {self.steps}/{self.max_steps}  position ({x:+.3f}, {y:+.3f})  "
            f"velocity ({vx:+.3f}, {vy:+.3f})  distance {np.hypot(x, y):.3f}"
        )


class ContinuousMoveToOrigin(MoveToOrigin):
    """MoveToOrigin with continuous thrust: each step the ship's one ``thrust`` action
    changes its velocity by any amount in [-0.01, 0.01] along each axis (the discrete
    version's full thrust), components ``horizontal`` and ``vertical``. Same reward and
    episodes. Optimal return: 1.0 (to within floating-point error: any thrust can be given)."""

    def action_space(self) -> dict[str, ContinuousActionSpace]:  # type: ignore[override]
        return {
            "thrust": ContinuousActionSpace(
                ["horizontal", "vertical"], low=-THRUST[0], high=THRUST[0]
            )
        }

    def act(self, actions: Mapping[str, Action]) -> Observation:
        thrust = actions.get("thrust")
        if isinstance(thrust, ContinuousAction):
            self.velocity += thrust.values.sum(axis=0)
        return self.move()

    def masks(self) -> dict[str, ActionMask]:
        return {"thrust": ContinuousActionMask(actor_types=["Spaceship"])}
