"""River navigation: the reward is the decrease of the squared distance to a river spot."""

from __future__ import annotations

import numpy as np

from entityrl.env import VecObs
from entityrl.envs import make_vec
from entityrl.envs.survival import RiverNavigation
from entityrl.ragged import RaggedArray


def move(env: RiverNavigation, dx: np.ndarray, dy: np.ndarray) -> VecObs:
    ones = np.ones(env.num_envs, dtype=np.int64)
    to_choice = {int(d): i for i, d in enumerate(env.offsets)}
    actions = {
        "move_x": RaggedArray(np.array([[to_choice[int(d)]] for d in dx]), ones),
        "move_y": RaggedArray(np.array([[to_choice[int(d)]] for d in dy]), ones),
    }
    return env.act(actions)


def greedy(env: RiverNavigation) -> tuple[np.ndarray, np.ndarray]:
    step = np.clip(env.target - env.position, -2, 2)
    return step[:, 0], step[:, 1]


def test_targets_lie_on_rivers_and_the_agent_starts_in_the_centre() -> None:
    env = RiverNavigation(32, seed=0)
    obs = env.reset()
    rows = np.arange(32)
    assert env.water[rows, env.target[:, 1], env.target[:, 0]].all()
    assert (obs.features["Agent"].data == 20).all()
    assert env.water.sum(axis=(1, 2)).min() >= 40  # four rivers cross the map


def test_heading_for_the_target_earns_its_squared_distance() -> None:
    env = RiverNavigation(16, seed=1)
    env.reset()
    start = ((env.target - env.position) ** 2).sum(axis=1).astype(float)
    total = np.zeros(16)
    done = np.zeros(16, dtype=bool)
    for _ in range(20):
        obs = move(env, *greedy(env))
        total += np.where(done, 0.0, obs.reward)
        done |= obs.done
        if done.all():
            break
    assert done.all()
    np.testing.assert_allclose(total, start)


def test_the_episode_ends_at_the_horizon_with_the_distance_reported() -> None:
    env = RiverNavigation(2, seed=2, horizon=3)
    env.reset()
    env.target[:] = [0, 0]
    for _ in range(3):
        obs = move(env, np.array([1, 1]), np.array([0, 0]))
    assert obs.done.all()
    assert obs.metrics["reached"].tolist() == [0.0, 0.0]
    np.testing.assert_allclose(obs.metrics["final_distance"], np.hypot(23, 20))


def test_moves_stay_on_the_map() -> None:
    env = RiverNavigation(1, seed=3, size=5, horizon=10)
    env.reset()
    env.target[:] = [0, 0]
    obs = move(env, np.array([2]), np.array([2]))
    obs = move(env, np.array([2]), np.array([2]))
    assert obs.features["Agent"].data.tolist() == [[4, 4]]
    assert obs.reward[0] == 0  # clipped at the edge: no closer, no further


def test_a_task_seed_fixes_map_and_target_everywhere() -> None:
    env = make_vec("RiverNavigation", 3, seed=0, task=42)
    assert isinstance(env, RiverNavigation)
    env.reset()
    first_target = env.target.copy()
    assert (first_target == first_target[0]).all() and (env.water == env.water[0]).all()
    for _ in range(20):
        move(env, np.zeros(3, dtype=int), np.zeros(3, dtype=int))
    np.testing.assert_array_equal(env.target, first_target)  # new episodes, same task
    other = RiverNavigation(3, seed=5, task=42)
    other.reset()
    np.testing.assert_array_equal(other.target, first_target)
    family = RiverNavigation(3, seed=0)
    family.reset()
    assert len({tuple(t) for t in family.target}) > 1


def test_render_shows_rivers_target_and_agent() -> None:
    env = RiverNavigation(1, seed=4)
    env.reset()
    picture = env.render(0)
    assert "@" in picture and "~" in picture and "target" in picture
    assert len(picture.splitlines()) == 41
