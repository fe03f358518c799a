"""The replay buffer of ragged entity observations."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from test_truncation import TimeLimited

from entityrl.algorithms.common.replay import ReplayBuffer, Transitions, next_observations
from entityrl.env import SerialVecEnv
from entityrl.env.random_policy import RandomPolicy
from entityrl.envs import make_vec


def _steps(env_id: str, steps: int, num_envs: int = 3) -> list[Transitions]:
    env = make_vec(env_id, num_envs, seed=0)
    policy = RandomPolicy(env.action_space, seed=0)
    obs, out = env.reset(), []
    for _ in range(steps):
        actions = policy.act(obs)
        after = env.act(actions)
        out.append(
            Transitions(
                obs, actions, after.reward, after.done, next_observations(after, env.choices)
            )
        )
        obs = after
    return out


def test_the_next_observation_of_a_truncated_episode_is_its_final_one() -> None:
    truncates = iter([True, False])
    env = SerialVecEnv(lambda: TimeLimited(next(truncates)), 2, seed=0)
    policy = RandomPolicy(env.action_space, seed=0)
    obs = env.reset()
    for _ in range(3):
        obs = env.act(policy.act(obs))
    assert obs.done.all()
    following = next_observations(obs, env.choices)
    clock = following.features["Clock"].data[:, 0]
    # The cut-off episode is followed by its final observation (t = 3); the one that ended by
    # the task keeps the next episode's first (t = 0), which no target bootstraps from.
    assert clock.tolist() == [3.0, 0.0]
    assert obs.features["Clock"].data[:, 0].tolist() == [0.0, 0.0]


def test_capacity_drops_the_oldest_steps_whole() -> None:
    steps = _steps("CherryPick", 5)
    buffer = ReplayBuffer(capacity=7, choices={})
    for step in steps:
        buffer.add(step)
    assert len(buffer) == 9 and buffer.added == 15  # three steps of 3 rows: 7 fit in 9
    batch = buffer.sample(64, np.random.default_rng(0))
    assert batch.num_rows == 64
    kept = np.concatenate([s.obs.global_features for s in steps[2:]])
    assert {tuple(r) for r in batch.obs.global_features} <= {tuple(r) for r in kept}


@pytest.mark.parametrize("env_id", ["CherryPick", "MineSweeper", "Minefield"])
def test_it_survives_a_checkpoint_and_samples_the_same(env_id: str) -> None:
    buffer = ReplayBuffer(capacity=100, choices=make_vec(env_id, 1, seed=0).choices)
    for step in _steps(env_id, 4):
        buffer.add(step)
    file = io.BytesIO()
    torch.save(buffer.state_dict(), file)
    file.seek(0)
    restored = ReplayBuffer(capacity=100, choices=buffer.choices)
    restored.load_state_dict(torch.load(file, weights_only=True))
    assert len(restored) == len(buffer) == 12
    assert restored.nbytes_per_transition() == buffer.nbytes_per_transition() > 0
    a, b = (x.sample(20, np.random.default_rng(1)) for x in (buffer, restored))
    for name in a.obs.features:
        assert np.array_equal(a.obs.features[name].data, b.obs.features[name].data)
        assert np.array_equal(a.next_obs.features[name].lengths, b.next_obs.features[name].lengths)
    for name in a.actions:
        assert np.array_equal(a.actions[name].data, b.actions[name].data)
        assert np.array_equal(
            a.obs.action_masks[name].actors.data, b.obs.action_masks[name].actors.data
        )
    assert np.array_equal(a.rewards, b.rewards) and np.array_equal(a.terminal, b.terminal)
