"""Minefield: steer a vehicle to a target without driving over a mine."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

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

TURN = np.pi / 8  # radians per turn action
SPEED = 3.0  # distance per forward action
REACH = 5.0  # the vehicle touches a mine or the target closer than this
CLEARANCE = 15.0  # minimum distance between mines, the vehicle's start and the target


class Minefield(Environment):
    """A vehicle in a ``width`` x ``width`` square must reach a target; mines lie in between.

    Each step the vehicle turns left (counterclockwise) or right by pi/8 or moves 3 units forward. Coming within 5
    units of the target ends the episode with reward 1; within 5 units of a mine, or reaching
    ``max_steps``, ends it with reward 0. Up to ``max_mines`` mines are placed at random (a
    candidate closer than 15 units to the vehicle, the target or another mine is dropped, so
    there is always room to pass), and the target starts at least 15 units from the vehicle.
    With ``translate``, mine and target positions are given relative to the vehicle.
    Optimal return: 1.0.
    """

    def __init__(
        self,
        max_mines: int = 10,
        max_steps: int = 200,
        translate: bool = False,
        width: float = 200.0,
    ) -> None:
        if width < 2 * CLEARANCE:
            raise ValueError(
                f"Minefield: width must be >= {2 * CLEARANCE:g} to keep the target "
                f"{CLEARANCE:g} units from the start, got {width}"
            )
        if max_mines < 0 or max_steps < 1:
            raise ValueError(
                f"Minefield: need max_mines >= 0 and max_steps >= 1, "
                f"got max_mines={max_mines}, max_steps={max_steps}"
            )
        self.max_mines = max_mines
        self.max_steps = max_steps
        self.translate = translate
        self.width = width
        self.vehicle = np.zeros(2)
        self.direction = 0.0
        self.target = np.zeros(2)
        self.mines = np.zeros((0, 2))
        self.steps = 0

    def obs_space(self) -> ObsSpace:
        return ObsSpace(
            entities={
                "Vehicle": Entity(["x_pos", "y_pos", "direction", "step"]),
                "Mine": Entity(["x_pos", "y_pos"]),
                "Target": Entity(["x_pos", "y_pos"]),
            }
        )

    def action_space(self) -> dict[str, CategoricalActionSpace]:
        return {"move": CategoricalActionSpace(["turn left", "move forward", "turn right"])}

    def random_position(self) -> npt.NDArray[np.float64]:
        return self.rng.uniform(-self.width / 2, self.width / 2, size=2)

    def reset(self) -> Observation:
        self.vehicle = self.random_position()
        self.target = self.random_position()
        while np.hypot(*(self.target - self.vehicle)) < CLEARANCE:
            self.target = self.random_position()
        placed = [self.vehicle, self.target]
        for _ in range(self.max_mines):
            candidate = self.random_position()
            if min(np.hypot(*(candidate - p)) for p in placed) >= CLEARANCE:
                placed.append(candidate)
        self.mines = np.array(placed[2:]).reshape(-1, 2)
        self.direction = float(self.rng.uniform(0, 2 * np.pi))
        self.steps = 0
        return self.observe()

    def set_state(
        self,
        vehicle: tuple[float, float],
        direction: float,
        target: tuple[float, float],
        mines: list[tuple[float, float]],
    ) -> Observation:
        """Put the environment in a given state (for tests and demonstrations)."""
        self.vehicle = np.array(vehicle, dtype=np.float64)
        self.direction = direction
        self.target = np.array(target, dtype=np.float64)
        self.mines = np.array(mines, dtype=np.float64).reshape(-1, 2)
        self.steps = 0
        return self.observe()

    def act(self, actions: Mapping[str, Action]) -> Observation:
        move = actions.get("move")
        if isinstance(move, CategoricalAction):
            for choice in move.indices.tolist():
                if choice == 1:
                    self.vehicle = self.vehicle + SPEED * np.array(
                        [np.cos(self.direction), np.sin(self.direction)]
                    )
                else:  # counterclockwise (left) for choice 0, clockwise for choice 2
                    self.direction = (self.direction + (1 - choice) * TURN) % (2 * np.pi)
        self.steps += 1
        return self.observe()

    def observe(self) -> Observation:
        reached = bool(np.hypot(*(self.target - self.vehicle)) < REACH)
        hit = bool(self.mines.size) and bool(
            (np.hypot(*(self.mines - self.vehicle).T) < REACH).any()
        )
        origin = self.vehicle if self.translate else np.zeros(2)
        return Observation(
            features={
                "Vehicle": np.array(
                    [[*self.vehicle, self.direction, self.steps]], dtype=np.float32
                ),
                "Mine": (self.mines - origin).astype(np.float32),
                "Target": (self.target - origin).astype(np.float32).reshape(1, 2),
            },
            actions={"move": CategoricalActionMask(actor_types=["Vehicle"])},
            reward=1.0 if reached else 0.0,
            done=reached or hit or self.steps >= self.max_steps,
        )

    def render(self) -> str:
        offset = self.target - self.vehicle
        nearest = np.hypot(*(self.mines - self.vehicle).T).min() if self.mines.size else np.inf
        return (
            f"step {self.steps}/{self.max_steps}  vehicle ({self.vehicle[0]:+.1f}, "
            f"{self.vehicle[1]:+.1f}) heading {np.degrees(self.direction):.0f} deg  "
            f"target {np.hypot(*offset):.1f} away at {np.degrees(np.arctan2(offset[1], offset[0])):.0f} deg  "
            f"nearest mine {nearest:.1f}"
        )
