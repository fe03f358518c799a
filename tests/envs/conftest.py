"""Shared helpers for the environment tests."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pytest
from vec_env_checks import assert_vec_obs_equal

from entityrl.env import (
    Action,
    Environment,
    Observation,
    VecObs,
)

Policy = Callable[[Environment, Observation], Mapping[str, Action]]


def play_episode(env: Environment, policy: Policy, seed: int, max_steps: int = 10_000) -> float:
    """Seed and reset ``env``, act with ``policy`` until the episode ends; return the return."""
    env.seed(seed)
    obs = env.reset()
    total = 0.0
    for _ in range(max_steps):
        obs = env.act(policy(env, obs))
        total += obs.reward
        if obs.done:
            return total
    raise AssertionError(f"episode did not end within {max_steps} steps")


@pytest.fixture
def play() -> Callable[..., float]:
    return play_episode


def same_batch(a: VecObs, b: VecObs) -> None:
    """Assert that two batches hold the same entities, masks, rewards, ends and metrics."""
    assert_vec_obs_equal(a, b, metrics_rtol=1e-6)


@pytest.fixture
def assert_same_batch() -> Callable[[VecObs, VecObs], None]:
    return same_batch
