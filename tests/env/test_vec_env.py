"""SerialVecEnv and BatchedEnvironment: auto-reset, episode metrics, seeding, action checks."""

from __future__ import annotations

import functools
import subprocess
import sys
from collections.abc import Callable

import numpy as np
import pytest
from tiny_envs import Countdown, Explodes, Growing, choose_first_legal
from vec_env_checks import assert_vec_obs_equal

from entityrl.env import (
    EnvValidationError,
    Observation,
    RaggedArray,
    RandomPolicy,
    SerialVecEnv,
    VecEnv,
    VecObs,
)


def test_done_row_carries_final_reward_and_next_episode_first_observation() -> None:
    env = SerialVecEnv(functools.partial(Growing, length=2), 2, seed=0)
    first = env.reset()
    np.testing.assert_array_equal(first.features["Token"].lengths, [1, 1])
    middle = env.act(choose_first_legal(first))
    # Step 0 offers "Pick" to nobody (a single token); "Move" choices are 0: reward 0.
    np.testing.assert_array_equal(middle.reward, [0, 0])
    np.testing.assert_array_equal(middle.done, [False, False])
    np.testing.assert_array_equal(middle.features["Token"].lengths, [2, 2])
    last = env.act(choose_first_legal(middle))
    # The base picked token 1 (token 0 is masked): reward 10, and the episode ended...
    np.testing.assert_array_equal(last.reward, [10, 10])
    np.testing.assert_array_equal(last.done, [True, True])
    # ...and the rows already show the next episode's first observation.
    np.testing.assert_array_equal(last.features["Token"].lengths, [1, 1])
    np.testing.assert_array_equal(last.features["Token"].data[:, 0], [0, 0])
    np.testing.assert_array_equal(last.global_features[:, 0], [0, 0])
    np.testing.assert_array_equal(last.action_masks["Pick"].actors.lengths, [0, 0])


def test_actions_reach_each_environment() -> None:
    env = SerialVecEnv(functools.partial(Growing, length=5), 3, seed=1)
    policy = RandomPolicy(env.action_space, seed=2)
    obs = env.reset()
    for _ in range(4):
        actions = policy.act(obs)
        moves = np.add.reduceat(actions["Move"].data[:, 0], actions["Move"].offsets[:-1])
        picks = np.zeros(3)
        picks[actions["Pick"].lengths > 0] = actions["Pick"].data[:, 0]
        obs = env.act(actions)
        np.testing.assert_array_equal(obs.reward, moves + 10 * picks)


def test_ended_episodes_report_return_length_and_latest_env_metrics() -> None:
    env = SerialVecEnv(functools.partial(Growing, length=3), 2, seed=0)
    obs = env.reset()
    rewards = []
    for step in range(1, 4):
        obs = env.act(choose_first_legal(obs))
        rewards.append(obs.reward)
        if step < 3:
            assert obs.metrics == {}
    np.testing.assert_array_equal(obs.metrics["episode_return"], np.sum(rewards, axis=0))
    np.testing.assert_array_equal(obs.metrics["episode_length"], [3, 3])
    # "tokens" came from the step before the last; "finished" from the last.
    np.testing.assert_array_equal(obs.metrics["tokens"], [3, 3])
    np.testing.assert_array_equal(obs.metrics["finished"], [1, 1])
    # The next episode starts counting from zero.
    for _ in range(3):
        obs = env.act(choose_first_legal(obs))
    np.testing.assert_array_equal(obs.metrics["episode_length"], [3, 3])


def play(env: SerialVecEnv, steps: int, seed: int = 0) -> list[VecObs]:
    policy = RandomPolicy(env.action_space, seed=seed)
    batches = [env.reset()]
    for _ in range(steps):
        batches.append(env.act(policy.act(batches[-1])))
    return batches


def test_same_seed_plays_the_same_episodes() -> None:
    make = functools.partial(Growing, length=3)
    first = play(SerialVecEnv(make, 3, seed=7), 6)
    again = play(SerialVecEnv(make, 3, seed=7), 6)
    for a, b in zip(first, again, strict=True):
        assert_vec_obs_equal(a, b)
    other = play(SerialVecEnv(make, 3, seed=8), 6)
    assert first[0].features["Token"] != other[0].features["Token"]


def test_environment_i_is_seeded_with_seed_plus_offset_plus_i() -> None:
    make = functools.partial(Growing, length=3)
    whole = SerialVecEnv(make, 4, seed=5).reset()
    tail = SerialVecEnv(make, 2, seed=5, seed_offset=2).reset()
    assert_vec_obs_equal(whole.take(np.array([2, 3])), tail)


