"""TreasureHunt: collecting, traps, the board edge, and a shortest-path collector."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from entityrl.env import Environment, GlobalCategoricalAction, Observation
from entityrl.envs import TreasureHunt
from entityrl.envs.treasure_hunt import BOUND, MOVES, SPAWN, reachable


def go(label: str) -> dict[str, GlobalCategoricalAction]:
    return {"move": GlobalCategoricalAction(list(MOVES).index(label), label)}


def collect_nearest(env: Environment, obs: Observation) -> dict[str, GlobalCategoricalAction]:
    """First move of a shortest trap-free path to the nearest treasure."""
    assert isinstance(env, TreasureHunt)
    first_move = {env.player: None}
    frontier = deque([env.player])
    while frontier:
        cell = frontier.popleft()
        if cell in env.treasure:
            return go(first_move[cell])  # type: ignore[arg-type]
        for label, (dx, dy) in MOVES.items():
            nxt = (cell[0] + dx, cell[1] + dy)
            inside = abs(nxt[0]) <= BOUND and abs(nxt[1]) <= BOUND
            if inside and nxt not in env.traps and nxt not in first_move:
                first_move[nxt] = first_move[cell] or label
                frontier.append(nxt)
    raise AssertionError("no treasure reachable")


def test_a_shortest_path_collector_gets_every_treasure(play: Callable[..., float]) -> None:
    assert [play(TreasureHunt(), collect_nearest, seed) for seed in range(20)] == [5.0] * 20
    crowded = TreasureHunt(num_traps=60, num_treasures=10)
    assert [play(crowded, collect_nearest, seed) for seed in range(10)] == [10.0] * 10


def test_every_treasure_is_reachable_and_inside_the_spawn_area() -> None:
    env = TreasureHunt(num_traps=50)
    env.seed(0)
    for _ in range(20):
        obs = env.reset()
        walkable = reachable(env.player, env.traps)
        assert all(cell in walkable for cell in env.treasure)
        cells = [*env.traps, *env.treasure]
        assert len(set(cells)) == len(cells) and (0, 0) not in cells
        assert all(abs(x) <= SPAWN and abs(y) <= SPAWN for x, y in cells)
        assert list(obs.global_features) == [0, 0]


def test_treasure_pays_a_trap_ends_and_the_edge_stops() -> None:
    env = TreasureHunt()
    env.reset()
    env.traps, env.treasure = [(0, 2)], [(0, 1), (3, 3)]
    obs = env.act(go("up"))
    assert obs.reward == 1.0 and not obs.done and env.treasure == [(3, 3)]
    assert env.act(go("up")).done
    env.player = (BOUND, 0)
    env.traps = []
    obs = env.act(go("right"))
    assert env.player == (BOUND, 0) and list(obs.global_features) == [BOUND, 0]


def test_the_time_limit_truncates_and_the_task_ends_otherwise() -> None:
    env = TreasureHunt(max_steps=2)
    env.reset()
    env.traps, env.treasure = [(0, -1)], [(0, 5)]
    assert not env.act(go("up")).done
    cut = env.act(go("up"))  # the time limit, short of the treasure: the time is not observed
    assert cut.done and cut.truncated
    env.reset()
    env.traps, env.treasure = [(0, -1)], [(0, 2)]
    env.act(go("up"))
    last = env.act(go("up"))  # the last treasure on the last step: the task's ending
    assert last.done and not last.truncated and last.reward == 1.0
    env.reset()
    env.traps = [(0, -1)]
    trap = env.act(go("down"))
    assert trap.done and not trap.truncated
