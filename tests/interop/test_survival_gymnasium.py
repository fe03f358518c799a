"""The survival world as a Gymnasium environment: a plain Box and Discrete for outside trainers."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("gymnasium")

from gymnasium import spaces
from gymnasium.utils.env_checker import check_env

from entityrl.envs import DayAndNight, FourSeason
from entityrl.envs.multi_snake import MultiSnake
from entityrl.envs.treasure_hunt import TreasureHunt
from entityrl.interop.gym_spaces import UnsupportedSpaceError
from entityrl.interop.gymnasium import EntityGymnasiumEnv


def survival(observation: str = "nearest10", world: type = DayAndNight) -> EntityGymnasiumEnv:
    world_env = world(observation=observation, actions="simple", life_limit=100)
    return EntityGymnasiumEnv(world_env, observation="global")


def test_fixed_size_survival_world_is_a_valid_gymnasium_env_with_box_and_discrete() -> None:
    env = survival()
    assert env.observation_space == spaces.Box(-np.inf, np.inf, (225,), np.float32)
    assert env.action_space == spaces.Discrete(9)  # the nine simple actions
    with warnings.catch_warnings():
        # An unbounded Box draws Gymnasium's warning; the features have no common bound.
        warnings.filterwarnings("ignore", message=".*Box observation space m")
        check_env(env, skip_render_check=True)


@pytest.mark.parametrize(
    ("world", "sizes"),
    [(DayAndNight, (36, 63, 225, 1823)), (FourSeason, (61, 88, 412, 1927))],
)
def test_observation_sizes_are_the_documented_ones(world: type, sizes: tuple[int, ...]) -> None:
    # docs/survival.md, "Observations": the table of sizes.
    for observation, size in zip(
        ("nearest1", "nearest10_prey", "nearest10", "raw"), sizes, strict=True
    ):
        env = survival(observation, world)
        obs, _ = env.reset(seed=0)
        assert env.observation_space.shape == obs.shape == (size,)


def test_random_episode_plays_to_its_end_and_shows_its_last_observation() -> None:
    env = survival()
    obs, _ = env.reset(seed=4)
    steps, terminated, truncated = 0, False, False
    while not (terminated or truncated) and steps < 10_000:
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        assert env.observation_space.contains(obs) and np.isfinite(reward)
        steps += 1
    assert terminated and not truncated
    assert info["died"] == 1.0 and "task/eat_meat" in info
    # The episode's own last observation, not the next episode's first: a meter is empty.
    assert min(obs[0], obs[1], obs[2]) == 0.0  # satiety, thirst, hp
    assert 2 <= steps <= 500
    first, _ = env.reset()
    assert min(first[0], first[1], first[2]) > 0.0


def play(env: EntityGymnasiumEnv, seed: int, steps: int = 60) -> np.ndarray:
    obs, _ = env.reset(seed=seed)
    actions = np.random.default_rng(0).integers(0, 9, steps)
    seen = [obs]
    for action in actions:
        obs, _, terminated, truncated, _ = env.step(int(action))
        seen.append(obs)
        if terminated or truncated:
            seen.append(env.reset()[0])
    return np.stack(seen)


def test_seeding_reproduces_the_episodes() -> None:
    env = survival()
    np.testing.assert_array_equal(play(env, seed=7), play(survival(), seed=7))
    np.testing.assert_array_equal(play(env, seed=7), play(env, seed=7))
    assert not np.array_equal(play(env, seed=7), play(env, seed=8))
    # The same world as one built with that seed.
    built = DayAndNight(1, seed=7, observation="nearest10", actions="simple", life_limit=100)
    np.testing.assert_array_equal(env.reset(seed=7)[0], built.reset().global_features[0])


def test_an_illegal_choice_is_carried_out_as_the_first_legal_one() -> None:
    entities = EntityGymnasiumEnv(
        DayAndNight(actions="simple", life_limit=100), max_entities=400
    )  # the Dict shows the mask the Box leaves out
    mask = entities.reset(seed=2)[0]["act_mask"]
    illegal, first_legal = int(np.flatnonzero(mask == 0)[0]), int(np.flatnonzero(mask)[0])
    a, b = survival(), survival()
    a.reset(seed=2), b.reset(seed=2)
    np.testing.assert_array_equal(a.step(illegal)[0], b.step(first_legal)[0])


def test_entity_observation_of_the_batched_world_stays_a_dict() -> None:
    env = EntityGymnasiumEnv(DayAndNight(actions="simple", life_limit=100), max_entities=400)
    assert isinstance(env.observation_space, spaces.Dict)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Box observation space m")
        check_env(env, skip_render_check=True)


def test_wrapper_refuses_what_it_cannot_wrap_naming_it() -> None:
    with pytest.raises(ValueError, match=r"expected one copy \(num_envs=1\).*num_envs=2"):
        EntityGymnasiumEnv(DayAndNight(2, actions="simple"), observation="global")
    with pytest.raises(ValueError, match="unknown observation 'flat'; expected one of dict"):
        EntityGymnasiumEnv(TreasureHunt(), 16, observation="flat")
    with pytest.raises(ValueError, match="max_entities is needed for the dict observation"):
        EntityGymnasiumEnv(TreasureHunt())
    with pytest.raises(UnsupportedSpaceError, match="with observation='global'"):
        EntityGymnasiumEnv(MultiSnake(num_snakes=2), observation="global")  # entities act


def test_stable_baselines3_dqn_and_ppo_take_the_plain_spaces() -> None:
    sb3 = pytest.importorskip("stable_baselines3")
    env = survival()
    dqn = sb3.DQN("MlpPolicy", env, learning_starts=32, batch_size=16, seed=0, device="cpu")
    dqn.learn(total_timesteps=96)
    ppo = sb3.PPO("MlpPolicy", env, n_steps=64, batch_size=32, n_epochs=1, seed=0, device="cpu")
    ppo.learn(total_timesteps=64)
    for model in (dqn, ppo):
        action, _ = model.predict(env.reset(seed=0)[0], deterministic=True)
        assert env.action_space.contains(int(action))