class NanFeatures(Explodes):
    def observe(self) -> Observation:
        obs = super().observe()
        obs.features = {"Thing": [[float("nan")]]}
        return obs


def test_validate_checks_every_observation() -> None:
    SerialVecEnv(Explodes, 2).reset()  # no validation: passes through
    with pytest.raises(EnvValidationError, match=r"NanFeatures: Observation.features\['Thing'\]"):
        SerialVecEnv(NanFeatures, 2, validate=True).reset()


def drop(name: str) -> Callable[[dict[str, RaggedArray]], None]:
    def change(actions: dict[str, RaggedArray]) -> None:
        del actions[name]

    return change


def set_value(name: str, value: int) -> Callable[[dict[str, RaggedArray]], None]:
    def change(actions: dict[str, RaggedArray]) -> None:
        actions[name].data[0, 0] = value

    return change


def replace(name: str, value: object) -> Callable[[dict[str, RaggedArray]], None]:
    def change(actions: dict[str, RaggedArray]) -> None:
        actions[name] = value  # type: ignore[assignment]

    return change


# After two steps each row has 3 tokens (all "Move" actors) and the base picks one of the
# 3 tokens (position 0 masked). Values are changed in row 0.
REJECTED = [
    ("missing-action", drop("Move"), ["action 'Move'", "one value per actor", "row 0 has 3"]),
    (
        "unknown-action",
        replace("Jump", RaggedArray.from_flat(np.zeros(2, np.int64), [1, 1])),
        ["action 'Jump'", "unknown action", "'Move', 'Pick', 'Mode'"],
    ),
    (
        "wrong-actor-count",
        replace("Move", RaggedArray.from_flat(np.zeros(5, np.int64), [2, 3])),
        ["action 'Move'", "row 0", "expected 3 values (one per actor)", "got 2"],
    ),
    (
        "wrong-row-count",
        replace("Move", RaggedArray.from_flat(np.zeros(3, np.int64), [3])),
        ["action 'Move'", "expected 2 rows (one per environment)", "got 1"],
    ),
    (
        "not-integers",
        replace("Move", RaggedArray.from_flat(np.zeros(6, np.float32), [3, 3])),
        ["action 'Move'", "RaggedArray of int64", "got float32 with 1 features"],
    ),
    (
        "not-a-ragged-array",
        replace("Move", np.zeros((2, 3), np.int64)),
        ["action 'Move'", "RaggedArray of int64", "got ndarray"],
    ),
    (
        "choice-out-of-range",
        set_value("Move", 3),
        ["action 'Move'", "row 0, actor 0", "choice in [0, 3)", "got 3"],
    ),
    (
        "negative-choice",
        set_value("Move", -1),
        ["action 'Move'", "row 0, actor 0", "choice in [0, 3)", "got -1"],
    ),
    (
        "masked-choice",
        set_value("Move", 2),
        ["action 'Move'", "row 0, actor 0", "a choice its mask allows", "got 2"],
    ),
    (
        "actee-out-of-range",
        set_value("Pick", 3),
        ["action 'Pick'", "row 0, actor 0", "actee position in [0, 3)", "got 3"],
    ),
    (
        "masked-actee",
        set_value("Pick", 0),
        ["action 'Pick'", "row 0, actor 0", "an actee position its mask allows", "got 0"],
    ),
    (
        "masked-global-choice",
        set_value("Mode", 1),
        ["action 'Mode'", "row 0, actor 0", "a choice its mask allows", "got 1"],
    ),
]


@pytest.mark.parametrize(
    ("change", "fragments"),
    [pytest.param(change, fragments, id=name) for name, change, fragments in REJECTED],
)
def test_check_actions_rejects(
    change: Callable[[dict[str, RaggedArray]], None], fragments: list[str]
) -> None:
    env = SerialVecEnv(functools.partial(Growing, length=5), 2, seed=0)
    obs = env.reset()
    for _ in range(2):
        obs = env.act(choose_first_legal(obs))
    actions = choose_first_legal(obs)
    change(actions)
    with pytest.raises(ValueError) as error:
        env.act(actions)
    for fragment in fragments:
        assert fragment in str(error.value), str(error.value)
    assert all(len(e.received) == 2 for e in env.envs)  # type: ignore[attr-defined]


def test_error_locates_the_actor_in_later_rows() -> None:
    env = SerialVecEnv(functools.partial(Growing, length=5), 2, seed=0)
    obs = env.act(choose_first_legal(env.reset()))
    actions = choose_first_legal(obs)
    actions["Move"].data[3, 0] = 2  # row 1 (2 tokens per row), its second actor
    with pytest.raises(ValueError, match="row 1, actor 1"):
        env.act(actions)


