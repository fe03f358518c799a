"""MineSweeper: a planner that walks robots next to mines and defuses them."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import numpy as np

from entityrl.env import CategoricalAction, Environment, Observation
from entityrl.envs import MineSweeper

STEPS = ((1, 0), (-1, 0), (0, 1), (0, -1))  # +x, -x, +y, -y
DEFUSE = 4


def next_move(env: MineSweeper, start: tuple[int, int]) -> int:
    """Defuse if a mine is in reach, else the first step of a shortest mine-free path to a cell
    from which one is."""
    mines = set(env.mines)

    def in_reach(x: int, y: int) -> bool:
        return any(abs(mx - x) + abs(my - y) <= 1 for mx, my in mines)

    first: dict[tuple[int, int], int | None] = {start: None}
    frontier = deque([start])
    while frontier:
        cell = frontier.popleft()
        if in_reach(*cell):
            move = first[cell]
            return DEFUSE if move is None else move
        for move, (dx, dy) in enumerate(STEPS):
            nxt = (cell[0] + dx, cell[1] + dy)
            inside = 0 <= nxt[0] < env.width and 0 <= nxt[1] < env.height
            if inside and nxt not in mines and nxt not in first:
                first[nxt] = move if first[cell] is None else first[cell]
                frontier.append(nxt)
    return DEFUSE


def sweep(env: Environment, obs: Observation) -> dict[str, CategoricalAction]:
    assert isinstance(env, MineSweeper)
    robots = [("Robot", i) for i in range(len(env.robots))]
    moves = [next_move(env, robot) for robot in env.robots]
    return {"Move": CategoricalAction(robots, np.array(moves))}


def test_walking_to_the_nearest_mine_and_defusing_returns_one(play: Callable[..., float]) -> None:
    assert [play(MineSweeper(), sweep, seed) for seed in range(20)] == [1.0] * 20


def test_the_time_limit_truncates_and_the_task_ends_otherwise() -> None:
    env = MineSweeper(max_steps=1)
    env.reset()
    env.set_state(mines=[(5, 5)], robots=[(0, 0)], cooldown=5, orbital_cannon=False)
    cut = env.act({"Move": CategoricalAction([("Robot", 0)], np.array([0]))})
    assert cut.done and cut.truncated and cut.reward == 0.0
    env.set_state(mines=[(1, 0)], robots=[(0, 0)], cooldown=5, orbital_cannon=False)
    defused = env.act({"Move": CategoricalAction([("Robot", 0)], np.array([DEFUSE]))})
    assert defused.done and not defused.truncated and defused.reward == 1.0
