"""GoalGrid: reach the object the goal signal names (ML-Agents' GridWorld, with goals that
combine a shape and a colour, some of them held out of training)."""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Mapping, Sequence

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
from entityrl.envs.grid import Cell, sample_free_cells

SHAPES = ("square", "circle", "triangle")
COLOURS = ("red", "green", "blue")
MOVES: dict[str, Cell] = {"up": (0, 1), "down": (0, -1), "left": (-1, 0), "right": (1, 0)}
Combination = tuple[int, int]  # (shape index, colour index)

ALL_COMBINATIONS: tuple[Combination, ...] = tuple(
    (shape, colour) for shape in range(len(SHAPES)) for colour in range(len(COLOURS))
)
DEFAULT_HELD_OUT = ("red_square", "green_circle", "blue_triangle")
"""One combination per shape and per colour, so every shape and every colour is still seen in
training, only never together in these pairs."""
GOAL_MODES = ("train", "held_out", "all")
STEP_COST = 0.01


def combination_name(combination: Combination) -> str:
    shape, colour = combination
    return f"{COLOURS[colour]}_{SHAPES[shape]}"


NAMED_COMBINATIONS = {combination_name(c): c for c in ALL_COMBINATIONS}
PLACEMENT_ATTEMPTS = 100


def first_moves(start: Cell, size: int, objects: Collection[Cell]) -> dict[Cell, str]:
    """For every cell reachable from ``start`` on the grid without passing over an object
    (objects end a walk: they are reached, never crossed), the first move of a shortest walk
    there."""
    first: dict[Cell, str] = {}
    frontier = deque([start])
    while frontier:
        cell = frontier.popleft()
        if cell != start and cell in objects:
            continue
        for label, (dx, dy) in MOVES.items():
            nxt = (cell[0] + dx, cell[1] + dy)
            inside = 0 <= nxt[0] < size and 0 <= nxt[1] < size
            if inside and nxt != start and nxt not in first:
                first[nxt] = first.get(cell, label)
                frontier.append(nxt)
    return first


