"""MultiArmedBandit: arm A pays, the others do not."""

from __future__ import annotations

from collections.abc import Callable

from entityrl.env import Environment, GlobalCategoricalAction, Observation
from entityrl.envs import MultiArmedBandit


def pull(label: str) -> Callable[[Environment, Observation], dict[str, GlobalCategoricalAction]]:
    index = "ABCDE".index(label)
    return lambda env, obs: {"pull": GlobalCategoricalAction(index, label)}


def test_always_pulling_a_returns_one(play: Callable[..., float]) -> None:
    assert abs(play(MultiArmedBandit(), pull("A"), seed=0) - 1.0) < 1e-12


def test_other_arms_pay_nothing_and_the_episode_has_num_steps_steps() -> None:
    env = MultiArmedBandit(num_steps=3)
    obs = env.reset()
    assert list(obs.global_features) == [0]
    rewards = [env.act(pull(arm)(env, obs)).reward for arm in "BAE"]
    assert rewards == [0.0, 1 / 3, 0.0]
    assert env.observe(reward=0.0).done
