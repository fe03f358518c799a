"""Long random rollouts: every batch valid, the same seed the same episodes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from entityrl.env import EnvValidationError, RandomPolicy, VecObs, validate_vec_obs
from entityrl.envs import make_vec
from entityrl.envs.survival import SurvivalWorld

PRESETS = ["DayAndNight", "FourSeason"]
REWARDS = ["dense", "sparse", "very_sparse"]


def rollout(
    env: SurvivalWorld, steps: int, seed: int, check: Callable[[VecObs], None]
) -> list[VecObs]:
    policy = RandomPolicy(env.action_space, seed=seed)
    obs = env.reset()
    check(obs)
    batches = [obs]
    for _ in range(steps):
        obs = env.act(policy.act(obs))
        check(obs)
        batches.append(obs)
    return batches


@pytest.mark.parametrize("reward", REWARDS)
@pytest.mark.parametrize("preset", PRESETS)
def test_ten_thousand_random_steps_keep_every_batch_consistent(preset: str, reward: str) -> None:
    # 16 copies x 625 steps = 10,000 environment steps: several lives, nights and seasons each.
    env = make_vec(preset, 16, seed=3, reward=reward, validate=True)  # checks every batch
    assert isinstance(env, SurvivalWorld)
    ended = []

    def check(obs: VecObs) -> None:
        if obs.done.any():
            assert set(obs.metrics) >= {"episode_return", "episode_length", "died"}
            assert all(v.shape == (int(obs.done.sum()),) for v in obs.metrics.values())
            ended.append(obs.metrics["episode_length"])

    rollout(env, 625, seed=4, check=check)
    assert np.concatenate(ended).size >= 16


@pytest.mark.parametrize(
    "kwargs",
    [
        {"actions": "simple"},
        {"actions": "simple", "observation": "nearest1"},
        {"actions": "simple", "observation": "nearest10_prey", "life_limit": 50},
        {"actions": "simple", "observation": "nearest10", "life_limit": 150},
    ],
)
@pytest.mark.parametrize("preset", PRESETS)
def test_other_modes_keep_every_batch_consistent(preset: str, kwargs: dict[str, Any]) -> None:
    env = SurvivalWorld(16, seed=5, config=preset, validate=True, **kwargs)
    rollout(env, 300, seed=6, check=lambda obs: None)  # the environment checks every batch


@pytest.mark.parametrize("actions", ["full", "simple"])
@pytest.mark.parametrize("preset", PRESETS)
def test_the_same_seed_plays_the_same_episodes(
    preset: str, actions: str, assert_same_batch: Callable[[VecObs, VecObs], None]
) -> None:
    first = rollout(
        SurvivalWorld(4, seed=9, config=preset, actions=actions), 200, 1, lambda o: None
    )
    second = rollout(
        SurvivalWorld(4, seed=9, config=preset, actions=actions), 200, 1, lambda o: None
    )
    for a, b in zip(first, second, strict=True):
        assert_same_batch(a, b)
    other = rollout(
        SurvivalWorld(4, seed=10, config=preset, actions=actions), 200, 1, lambda o: None
    )
    assert not np.array_equal(first[-1].global_features, other[-1].global_features)


def test_the_batch_validator_catches_broken_survival_batches() -> None:
    env = SurvivalWorld(2, seed=0)
    good = env.reset()
    validate_vec_obs(good, env.obs_space, env.action_space, "Survival", rows=2)

    def broken(edit: Callable[[VecObs], None]) -> None:
        obs = env.reset()
        edit(obs)
        with pytest.raises(EnvValidationError):
            validate_vec_obs(obs, env.obs_space, env.action_space, "Survival", rows=2)

    def actor_outside_its_row(obs: VecObs) -> None:
        obs.action_masks["act"].actors.data[0, 0] = 10_000

    def no_legal_choice(obs: VecObs) -> None:
        mask = obs.action_masks["act"].mask
        assert mask is not None
        mask.data[0] = False

    def infinite_feature(obs: VecObs) -> None:
        obs.features["Terrain"].data[0, 0] = np.inf

    def wrong_global_width(obs: VecObs) -> None:
        obs.global_features = obs.global_features[:, :-1]

    for edit in (actor_outside_its_row, no_legal_choice, infinite_feature, wrong_global_width):
        broken(edit)


@pytest.mark.parametrize("actions", ["full", "simple"])
def test_a_saved_state_resumes_exactly(
    actions: str, assert_same_batch: Callable[[VecObs, VecObs], None]
) -> None:
    env = SurvivalWorld(4, seed=12, config="FourSeason", actions=actions)
    rollout(env, 50, seed=1, check=lambda obs: None)
    saved = env.get_state()

    def continue_from(obs: VecObs) -> list[VecObs]:
        policy = RandomPolicy(env.action_space, seed=2)
        batches = []
        for _ in range(50):
            obs = env.act(policy.act(obs))
            batches.append(obs)
        return batches

    first = continue_from(env._last)  # type: ignore[arg-type]
    second = continue_from(env.set_state(saved))
    for a, b in zip(first, second, strict=True):
        assert_same_batch(a, b)