def test_act_before_reset_and_bad_sizes_are_refused() -> None:
    env = SerialVecEnv(Explodes, 1)
    with pytest.raises(RuntimeError, match="reset"):
        env.act({})
    with pytest.raises(ValueError, match="num_envs must be >= 1, got 0"):
        SerialVecEnv(Explodes, 0)


def test_render_shows_the_chosen_environment() -> None:
    env = SerialVecEnv(Growing, 2)
    obs = env.reset()
    env.envs[1].step = 2  # type: ignore[attr-defined]
    assert env.render(1) == "step 2"
    assert env.render() == "step 0"
    assert obs.num_rows == 2


# ---------------------------------------------------------------------------- BatchedEnvironment
def test_batched_environment_resets_ended_copies_and_reports_episodes() -> None:
    env = Countdown(6, seed=3)
    obs = env.reset()
    np.testing.assert_array_equal(obs.reward, np.zeros(6))
    np.testing.assert_array_equal(obs.done, np.zeros(6, dtype=bool))
    remaining = obs.features["Clock"].data[:, 0].astype(np.int64)
    length = np.zeros(6, dtype=np.int64)
    resets = np.ones(6, dtype=np.int64)
    tock = {"Tick": RaggedArray.from_flat(np.ones(6, np.int64), np.ones(6, np.int64))}
    for _ in range(8):
        obs = env.act(tock)
        remaining -= 1
        length += 1
        ended = remaining == 0
        np.testing.assert_array_equal(obs.done, ended)
        np.testing.assert_array_equal(obs.reward, np.ones(6))
        if ended.any():
            # An episode lasted its start count and earned 1 per step.
            np.testing.assert_array_equal(obs.metrics["episode_length"], length[ended])
            np.testing.assert_array_equal(obs.metrics["episode_return"], length[ended])
            np.testing.assert_array_equal(obs.metrics["start"], length[ended])
        else:
            assert obs.metrics == {}
        # Exactly the copies that ended were reset, and show their new episode.
        resets += ended
        np.testing.assert_array_equal(env.resets, resets)
        length[ended] = 0
        remaining[ended] = obs.features["Clock"].data[ended, 0]
        np.testing.assert_array_equal(obs.features["Clock"].data[:, 0], remaining)
    assert (resets > 2).any()  # the test saw copies end more than once


def test_batched_environment_checks_actions_and_order_of_calls() -> None:
    env = Countdown(2, seed=0)
    with pytest.raises(RuntimeError, match="reset"):
        env.act({})
    env.reset()
    with pytest.raises(
        ValueError, match=r"action 'Tick': row 1, actor 0: expected a choice in \[0, 2\), got 2"
    ):
        env.act({"Tick": RaggedArray.from_flat(np.array([0, 2], np.int64), [1, 1])})
    with pytest.raises(ValueError, match="num_envs must be >= 1, got 0"):
        Countdown(0)


def test_env_package_does_not_import_torch() -> None:
    code = "import entityrl.env, sys; assert 'torch' not in sys.modules, 'torch'"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


# ---------------------------------------------------------------------------- saved state
def continue_from(env: VecEnv, obs: VecObs, steps: int, seed: int) -> list[VecObs]:
    policy = RandomPolicy(env.action_space, seed=seed)
    batches = []
    for _ in range(steps):
        obs = env.act(policy.act(obs))
        batches.append(obs)
    return batches


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(
            lambda: SerialVecEnv(functools.partial(Growing, length=3), 3, seed=2), id="serial"
        ),
        pytest.param(lambda: Countdown(4, seed=2), id="batched"),
    ],
)
def test_restored_state_continues_exactly(make: Callable[[], VecEnv]) -> None:
    env = make()
    obs = continue_from(env, env.reset(), 4, seed=0)[-1]  # mid-episode
    saved = env.get_state()
    expected = continue_from(env, obs, 5, seed=1)
    fresh = make()
    restored = fresh.set_state(saved)
    assert_vec_obs_equal(restored, obs)
    got = continue_from(fresh, restored, 5, seed=1)
    for a, b in zip(expected, got, strict=True):
        assert_vec_obs_equal(a, b)
    assert any(batch.metrics for batch in got)  # episodes ended after the restore


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: SerialVecEnv(Growing, 2), id="serial"),
        pytest.param(lambda: Countdown(2), id="batched"),
    ],
)
def test_state_saved_before_reset_is_refused(make: Callable[[], VecEnv]) -> None:
    saved = make().get_state()
    with pytest.raises(ValueError, match="before reset"):
        make().set_state(saved)
