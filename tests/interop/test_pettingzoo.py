"""PettingZoo parallel environments: one row per agent, waiting rows, truncation per agent."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("pettingzoo")

from gymnasium import spaces
from pettingzoo import ParallelEnv

from entityrl.envs import make_vec
from entityrl.interop.gym_spaces import UnsupportedSpaceError
from entityrl.interop.pettingzoo import PettingZooVecEnv
from entityrl.ragged import RaggedArray


class LeaveEarly(ParallelEnv):  # type: ignore[misc]
    """ "quick" finishes (terminated) after one step; "slow" is cut off after three. Each
    agent's reward is its action; it observes the step count."""

    metadata = {"name": "leave_early"}  # noqa: RUF012
    possible_agents = ["quick", "slow"]  # noqa: RUF012

    def __init__(self, action_size: int = 2) -> None:
        self.action_size = action_size

    def observation_space(self, agent: str) -> spaces.Space[Any]:
        return spaces.Box(0, 9, (1,), np.float32)

    def action_space(self, agent: str) -> spaces.Space[Any]:
        return spaces.Discrete(self.action_size if agent == "slow" else 2)

    def reset(self, seed: int | None = None, options: Any = None) -> tuple[dict, dict]:
        self.t = 0
        self.agents = list(self.possible_agents)
        return {a: np.zeros(1, np.float32) for a in self.agents}, {}

    def step(self, actions: dict) -> tuple[dict, ...]:
        self.t += 1
        obs = {a: np.full(1, self.t, np.float32) for a in actions}
        rewards = {a: float(v) for a, v in actions.items()}
        terminated = {a: a == "quick" for a in actions}
        truncated = {a: a == "slow" and self.t == 3 for a in actions}
        self.agents = [a for a in self.agents if not (terminated[a] or truncated[a])]
        return obs, rewards, terminated, truncated, {a: {} for a in actions}


def _act(env: PettingZooVecEnv, last, choice: int):  # type: ignore[no-untyped-def]
    lengths = last.action_masks["action"].actors.lengths
    data = np.full((int(lengths.sum()), 1), choice, np.int64)
    return env.act({"action": RaggedArray(data, lengths)})


def test_agents_are_rows_and_wait_after_leaving_until_the_copy_ends() -> None:
    env = PettingZooVecEnv(4, seed=0, validate=True, env_id=LeaveEarly)
    obs = env.reset()
    assert env.obs_space.global_features == ("obs[0]", "agent=quick", "agent=slow", "active")
    assert obs.action_masks["action"].actors.lengths.tolist() == [1, 1, 1, 1]
    obs = _act(env, obs, 1)
    # "quick" left: its rows wait, with no actor and "active" 0.
    assert obs.action_masks["action"].actors.lengths.tolist() == [0, 1, 0, 1]
    assert obs.global_features[:, -1].tolist() == [0, 1, 0, 1]
    assert not obs.done.any()
    obs = _act(env, obs, 1)
    assert obs.reward.tolist() == [0, 1, 0, 1]  # waiting rows earn nothing
    obs = _act(env, obs, 1)
    assert obs.done.all()
    assert obs.truncated is not None and obs.truncated.tolist() == [False, True, False, True]
    assert obs.final is not None and obs.final.global_features[:, 0].tolist() == [3.0, 3.0]
    assert obs.metrics["episode_return"].tolist() == [1, 3, 1, 3]
    assert obs.action_masks["action"].actors.lengths.tolist() == [1, 1, 1, 1]  # new episodes


def test_rows_must_be_a_multiple_of_the_agents_and_spaces_shared() -> None:
    with pytest.raises(ValueError, match="expected a multiple of 2"):
        PettingZooVecEnv(3, env_id=LeaveEarly)
    with pytest.raises(UnsupportedSpaceError, match="'quick' and 'slow' have different spaces"):
        PettingZooVecEnv(2, env_id=lambda: LeaveEarly(action_size=3))


def test_registry_builds_pettingzoo_modules() -> None:
    env = make_vec("pettingzoo:classic/rps-v2", 2, seed=0, max_cycles=3)
    assert env.num_envs == 2 and "agent=player_1" in env.obs_space.global_features
    with pytest.raises(KeyError, match="Did you mean classic/rps-v2"):
        make_vec("pettingzoo:classic/rps-v3", 2)


class LeaveEarlyWithTorque(LeaveEarly):
    """LeaveEarly with a Box action in [-1, 1]: each agent's reward is its torque."""

    def action_space(self, agent: str) -> spaces.Space[Any]:
        return spaces.Box(-1.0, 1.0, (1,), np.float32)

    def step(self, actions: dict) -> tuple[dict, ...]:
        return super().step({a: float(v[0]) for a, v in actions.items()})


def test_box_actions_are_continuous_and_every_agent_receives_its_own_clipped() -> None:
    env = PettingZooVecEnv(4, seed=0, validate=True, env_id=LeaveEarlyWithTorque)
    last = env.reset()
    lengths = last.action_masks["action"].actors.lengths
    torques = np.array([[0.5], [7.0], [-0.25], [-3.0]], np.float32)  # quick, slow, quick, slow
    obs = env.act({"action": RaggedArray(torques, lengths)})
    np.testing.assert_array_equal(obs.reward, [0.5, 1.0, -0.25, -1.0])
