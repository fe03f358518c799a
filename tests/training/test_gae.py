"""Advantage estimation against a direct per-episode computation."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from entityrl.algorithms.common.gae import gae


def reference_gae(rewards, values, dones, next_values, gamma, lam):
    """Per environment, walk back through time; reset the accumulator at episode ends."""
    steps, envs = rewards.shape
    adv = np.zeros((steps, envs))
    for e in range(envs):
        running = 0.0
        for t in reversed(range(steps)):
            nxt = next_values[e] if t == steps - 1 else values[t + 1, e]
            if dones[t, e]:
                nxt, running = 0.0, 0.0
            delta = rewards[t, e] + gamma * nxt - values[t, e]
            running = delta + gamma * lam * running
            adv[t, e] = running
    return adv


@settings(max_examples=60, deadline=None)
@given(
    steps=st.integers(1, 8),
    envs=st.integers(1, 4),
    gamma=st.floats(0, 1),
    lam=st.floats(0, 1),
    seed=st.integers(0, 2**16),
)
def test_matches_reference(steps: int, envs: int, gamma: float, lam: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    rewards = rng.normal(size=(steps, envs)).astype(np.float32)
    values = rng.normal(size=(steps, envs)).astype(np.float32)
    dones = rng.random((steps, envs)) < 0.3
    nxt = rng.normal(size=envs).astype(np.float32)
    adv, ret = gae(rewards, values, dones, nxt, gamma, lam)
    np.testing.assert_allclose(
        adv, reference_gae(rewards, values, dones, nxt, gamma, lam), atol=1e-4
    )
    np.testing.assert_allclose(ret, adv + values, atol=1e-6)


def test_no_bootstrapping_across_an_episode_end() -> None:
    rewards = np.array([[1.0], [0.0]], dtype=np.float32)
    values = np.array([[0.0], [100.0]], dtype=np.float32)
    dones = np.array([[True], [False]])
    adv, _ = gae(rewards, values, dones, np.array([100.0], np.float32), 0.9, 1.0)
    # Step 0 ended its episode: the large value of the next episode's first state is ignored.
    assert adv[0, 0] == 1.0
