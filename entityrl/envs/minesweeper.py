"""MineSweeper: robots defuse mines on a grid; an optional orbital cannon removes one entity."""

from __future__ import annotations

from collections.abc import Mapping

from entityrl.env import (
    Action,
    CategoricalAction,
    CategoricalActionMask,
    CategoricalActionSpace,
    Entity,
    Environment,
    Observation,
    ObsSpace,
    SelectEntityAction,
    SelectEntityActionMask,
    SelectEntityActionSpace,
)

Position = tuple[int, int]


class MineSweeper(Environment):
    """Robots on a ``width`` x ``height`` grid must defuse every mine without stepping on one.

    Each step every robot moves one cell (+x, -x, +y, -y; moves off the grid are masked) or
    stays and defuses every mine at Manhattan distance <= 1. A robot that ends a step on a mine
    is destroyed. With ``orbital_cannon``, a cannon entity with a cooldown (``cooldown_period``
    steps after each episode start) may select any mine or robot to destroy once it is ready.
    Reward 1 when the last mine is defused; the episode ends when no mine or no robot is left,
    or after ``max_steps`` (marked ``truncated``: the observation does not show the time).
    Optimal return: 1.0.
    """

    def __init__(
        self,
        width: int = 6,
        height: int = 6,
        nmines: int = 5,
        nrobots: int = 2,
        orbital_cannon: bool = False,
        cooldown_period: int = 5,
        max_steps: int = 100,
    ) -> None:
        if width * height < nmines + nrobots:
            raise ValueError(
                f"MineSweeper: a {width}x{height} grid cannot hold {nmines} mines and {nrobots} robots"
            )
        self.width = width
        self.height = height
        self.nmines = nmines
        self.nrobots = nrobots
        self.orbital_cannon = orbital_cannon
        self.cooldown_period = cooldown_period
        self.max_steps = max_steps
        self.mines: list[Position] = []
        self.robots: list[Position] = []
        self.cooldown = cooldown_period
        self.steps = 0

    def obs_space(self) -> ObsSpace:
        return ObsSpace(
            entities={
                "Mine": Entity(["x", "y"]),
                "Robot": Entity(["x", "y"]),
                "Orbital Cannon": Entity(["cooldown"]),
            }
        )

    def action_space(self) -> dict[str, CategoricalActionSpace | SelectEntityActionSpace]:
        return {
            "Move": CategoricalActionSpace(["+x", "-x", "+y", "-y", "Defuse Mines"]),
            "Fire Orbital Cannon": SelectEntityActionSpace(),
        }

    def reset(self) -> Observation:
        cells = self.rng.choice(self.width * self.height, self.nmines + self.nrobots, replace=False)
        positions = [(int(c) % self.width, int(c) // self.width) for c in cells]
        self.mines = positions[: self.nmines]
        self.robots = positions[self.nmines :]
        self.cooldown = self.cooldown_period
        self.steps = 0
        return self.observe()

    def set_state(
        self, mines: list[Position], robots: list[Position], cooldown: int, orbital_cannon: bool
    ) -> Observation:
        """Put the environment in a given state (for tests and demonstrations)."""
        self.mines, self.robots = list(mines), list(robots)
        self.cooldown, self.orbital_cannon = cooldown, orbital_cannon
        self.steps = 0
        return self.observe()

    def legal_moves(self, x: int, y: int) -> list[bool]:
        return [x < self.width - 1, x > 0, y < self.height - 1, y > 0, True]

    def observe(self) -> Observation:
        ended = not self.mines or not self.robots
        # The observation does not show the time: the time limit's ending is a truncation.
        cut_off = not ended and self.steps >= self.max_steps
        features: dict[str, list[tuple[int, ...]]] = {"Mine": self.mines, "Robot": self.robots}
        if self.orbital_cannon:
            features["Orbital Cannon"] = [(self.cooldown,)]
        # The cannon acts only when it is ready and has something to fire at.
        cannon_ready = (
            self.orbital_cannon and self.cooldown == 0 and bool(self.mines or self.robots)
        )
        return Observation(
            features=features,
            ids={name: [(name, i) for i in range(len(rows))] for name, rows in features.items()},
            actions={
                "Move": CategoricalActionMask(
                    actor_types=["Robot"], mask=[self.legal_moves(x, y) for x, y in self.robots]
                ),
                "Fire Orbital Cannon": SelectEntityActionMask(
                    actor_types=["Orbital Cannon"] if cannon_ready else [],
                    actee_types=["Mine", "Robot"],
                ),
            },
            done=ended or cut_off,
            truncated=cut_off,
            reward=1.0 if not self.mines else 0.0,
        )

    def act(self, actions: Mapping[str, Action]) -> Observation:
        self.steps += 1
        self.cooldown = max(self.cooldown - 1, 0)
        destroyed_robot = None
        fire = actions.get("Fire Orbital Cannon")
        if isinstance(fire, SelectEntityAction) and fire.actors:
            self.cooldown = self.cooldown_period
            for kind, i in fire.actees:  # type: ignore[misc]
                if kind == "Mine":
                    self.mines[i] = None  # type: ignore[call-overload]
                else:
                    destroyed_robot = i
        move = actions.get("Move")
        if isinstance(move, CategoricalAction):
            for (_, i), choice in zip(move.actors, move.indices.tolist(), strict=True):  # type: ignore[misc]
                x, y = self.robots[i]
                if choice == 4:
                    self.mines = [
                        m for m in self.mines if m is None or abs(m[0] - x) + abs(m[1] - y) > 1
                    ]
                elif self.legal_moves(x, y)[choice]:
                    dx, dy = ((1, 0), (-1, 0), (0, 1), (0, -1))[choice]
                    self.robots[i] = (x + dx, y + dy)
        self.mines = [m for m in self.mines if m is not None]
        if destroyed_robot is not None:
            self.robots.pop(destroyed_robot)
        mines = set(self.mines)
        self.robots = [r for r in self.robots if r not in mines]
        return self.observe()

    def render(self) -> str:
        grid = [["." for _ in range(self.width)] for _ in range(self.height)]
        for x, y in self.mines:
            grid[y][x] = "*"
        for x, y in self.robots:
            grid[y][x] = "R"
        cannon = f"  cannon cooldown {self.cooldown}" if self.orbital_cannon else ""
        return "\n".join("".join(row) for row in reversed(grid)) + cannon
