"""Batches of entityrl environments as one Gymnasium vector environment: every row laid out
as the one-environment wrapper lays it out, same-step autoreset, masks, episode infos."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("gymnasium")

import gymnasium

import entityrl.interop.gymnasium  # noqa: F401 (registers entityrl/<name>-v0)
from entityrl.envs import make_vec
from entityrl.interop.padded import EntityGymnasiumVectorEnv, PaddedLayout, make_gymnasium_vector


@pytest.mark.parametrize(
    ("name", "limit"), [("MultiSnake", 16), ("TreasureHunt", 16), ("CherryPick", 32)]
)
def test_each_row_of_a_batch_is_laid_out_as_that_row_alone(name: str, limit: int) -> None:
    env = make_vec(name, 6, seed=0)
    layout = PaddedLayout(name, env.obs_space, env.action_space, limit)
    rng = np.random.default_rng(0)
    batch = env.reset()
    for _ in range(5):
        observed, masks = layout.observe(batch), layout.action_masks(batch)
        space = layout.action_space
        sizes = space.nvec if isinstance(space, gymnasium.spaces.MultiDiscrete) else [space.n]
        picks = np.stack([rng.integers(0, n, 6) for n in sizes], axis=1)
        chosen = layout.actions(batch, picks)
        for row in range(6):
            alone = batch.take(np.array([row]))
            for key, value in layout.observe(alone).items():
                np.testing.assert_array_equal(observed[key][row], value[0], err_msg=key)
            np.testing.assert_array_equal(masks[row], layout.action_masks(alone)[0])
            for action, values in layout.actions(alone, picks[row : row + 1]).items():
                np.testing.assert_array_equal(chosen[action][row], values[0])
        batch = env.act(chosen)


def test_gymnasium_make_vec_steps_a_batch_with_same_step_autoreset() -> None:
    envs = gymnasium.make_vec("entityrl/Corridor-v0", num_envs=8,
                              vectorization_mode="vector_entry_point", max_entities=1, length=3)  # fmt: skip
    assert envs.unwrapped.metadata["autoreset_mode"].value == "SameStep"
    obs, _ = envs.reset(seed=5)
    assert envs.observation_space.contains(obs)
    assert obs["Walker"].shape == (8, 1, 1) and obs["Walker_mask"].tolist() == [[1]] * 8
    ended = truncated_seen = 0
    for _ in range(12):  # always left: every episode is cut off after 6 steps, never ends
        obs, reward, terminated, truncated, info = envs.step(np.zeros((8, 1), np.int64))
        assert envs.observation_space.contains(obs)
        assert reward.shape == (8,) and not terminated.any()
        if truncated.any():
            truncated_seen += 1
            ended += int(truncated.sum())
            assert (info["_final_obs"] == truncated).all()
            assert all(
                info["final_obs"][row]["Walker"].shape == (1, 1)
                for row in np.flatnonzero(truncated)
            )
            assert (info["episode_length"][truncated] == 6).all() and info[
                "_episode_length"
            ].tolist() == truncated.tolist()
            assert (obs["Walker"][truncated] == 0).all()  # the next episode's first cell
    assert truncated_seen == 2 and ended == 16
    envs.close()


def test_the_goal_is_terminated_with_its_reward_and_seeds_repeat() -> None:
    envs = make_gymnasium_vector("Corridor", 4, max_entities=1, length=2)
    first, _ = envs.reset(seed=1)
    _, reward, terminated, truncated, info = envs.step(np.ones((4, 1), np.int64))  # right: goal
    assert terminated.all() and not truncated.any() and reward.tolist() == [1.0] * 4
    assert "final_obs" not in info and info["episode_return"].tolist() == [1.0] * 4
    again, _ = envs.reset(seed=1)
    np.testing.assert_array_equal(first["Walker"], again["Walker"])
    with pytest.raises(ValueError, match="one seed for the whole batch"):
        envs.reset(seed=[1, 2, 3, 4])


def test_the_survival_world_keeps_its_masks_and_matches_the_one_copy_wrapper() -> None:
    world = {"observation": "nearest10", "actions": "simple", "life_limit": 20}
    envs = make_gymnasium_vector("DayAndNight", 16, observation="global", env_kwargs=world)
    single = gymnasium.make("entityrl/DayAndNight-v0", observation="global", env_kwargs=world)
    assert envs.single_action_space == single.action_space
    assert envs.single_observation_space == single.observation_space
    obs, _ = envs.reset(seed=0)
    assert obs.shape == (16, 225)
    rng = np.random.default_rng(0)
    for _ in range(30):
        masks = envs.action_masks()
        assert masks.shape == (16, 9) and masks.any(axis=1).all()
        legal = [rng.choice(np.flatnonzero(m)) for m in masks]
        obs, reward, *_ = envs.step(np.array(legal))
        assert obs.shape == (16, 225) and reward.dtype == np.float64


def test_select_entity_picks_the_candidate_in_the_chosen_slot() -> None:
    env = make_vec("CherryPick", 3, seed=0)
    layout = PaddedLayout("CherryPick", env.obs_space, env.action_space, 32)
    batch = env.reset()
    legal = layout.legal(batch, "Pick Cherry")  # (rows, slot of the actor, slot of the candidate)
    mask = batch.action_masks["Pick Cherry"]
    for row in range(3):
        (actor,) = mask.actors[row][:, 0]
        actor_slot = layout.slot_of(batch, np.array([row]), np.array([actor]))[0]
        candidate_slots = np.flatnonzero(legal[row, actor_slot])
        assert len(candidate_slots) == len(mask.actees[row])  # every cherry is a candidate
        picks = np.zeros((3, layout.slots), np.int64)
        picks[row, actor_slot] = candidate_slots[2]
        chosen = layout.actions(batch, picks)["Pick Cherry"]
        assert chosen[row][0, 0] == 2  # the third candidate, as a position among them
        picks[row, actor_slot] = layout.slots - 1  # no candidate there: the first legal one
        assert layout.actions(batch, picks)["Pick Cherry"][row][0, 0] == 0


def test_cherry_pick_is_a_valid_gymnasium_environment_and_maskable_ppo_runs() -> None:
    from gymnasium.utils.env_checker import check_env

    sb3_contrib = pytest.importorskip("sb3_contrib")
    env = gymnasium.make("entityrl/CherryPick-v0", max_entities=32)
    check_env(env.unwrapped, skip_render_check=True)
    sb3_contrib.MaskablePPO("MultiInputPolicy", env, n_steps=64, batch_size=32, seed=0).learn(128)


def test_bad_actions_are_named() -> None:
    envs = make_gymnasium_vector("Corridor", 2, max_entities=1)
    with pytest.raises(RuntimeError, match="call reset"):
        envs.step(np.zeros((2, 1), np.int64))
    envs.reset(seed=0)
    with pytest.raises(ValueError, match="expected an action of 1 components per environment"):
        envs.step(np.zeros((2, 3), np.int64))
    assert isinstance(envs, EntityGymnasiumVectorEnv)
