"""CherryPick and its natively batched twin."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from entityrl.env import (
    Environment,
    Observation,
    RandomPolicy,
    SelectEntityAction,
    SerialVecEnv,
    VecEnv,
    VecObs,
)
from entityrl.envs import CherryPick, CherryPickBatched
from entityrl.envs.cherry_pick import cherry_qualities
from entityrl.ragged import RaggedArray


def pick_best(env: Environment, obs: Observation) -> dict[str, SelectEntityAction]:
    best = int(np.argmax(np.asarray(obs.features["Cherry"])[:, 0]))
    return {"Pick Cherry": SelectEntityAction([("Player", 0)], [("Cherry", best)])}


def test_picking_the_best_cherry_every_step_returns_one(play: Callable[..., float]) -> None:
    for seed in range(5):
        assert abs(play(CherryPick(), pick_best, seed) - 1.0) < 1e-9


def test_the_best_half_of_the_bowl_sums_to_one() -> None:
    quality = cherry_qualities(np.random.default_rng(0), (4, 9))
    best = np.sort(quality, axis=1)[:, -4:]
    np.testing.assert_allclose(best.sum(axis=1), 1.0)


def test_a_pick_pays_its_quality_and_leaves_the_bowl() -> None:
    env = CherryPick(num_cherries=4)
    env.seed(0)
    first = env.reset()
    qualities = np.asarray(first.features["Cherry"])[:, 0]
    obs = env.act({"Pick Cherry": SelectEntityAction([("Player", 0)], [("Cherry", 2)])})
    assert abs(obs.reward - qualities[2]) < 1e-6
    np.testing.assert_array_equal(np.asarray(obs.features["Cherry"])[:, 0], np.delete(qualities, 2))
    assert not obs.done
    obs = env.act({"Pick Cherry": SelectEntityAction([("Player", 0)], [("Cherry", 0)])})
    assert obs.done  # 4 cherries: two picks


def test_batched_greedy_picks_return_one() -> None:
    env = CherryPickBatched(num_envs=8, seed=0)
    obs = env.reset()
    for _ in range(env.num_picks):
        cherries = obs.features["Cherry"]
        best = [int(np.argmax(row[:, 0])) for row in cherries]
        obs = env.act(
            {"Pick Cherry": RaggedArray(np.array(best).reshape(-1, 1), np.ones(8, np.int64))}
        )
    np.testing.assert_allclose(obs.metrics["episode_return"], 1.0, atol=1e-5)


def rollout(env: VecEnv, steps: int, seed: int) -> list[VecObs]:
    """Every batch of a random rollout, the first one included."""
    policy = RandomPolicy(env.action_space, seed=seed)
    trace = [env.reset()]
    for _ in range(steps):
        trace.append(env.act(policy.act(trace[-1])))
    return trace


def test_one_batched_copy_plays_exactly_what_cherry_pick_plays(
    assert_same_batch: Callable[[VecObs, VecObs], None],
) -> None:
    # One copy seeded s draws the same numbers from its generator as CherryPick seeded s, so
    # every batch must be identical: features, masks, rewards, ends of episodes.
    for seed in (0, 1):
        batched = rollout(CherryPickBatched(num_envs=1, seed=seed, num_cherries=6), 20, seed=3)
        serial = rollout(SerialVecEnv(lambda: CherryPick(num_cherries=6), 1, seed), 20, seed=3)
        for a, b in zip(batched, serial, strict=True):
            assert_same_batch(a, b)


def random_returns(env: VecEnv, steps: int) -> npt.NDArray[np.float64]:
    returns = [obs.metrics.get("episode_return", np.zeros(0)) for obs in rollout(env, steps, 5)]
    return np.concatenate(returns)


def ks_statistic(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> float:
    """Largest gap between the two empirical distribution functions."""
    points = np.sort(np.concatenate([a, b]))
    cdf_a = np.searchsorted(np.sort(a), points, side="right") / a.size
    cdf_b = np.searchsorted(np.sort(b), points, side="right") / b.size
    return float(np.abs(cdf_a - cdf_b).max())


def test_random_returns_of_the_batched_version_follow_the_same_distribution() -> None:
    # Different seeds, so that the two samples are independent.
    batched = random_returns(CherryPickBatched(num_envs=200, seed=0), 16 * 6)
    serial = random_returns(SerialVecEnv(CherryPick, 200, seed=1000), 16 * 6)
    assert batched.size == serial.size == 1200
    # Two-sample Kolmogorov-Smirnov test at the 0.1% level.
    critical = 1.95 * np.sqrt((batched.size + serial.size) / (batched.size * serial.size))
    assert ks_statistic(batched, serial) < critical
    # A distribution shifted by a third of a standard deviation fails it (the test has power).
    assert ks_statistic(batched, serial + serial.std() / 3) > critical
