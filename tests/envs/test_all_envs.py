"""Every registered environment: valid under random play, and the same episodes whether stepped
in this process or in worker processes."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pytest

from entityrl.env import BatchedEnvironment, RandomPolicy, VecEnv, VecObs, validate_vec_obs
from entityrl.env.multiplayer import MultiPlayerEnvironment
from entityrl.envs import lookup, make_vec, names

# Multi-player games batch one row per seat; their own rules: tests/envs/test_multiplayer_envs.py.
ALL = names()
PER_ENV = [
    name
    for name in ALL
    if not issubclass(lookup(name), (BatchedEnvironment, MultiPlayerEnvironment))
]


def random_rollout(
    env: VecEnv, steps: int, seed: int, check: Callable[[VecObs], None] = lambda obs: None
) -> tuple[npt.NDArray[np.float64], VecObs]:
    """Play ``steps`` steps of random legal actions; the returns of all ended episodes (in the
    order they ended) and the last batch."""
    policy = RandomPolicy(env.action_space, seed=seed)
    obs = env.reset()
    check(obs)
    returns = []
    for _ in range(steps):
        obs = env.act(policy.act(obs))
        check(obs)
        returns.append(obs.metrics.get("episode_return", np.zeros(0)))
    return np.concatenate(returns), obs


def test_every_environment_states_its_optimal_return() -> None:
    for name in names():
        assert "Optimal return:" in (lookup(name).__doc__ or ""), name


@pytest.mark.parametrize("name", ALL)
def test_random_play_passes_the_validator(name: str) -> None:
    # Every observation (every batch, for a natively batched environment) is checked inside
    # the vectorized environment; every batch, however it was built, also here.
    env = make_vec(name, 2, seed=0, validate=True)

    def check(obs: VecObs) -> None:
        validate_vec_obs(obs, env.obs_space, env.action_space, name, rows=env.num_envs)

    with env:
        returns, _ = random_rollout(env, 1000, seed=0, check=check)
    assert returns.size >= 2, "every copy should finish an episode within 1,000 steps"
    assert np.isfinite(returns).all()


@pytest.mark.parametrize("name", PER_ENV)
def test_processes_play_the_same_episodes_as_one_process(
    name: str, assert_same_batch: Callable[[VecObs, VecObs], None]
) -> None:
    with make_vec(name, 4, seed=7, validate=True) as serial:
        serial_returns, serial_last = random_rollout(serial, 200, seed=1)
    with make_vec(name, 4, seed=7, processes=2) as parallel:
        parallel_returns, parallel_last = random_rollout(parallel, 200, seed=1)
    assert serial_returns.size > 0
    np.testing.assert_array_equal(serial_returns, parallel_returns)
    assert_same_batch(serial_last, parallel_last)


@pytest.mark.parametrize("name", ALL)
def test_a_seed_fixes_the_episodes(
    name: str, assert_same_batch: Callable[[VecObs, VecObs], None]
) -> None:
    with make_vec(name, 3, seed=11) as first, make_vec(name, 3, seed=11) as second:
        first_returns, first_last = random_rollout(first, 200, seed=2)
        second_returns, second_last = random_rollout(second, 200, seed=2)
    np.testing.assert_array_equal(first_returns, second_returns)
    assert_same_batch(first_last, second_last)


@pytest.mark.parametrize("name", ALL)
def test_render_draws_the_current_state(name: str) -> None:
    with make_vec(name, 1, seed=0) as env:
        env.reset()
        picture = env.render(0)
    assert isinstance(picture, str) and picture.strip()
