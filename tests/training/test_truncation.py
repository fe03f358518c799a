"""Truncated episodes: the batch carries their final observations and GAE bootstraps from them."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest

from entityrl.env import (
    Action,
    Batcher,
    Entity,
    Environment,
    EnvValidationError,
    GlobalCategoricalAction,
    GlobalCategoricalActionMask,
    GlobalCategoricalActionSpace,
    Observation,
    ObsSpace,
    SerialVecEnv,
    ValidatingEnvironment,
)
from entityrl.env.vec_env import CUT_OFF_METRIC
from entityrl.nn.rogue_net import RogueNet, RogueNetConfig
from entityrl.ragged import RaggedArray
from entityrl.training.sampler import Sampler


class TimeLimited(Environment):
    """Reward 1 per step; ``truncate`` decides whether the episode is cut off at step 3 or
    ends there."""

    def __init__(self, truncate: bool = True) -> None:
        self.truncate = truncate
        self.t = 0

    def obs_space(self) -> ObsSpace:
        return ObsSpace(entities={"Clock": Entity(["t"])})

    def action_space(self) -> dict:
        return {"wait": GlobalCategoricalActionSpace(["wait"])}

    def reset(self) -> Observation:
        self.t = 0
        return self._observe()

    def act(self, actions: Mapping[str, Action]) -> Observation:
        self.t += 1
        ended = self.t == 3
        return self._observe(reward=1.0, done=ended, truncated=ended and self.truncate)

    def _observe(self, **step: float | bool) -> Observation:
        return Observation(
            features={"Clock": np.array([[self.t]], dtype=np.float32)},
            actions={"wait": GlobalCategoricalActionMask()},
            **step,  # type: ignore[arg-type]
        )


def test_serial_vec_env_reports_the_final_observation_of_truncated_episodes() -> None:
    env = SerialVecEnv(TimeLimited, 2)
    env.reset()
    for _ in range(2):
        obs = env.act(_waits(env.num_envs))
        assert obs.truncated is None and obs.final is None
    obs = env.act(_waits(env.num_envs))
    assert obs.done.all()
    assert obs.truncated is not None and obs.truncated.tolist() == [True, True]
    assert obs.final is not None
    assert obs.final.features["Clock"].data[:, 0].tolist() == [3.0, 3.0]  # not the reset's 0
    assert obs.features["Clock"].data[:, 0].tolist() == [0.0, 0.0]


@pytest.mark.parametrize("truncate", [True, False])
def test_gae_bootstraps_only_on_truncation(truncate: bool) -> None:
    env = SerialVecEnv(lambda: TimeLimited(truncate), 2, seed=0)
    net = RogueNet(env.obs_space, env.action_space, RogueNetConfig(d_model=16, n_head=2))
    gamma = 0.5
    rollout = Sampler(env, net, steps=3).collect()
    rollout.estimate_advantages(rollout.rewards, gamma, gae_lambda=1.0)
    # The last step's return: its reward, plus (truncated only) the discounted value of the
    # state it was cut off in.
    cut_off = TimeLimited()
    cut_off.t = 3
    final_obs = Batcher(env.obs_space, env.action_space).batch([cut_off._observe()] * 2)
    final_value = net.values(final_obs).numpy()
    expected = 1.0 + (gamma * final_value if truncate else 0.0)
    np.testing.assert_allclose(rollout.returns.reshape(3, 2)[2], expected, rtol=1e-5)


@pytest.mark.parametrize("truncate", [True, False])
def test_rollouts_mark_the_steps_whose_value_is_bootstrapped(truncate: bool) -> None:
    env = SerialVecEnv(lambda: TimeLimited(truncate), 2, seed=0)
    net = RogueNet(env.obs_space, env.action_space, RogueNetConfig(d_model=16, n_head=2))
    rollout = Sampler(env, net, steps=6).collect()
    assert rollout.cut is not None
    # Episodes of 3 steps: the 3rd and 6th steps end them, cut off by the time limit or not.
    expected = np.zeros((6, 2), dtype=bool)
    expected[[2, 5]] = truncate
    np.testing.assert_array_equal(rollout.cut, expected)
    assert (rollout.bootstrap[~rollout.cut] == 0).all()


@pytest.mark.parametrize("truncate", [True, False])
def test_rollouts_report_which_episodes_a_time_limit_cut_off(truncate: bool) -> None:
    env = SerialVecEnv(lambda: TimeLimited(truncate), 2, seed=0)
    net = RogueNet(env.obs_space, env.action_space, RogueNetConfig(d_model=16, n_head=2))
    metrics = Sampler(env, net, steps=6).collect().metrics
    assert metrics["episode_length"].tolist() == [3.0] * 4
    assert metrics[CUT_OFF_METRIC].tolist() == [float(truncate)] * 4


def test_validator_rejects_truncated_without_done() -> None:
    env = ValidatingEnvironment(TimeLimited())
    env.reset()
    env.env.act = lambda actions: Observation(  # type: ignore[method-assign]
        features={"Clock": np.zeros((1, 1))},
        actions={"wait": GlobalCategoricalActionMask()},
        truncated=True,
    )
    with pytest.raises(EnvValidationError, match="truncated: expected done=True"):
        env.act({"wait": GlobalCategoricalAction(0, "wait")})


def _waits(num_envs: int) -> dict[str, RaggedArray]:
    return {"wait": RaggedArray(np.zeros((num_envs, 1), np.int64), np.ones(num_envs, np.int64))}
