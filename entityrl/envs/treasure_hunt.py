"""TreasureHunt: walk a grid collecting treasure and avoiding traps (the tutorial environment)."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping

from entityrl.env import (
    Action,
    Entity,
    Environment,
    GlobalCategoricalAction,
    GlobalCategoricalActionMask,
    GlobalCategoricalActionSpace,
    Observation,
    ObsSpace,
)
from entityrl.envs.grid import Cell, sample_free_cells

MOVES = {"up": (0, 1), "down": (0, -1), "left": (-1, 0), "right": (1, 0)}
BOUND = 10  # the player stays within [-BOUND, BOUND] on both axes
SPAWN = 5  # traps and treasure lie within [-SPAWN, SPAWN]
PLACEMENT_ATTEMPTS = 100


def reachable(start: Cell, blocked: Iterable[Cell]) -> set[Cell]:
    """Cells of the board reachable from ``start`` without entering a ``blocked`` cell."""
    walls = set(blocked)
    seen = {start}
    frontier = deque([start])
    while frontier:
        x, y = frontier.popleft()
        for dx, dy in MOVES.values():
            cell = (x + dx, y + dy)
            inside = abs(cell[0]) <= BOUND and abs(cell[1]) <= BOUND
            if inside and cell not in walls and cell not in seen:
                seen.add(cell)
                frontier.append(cell)
    return seen


class TreasureHunt(Environment):
    """The player starts at (0, 0) of a board spanning -10..10 on both axes.

    ``num_traps`` traps and ``num_treasures`` treasures lie at random cells within -5..5 (each
    treasure reachable without crossing a trap). The global ``move`` action steps up, down, left
    or right (a move off the board does nothing); the player's position is the global features.
    Collecting a treasure gives reward 1. The episode ends on a trap, when all treasure is
    collected, or after ``max_steps`` steps: the observation does not show the time, so that
    ending is marked ``truncated`` (learners bootstrap from its value).
    Optimal return: ``num_treasures`` (5.0 by default).
    """

    def __init__(self, num_traps: int = 5, num_treasures: int = 5, max_steps: int = 200) -> None:
        cells = (2 * SPAWN + 1) ** 2 - 1
        if num_traps < 0 or num_treasures < 1 or num_traps + num_treasures > cells:
            raise ValueError(
                f"TreasureHunt: need num_traps >= 0, num_treasures >= 1 and at most {cells} "
                f"items in all, got num_traps={num_traps}, num_treasures={num_treasures}"
            )
        if max_steps < 1:
            raise ValueError(f"TreasureHunt: max_steps must be >= 1, got {max_steps}")
        self.num_traps = num_traps
        self.num_treasures = num_treasures
        self.max_steps = max_steps
        self.player: Cell = (0, 0)
        self.traps: list[Cell] = []
        self.treasure: list[Cell] = []
        self.steps = 0

    def obs_space(self) -> ObsSpace:
        return ObsSpace(
            entities={
                "Trap": Entity(["x_pos", "y_pos"]),
                "Treasure": Entity(["x_pos", "y_pos"]),
            },
            global_features=["x_pos", "y_pos"],
        )

    def action_space(self) -> dict[str, GlobalCategoricalActionSpace]:
        return {"move": GlobalCategoricalActionSpace(list(MOVES))}

    def spawn_cells(self, count: int, occupied: Iterable[Cell]) -> list[Cell]:
        """``count`` random free cells of the spawn area (board coordinates)."""
        side = 2 * SPAWN + 1
        shifted = [(x + SPAWN, y + SPAWN) for x, y in occupied]
        cells = sample_free_cells(self.rng, side, side, count, shifted)
        return [(x - SPAWN, y - SPAWN) for x, y in cells]

    def reset(self) -> Observation:
        self.player = (0, 0)
        self.steps = 0
        spawn_area = {(x, y) for x in range(-SPAWN, SPAWN + 1) for y in range(-SPAWN, SPAWN + 1)}
        for _ in range(PLACEMENT_ATTEMPTS):
            self.traps = self.spawn_cells(self.num_traps, [self.player])
            # Treasure goes only where the player can walk, so all of it can be collected.
            walkable = reachable(self.player, self.traps)
            if len((walkable & spawn_area) - {self.player}) >= self.num_treasures:
                self.treasure = self.spawn_cells(
                    self.num_treasures, (spawn_area - walkable) | {self.player}
                )
                return self.observe(reward=0.0, done=False)
        raise RuntimeError(
            f"TreasureHunt: {self.num_traps} traps left fewer than {self.num_treasures} "
            f"reachable cells in {PLACEMENT_ATTEMPTS} attempts; use fewer traps"
        )

    def act(self, actions: Mapping[str, Action]) -> Observation:
        move = actions.get("move")
        if isinstance(move, GlobalCategoricalAction):
            dx, dy = MOVES[move.label]
            x, y = self.player[0] + dx, self.player[1] + dy
            if abs(x) <= BOUND and abs(y) <= BOUND:
                self.player = (x, y)
        self.steps += 1
        reward = 0.0
        if self.player in self.treasure:
            self.treasure.remove(self.player)
            reward = 1.0
        ended = self.player in self.traps or not self.treasure
        return self.observe(reward, ended, cut_off=not ended and self.steps >= self.max_steps)

    def observe(self, reward: float, done: bool, cut_off: bool = False) -> Observation:
        """The current state; ``done`` ends the episode by the task, ``cut_off`` by the time
        limit (truncated)."""
        return Observation(
            features={"Trap": self.traps, "Treasure": self.treasure},
            global_features=list(self.player),
            actions={"move": GlobalCategoricalActionMask()},
            reward=reward,
            done=done or cut_off,
            truncated=cut_off,
        )

    def render(self) -> str:
        symbols = {cell: "X" for cell in self.traps} | {cell: "$" for cell in self.treasure}
        symbols[self.player] = "@"
        rows = [
            "".join(symbols.get((x, y), ".") for x in range(-BOUND, BOUND + 1))
            for y in range(BOUND, -BOUND - 1, -1)
        ]
        return "\n".join(rows) + f"\nstep {self.steps}/{self.max_steps}: @ you, $ treasure, X trap"
