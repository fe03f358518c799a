"""entityrl's multi-player games as PettingZoo parallel environments
(entityrl.interop.pettingzoo_parallel)."""

from __future__ import annotations

import numpy as np
import pytest
from env.player_envs import Dropout, Reinforcements
from pettingzoo.test import api_test, parallel_api_test, parallel_seed_test
from pettingzoo.utils.conversions import parallel_to_aec

from entityrl.interop.pettingzoo_parallel import (
    MASK_INFO,
    EntityParallelEnv,
    names,
    parallel_env,
)


def test_names_are_the_multi_player_games() -> None:
    assert {"CoinDuel", "GuardedExit", "PackHunt"} <= set(names())
    with pytest.raises(KeyError, match="not a multi-player game"):
        parallel_env("MoveToOrigin")


@pytest.mark.parametrize(
    ("name", "max_entities"),
    [
        ("CoinDuel", 8),
        ("GuardedExit", 4),
        ("Lanes", 2),
        ("MatrixGame", 1),
        ("PackHunt", 8),
        ("RockPaperScissorsDuel", 2),
    ],
)
def test_parallel_api(name: str, max_entities: int) -> None:
    parallel_api_test(parallel_env(name, max_entities), num_cycles=300)


def test_aec_through_pettingzoos_conversion() -> None:
    api_test(parallel_to_aec(parallel_env("GuardedExit", 4)), num_cycles=100)


def test_global_observation_passes_the_api_test() -> None:
    env = parallel_env("CoinDuel", observation="global")
    assert env.observation_space("0").shape == (1,)
    parallel_api_test(env, num_cycles=100)


def test_same_seed_same_games() -> None:
    parallel_seed_test(lambda: parallel_env("CoinDuel", 8))


def test_masks_and_spaces() -> None:
    env = parallel_env("CoinDuel", 8)
    observations, infos = env.reset(seed=3)
    assert env.agents == ["0", "1"]
    for agent in env.agents:
        assert env.observation_space(agent).contains(observations[agent])
        mask = infos[agent][MASK_INFO]
        assert mask.shape == (6,) and mask.dtype == np.int8
        np.testing.assert_array_equal(mask, observations[agent]["move_mask"])
        assert observations[agent]["Self_mask"].sum() == 1
        assert observations[agent]["Coin_mask"].sum() == 5


def test_agents_leave_and_group_reward() -> None:
    env = EntityParallelEnv(Dropout(limit=3), max_entities=1)
    env.reset()
    assert env.agents == ["a", "b", "c"]
    # a leaves: its own reward 1 plus the group's 0.5 (b and c stay).
    _, rewards, terminated, truncated, _ = env.step({"a": 1, "b": 0, "c": 0})
    assert rewards == {"a": 1.5, "b": 0.5, "c": 0.5}
    assert terminated == {"a": True, "b": False, "c": False}
    assert not any(truncated.values())
    assert env.agents == ["b", "c"]
    _, rewards, terminated, truncated, _ = env.step({"b": 0, "c": 0})
    assert set(rewards) == {"b", "c"}
    # Cut off at the limit: truncated, not terminated.
    _, _, terminated, truncated, _ = env.step({"b": 0, "c": 0})
    assert truncated == {"b": True, "c": True} and not any(terminated.values())
    assert env.agents == []
    with pytest.raises(RuntimeError, match="reset"):
        env.step({})


def test_agents_join() -> None:
    env = EntityParallelEnv(Reinforcements(), max_entities=1)
    observations, _ = env.reset()
    assert env.agents == ["a"] and set(observations) == {"a"}
    observations, rewards, *_ = env.step({"a": 0})
    # b joins: its first observation, no reward for the step it was not in play.
    assert env.agents == ["a", "b"] and set(observations) == {"a", "b"}
    assert rewards == {"a": 1.0, "b": 0.0}
    _, rewards, *_ = env.step({"a": 0, "b": 0})
    assert rewards == {"a": 1.0, "b": 1.0}
    _, _, terminated, *_ = env.step({"a": 0, "b": 0})
    assert terminated == {"a": True, "b": True} and env.agents == []


def test_missing_action_is_an_error() -> None:
    env = parallel_env("CoinDuel", 8)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="no action for agents"):
        env.step({"0": 0})


def test_hidden_entities_are_left_out() -> None:
    env = parallel_env("GuardedExit", 4, sight=0)
    observations, _ = env.reset(seed=0)
    for agent, obs in observations.items():
        # Sight 0: the game marks the guard, the exit and the other explorers hidden (not
        # sharing the explorer's cell at this seed); the padded observation leaves them out.
        visible = env.game_observation(agent).visible
        assert not any(visible["Guard"]) and not any(visible["Exit"])
        assert obs["Self_mask"].sum() == 1
        for entity in ("Ally", "Guard", "Exit"):
            assert obs[f"{entity}_mask"].sum() == 0
            np.testing.assert_array_equal(obs[entity], 0)
