"""Corridor: reaching the end is the task's ending; the time limit truncates."""

from __future__ import annotations

import numpy as np

from entityrl.env import VecEnv, VecObs
from entityrl.envs import make_vec
from entityrl.ragged import RaggedArray


def step(env: VecEnv, moves: list[int]) -> VecObs:
    """One step of every copy: 0 left, 1 right."""
    data = np.array(moves, dtype=np.int64).reshape(-1, 1)
    return env.act({"Move": RaggedArray(data, np.ones(len(moves), np.int64))})


def test_the_goal_ends_the_episode_and_the_time_limit_truncates_it() -> None:
    env = make_vec("Corridor", 2, seed=0, length=3, max_steps=2)
    env.reset()
    step(env, [1, 0])  # copy 0 walks right, copy 1 stays at the wall
    obs = step(env, [1, 0])  # copy 0 reaches the end; copy 1 runs out of time
    assert obs.done.tolist() == [True, True] and obs.reward.tolist() == [1.0, 0.0]
    assert obs.truncated is not None and obs.truncated.tolist() == [False, True]
    assert obs.final is not None and obs.final.num_rows == 1
