"""FloorIsLava: step from the player's cell onto the one high-ground tile among lava tiles."""

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

# Offset of each move, in choice order: n, ne, e, se, s, sw, w, nw.
DIRECTIONS = ((0, 1), (1, 1), (1, 0), (1, -1), (0, -1), (-1, -1), (-1, 0), (-1, 1))


class FloorIsLava(Environment):
    """The player stands at a random cell of a large grid (coordinates up to +-``width``).

    Between 1 and 8 of its neighbouring cells are tiles: one is high ground, the others lava.
    The player moves to one of the 8 neighbours: reward 1 for the high ground, 0 otherwise;
    every episode is one step. Since absolute positions are random and large, a policy must
    compare positions (relative positions) to solve it. Optimal return: 1.0.
    """

    def __init__(self, width: int = 1000) -> None:
        if width < 1:
            raise ValueError(f"FloorIsLava: width must be >= 1, got {width}")
        self.width = width
        self.player = np.zeros(2, dtype=np.int64)
        self.high_ground = np.zeros(2, dtype=np.int64)
        self.lava = np.zeros((0, 2), dtype=np.int64)
        self.done = False

    def obs_space(self) -> ObsSpace:
        return ObsSpace(
            entities={
                "Lava": Entity(["x", "y"]),
                "HighGround": Entity(["x", "y"]),
                "Player": Entity(["x", "y"]),
            }
        )

    def action_space(self) -> dict[str, CategoricalActionSpace]:
        return {"move": CategoricalActionSpace(["n", "ne", "e", "se", "s", "sw", "w", "nw"])}

    def reset(self) -> Observation:
        self.player = self.rng.integers(-self.width, self.width + 1, size=2)
        tiles = int(self.rng.integers(1, len(DIRECTIONS) + 1))
        chosen = self.rng.choice(len(DIRECTIONS), tiles, replace=False)
        cells = self.player + np.array(DIRECTIONS)[chosen]
        self.high_ground, self.lava = cells[0], cells[1:]
        self.done = False
        return self.observe()

    def act(self, actions: Mapping[str, Action]) -> Observation:
        move = actions.get("move")
        if isinstance(move, CategoricalAction):
            for choice in move.indices.tolist():
                self.player = self.player + DIRECTIONS[choice]
        self.done = True
        return self.observe()

    def observe(self) -> Observation:
        safe = self.done and bool((self.player == self.high_ground).all())
        return Observation(
            features={
                "Lava": self.lava.astype(np.float32),
                "HighGround": self.high_ground.astype(np.float32).reshape(1, 2),
                "Player": self.player.astype(np.float32).reshape(1, 2),
            },
            actions={"move": CategoricalActionMask(actor_types=["Player"])},
            reward=1.0 if safe else 0.0,
            done=self.done,
        )

    def render(self) -> str:
        grid = [["." for _ in range(3)] for _ in range(3)]
        for x, y in (self.lava - self.player + 1).tolist():
            grid[y][x] = "~"
        hx, hy = (self.high_ground - self.player + 1).tolist()
        grid[hy][hx] = "H"
        grid[1][1] = "P"
        return "\n".join("".join(row) for row in reversed(grid)) + "\n~ lava, H high ground"