class GoalGrid(Environment):
    """An agent on a ``size`` x ``size`` grid and ``objects`` objects, each a shape (square,
    circle, triangle) of a colour (red, green, blue), no two alike.

    The goal signal (the global features, all marked as ``goal_features``) is the one-hot
    shape and colour of the object to reach. The agent moves up, down, left or right (a move
    off the grid stays). Reaching the goal object gives +1 and ends the episode, reaching
    another object -1 and ends it; every step costs 0.01. After ``max_steps`` steps the
    episode is cut off (``truncated``: the observation does not show the time).

    Objects' features are their position relative to the agent and their one-hot shape and
    colour; the agent's are its position. One distractor shares the goal's shape and another
    its colour (where the combinations allow), so only both attributes together name the goal.
    The goal object is always reachable without crossing another object.

    ``held_out`` lists combinations (``"red_square"``, ...) kept out of training: with
    ``goals="train"`` (the default) neither goals nor distractors are ever one of them; with
    ``goals="held_out"`` every goal is one of them (distractors are still training
    combinations): the test of a policy that composes what it learned. ``goals="all"`` draws
    goals and objects from all nine. ``success`` (1 or 0) is reported at every episode end.
    Optimal return: about 0.96 on the default 5x5 grid (1 less the cost of the path).
    """

    def __init__(
        self,
        size: int = 5,
        objects: int = 3,
        max_steps: int = 20,
        held_out: Sequence[str] = DEFAULT_HELD_OUT,
        goals: str = "train",
    ) -> None:
        if size < 2:
            raise ValueError(f"GoalGrid: size must be >= 2, got {size}")
        if max_steps < 1:
            raise ValueError(f"GoalGrid: max_steps must be >= 1, got {max_steps}")
        if goals not in GOAL_MODES:
            raise ValueError(f"GoalGrid: goals must be one of {GOAL_MODES}, got {goals!r}")
        if isinstance(held_out, str):
            raise ValueError(
                f"GoalGrid: held_out must be a list of combination names, got the string "
                f"{held_out!r} (write [{held_out}])"
            )
        unknown = [name for name in held_out if name not in NAMED_COMBINATIONS]
        if unknown:
            raise ValueError(
                f"GoalGrid: held_out names unknown combinations {unknown}; expected names "
                f"among {sorted(NAMED_COMBINATIONS)}"
            )
        excluded = {NAMED_COMBINATIONS[name] for name in held_out}
        training = [c for c in ALL_COMBINATIONS if c not in excluded]
        if goals == "all":
            self.goal_pool, self.object_pool = list(ALL_COMBINATIONS), list(ALL_COMBINATIONS)
        elif goals == "held_out":
            self.goal_pool, self.object_pool = sorted(excluded), training
        else:
            self.goal_pool, self.object_pool = training, training
        if not self.goal_pool:
            raise ValueError(
                f"GoalGrid: goals={goals!r} leaves no goal combination with "
                f"held_out={list(held_out)}"
            )
        distractors = len(set(self.object_pool) - {self.goal_pool[0]})
        if objects < 1 or objects - 1 > distractors or objects >= size * size:
            raise ValueError(
                f"GoalGrid: objects must be between 1 and {min(distractors + 1, size * size - 1)}"
                f" (distinct combinations available, and a free cell for the agent on a "
                f"{size}x{size} grid) with goals={goals!r}, got {objects}"
            )
        self.size = size
        self.num_objects = objects
        self.max_steps = max_steps
        self.agent: Cell = (0, 0)
        self.cells: list[Cell] = []
        self.kinds: list[Combination] = []
        self.goal: Combination = (0, 0)
        self.steps = 0

    def obs_space(self) -> ObsSpace:
        goal = [f"goal_{name}" for name in (*SHAPES, *COLOURS)]
        return ObsSpace(
            entities={
                "Agent": Entity(["x", "y"]),
                "Object": Entity(["dx", "dy", *SHAPES, *COLOURS]),
            },
            global_features=goal,
            goal_features=goal,
        )

    def action_space(self) -> dict[str, CategoricalActionSpace]:
        return {"move": CategoricalActionSpace(list(MOVES))}

    def reset(self) -> Observation:
        self.steps = 0
        self.goal = self.goal_pool[int(self.rng.integers(len(self.goal_pool)))]
        self.kinds = [self.goal, *self._distractors()]
        self.rng.shuffle(self.kinds)  # the goal's place in the list tells nothing
        # The goal object is always reachable without crossing another one.
        for _ in range(PLACEMENT_ATTEMPTS):
            self.agent, *self.cells = sample_free_cells(
                self.rng, self.size, self.size, self.num_objects + 1
            )
            target = self.cells[self.kinds.index(self.goal)]
            if target in first_moves(self.agent, self.size, self.cells):
                return self.observe(0.0, False, False)
        raise RuntimeError(
            f"GoalGrid: {self.num_objects} objects walled the goal off in {PLACEMENT_ATTEMPTS} "
            f"placements on a {self.size}x{self.size} grid; use fewer objects"
        )

    def _distractors(self) -> list[Combination]:
        """``objects - 1`` combinations other than the goal: first one of its shape and one of
        its colour where the pool has them, then random others."""
        shape, colour = self.goal
        others = [c for c in self.object_pool if c != self.goal]
        chosen: list[Combination] = []
        for shares in (lambda c: c[0] == shape, lambda c: c[1] == colour):
            matching = [c for c in others if shares(c) and c not in chosen]
            if matching and len(chosen) < self.num_objects - 1:
                chosen.append(matching[int(self.rng.integers(len(matching)))])
        rest = [c for c in others if c not in chosen]
        extra = self.rng.choice(len(rest), self.num_objects - 1 - len(chosen), replace=False)
        return chosen + [rest[i] for i in extra.tolist()]

    def act(self, actions: Mapping[str, Action]) -> Observation:
        move = actions.get("move")
        if isinstance(move, CategoricalAction):
            dx, dy = list(MOVES.values())[int(move.indices[0])]
            x, y = self.agent[0] + dx, self.agent[1] + dy
            if 0 <= x < self.size and 0 <= y < self.size:
                self.agent = (x, y)
        self.steps += 1
        if self.agent in self.cells:
            reached = self.kinds[self.cells.index(self.agent)] == self.goal
            return self.observe((1.0 if reached else -1.0) - STEP_COST, True, reached)
        return self.observe(-STEP_COST, False, False)

    def observe(self, reward: float, reached_object: bool, success: bool) -> Observation:
        """The current state; the episode ends on an object (``success``: the goal one) or,
        cut off, at the time limit."""
        cut_off = not reached_object and self.steps >= self.max_steps
        done = reached_object or cut_off
        shape, colour = self.goal
        goal = np.zeros(len(SHAPES) + len(COLOURS), np.float32)
        goal[[shape, len(SHAPES) + colour]] = 1.0
        objects = np.zeros((len(self.cells), 2 + len(SHAPES) + len(COLOURS)), np.float32)
        for i, ((x, y), (s, c)) in enumerate(zip(self.cells, self.kinds, strict=True)):
            objects[i, :2] = (x - self.agent[0], y - self.agent[1])
            objects[i, [2 + s, 2 + len(SHAPES) + c]] = 1.0
        return Observation(
            features={"Agent": [list(self.agent)], "Object": objects},
            global_features=goal,
            actions={"move": CategoricalActionMask(actor_types=["Agent"])},
            reward=reward,
            done=done,
            truncated=cut_off,
            metrics={"success": float(success)} if done else {},
        )

    def render(self) -> str:
        marks = {
            cell: COLOURS[c][0].upper() + SHAPES[s][0]
            for cell, (s, c) in zip(self.cells, self.kinds, strict=True)
        }
        marks[self.agent] = "@@"
        rows = [
            " ".join(marks.get((x, y), "..") for x in range(self.size))
            for y in range(self.size - 1, -1, -1)
        ]
        return f"goal: {combination_name(self.goal)}\n" + "\n".join(rows)
