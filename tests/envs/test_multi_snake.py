"""MultiSnake: growth rewards, the ways a game ends, and a greedy player."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import numpy as np
import pytest

from entityrl.env import CategoricalAction, Environment, Observation
from entityrl.envs import MultiSnake
from entityrl.envs.grid import Cell
from entityrl.envs.multi_snake import MOVES

UP, DOWN, LEFT, RIGHT = range(4)


def steer(*choices: int) -> dict[str, CategoricalAction]:
    actors = [("SnakeHead", i) for i in range(len(choices))]
    return {"move": CategoricalAction(actors, np.array(choices))}


def room(start: Cell, blocked: set[Cell], size: int) -> int:
    """Number of free cells reachable from ``start``."""
    seen, frontier = {start}, deque([start])
    while frontier:
        x, y = frontier.popleft()
        for dx, dy in MOVES:
            cell = (x + dx, y + dy)
            if 0 <= cell[0] < size and 0 <= cell[1] < size and cell not in blocked | seen:
                seen.add(cell)
                frontier.append(cell)
    return len(seen)


def greedy(env: Environment, obs: Observation) -> dict[str, CategoricalAction]:
    """Each snake heads for its food over safe cells that leave it room to move; random tie
    breaks keep two snakes from blocking each other forever."""
    assert isinstance(env, MultiSnake)
    ties = np.random.default_rng(env.steps)
    blocked = {cell for snake in env.snakes for cell in snake}
    choices = []
    for color, snake in enumerate(env.snakes):
        forbidden = blocked | {cell for c, cell in env.food.items() if c != color}
        (fx, fy), (hx, hy) = env.food[color], snake[-1]
        options = []
        for choice, (dx, dy) in enumerate(MOVES):
            head = (hx + dx, hy + dy)
            inside = 0 <= head[0] < env.board_size and 0 <= head[1] < env.board_size
            if inside and head not in forbidden:
                cramped = room(head, forbidden, env.board_size) < len(snake) + 1
                distance = abs(head[0] - fx) + abs(head[1] - fy) + ties.random() / 2
                options.append((cramped, distance, choice, head))
        _, _, choice, head = min(options, default=(0, 0, UP, None))
        choices.append(choice)
        blocked.add(head)  # later snakes move after this one
    return steer(*choices)


def test_a_greedy_player_grows_a_lone_snake_to_full_length(play: Callable[..., float]) -> None:
    returns = [play(MultiSnake(num_snakes=1), greedy, seed) for seed in range(10)]
    assert returns == pytest.approx([1.0] * 10)


def test_a_greedy_player_grows_two_short_snakes_nearly_always(play: Callable[..., float]) -> None:
    # Two long snakes can box each other in, which a greedy player does not foresee.
    returns = [play(MultiSnake(max_snake_length=5), greedy, seed) for seed in range(10)]
    assert np.mean(returns) > 0.95, returns


def test_eating_own_food_grows_the_snake_and_pays() -> None:
    env = MultiSnake(num_snakes=2, max_snake_length=3)
    env.seed(0)
    env.set_state(snakes=[[(0, 0)], [(5, 5)]], food={0: (0, 1), 1: (9, 9)})
    obs = env.act(steer(UP, LEFT))
    assert obs.reward == pytest.approx(1 / (2 * 2)) and not obs.done
    assert env.snakes == [[(0, 0), (0, 1)], [(4, 5)]]
    assert 0 in env.food and env.food[0] not in ((0, 0), (0, 1), (4, 5), (9, 9))
    heads = np.asarray(obs.features["SnakeHead"]).tolist()
    assert heads == [[0, 1, 0], [4, 5, 1]]
    assert np.asarray(obs.features["SnakeBody"]).tolist() == [[0, 0, 0]]
    assert list(obs.global_features) == [1]


@pytest.mark.parametrize(
    ("choices", "why"),
    [
        ((LEFT, UP), "leaves the board"),
        ((UP, UP), "runs into a snake"),
        ((RIGHT, UP), "eats food of another color"),
    ],
)
def test_the_game_ends_when_a_snake(choices: tuple[int, int], why: str) -> None:
    env = MultiSnake(num_snakes=2)
    env.set_state(snakes=[[(0, 0)], [(0, 1)]], food={0: (5, 5), 1: (1, 0)})
    obs = env.act(steer(*choices))
    assert obs.done and obs.reward == 0.0, why


def test_the_game_ends_when_every_snake_is_full_grown() -> None:
    env = MultiSnake(num_snakes=1, max_snake_length=2)
    env.seed(0)
    env.set_state(snakes=[[(3, 3)]], food={0: (4, 3)})
    obs = env.act(steer(RIGHT))
    assert obs.done and obs.reward == 1.0
