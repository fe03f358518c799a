"""Continuous actions in the environment layer: spaces, batching, the clipping rule, checks of
a VecEnv's actions, the validator's messages, random choices and space descriptions."""

from __future__ import annotations

import numpy as np
import pytest
from mixed_actions import Mixed

from entityrl.env import (
    ContinuousAction,
    ContinuousActionMask,
    ContinuousActionSpace,
    EnvValidationError,
    GlobalContinuousAction,
    GlobalContinuousActionSpace,
    ProcessVecEnv,
    RandomPolicy,
    SerialVecEnv,
    ValidatingEnvironment,
    VecContinuousMask,
    validate_vec_obs,
)
from entityrl.env.actions import kind_of
from entityrl.env.space_data import space_differences, spaces_from_data, spaces_to_data
from entityrl.ragged import RaggedArray


def test_space_bounds_broadcast_and_bad_bounds_are_refused() -> None:
    space = ContinuousActionSpace(["a", "b"], low=-2, high=[1, 3])
    assert space.low == (-2.0, -2.0) and space.high == (1.0, 3.0) and len(space) == 2
    with pytest.raises(ValueError, match=r"low < high for every component, not for \['b'\]"):
        ContinuousActionSpace(["a", "b"], low=0.0, high=[1.0, 0.0])
    with pytest.raises(ValueError, match="expected finite high bounds, got inf"):
        GlobalContinuousActionSpace(["a"], high=float("inf"))
    with pytest.raises(ValueError, match="at least one component"):
        ContinuousActionSpace([])
    with pytest.raises(ValueError, match="each component name once"):
        ContinuousActionSpace(["a", "a"])


def moves(env: SerialVecEnv, value: list[float]) -> dict[str, RaggedArray]:
    """Random actions for every action, with every ``move`` actor giving ``value``."""
    actions = RandomPolicy(env.action_space, seed=0).act(env.observation)
    lengths = actions["move"].lengths
    data = np.tile(np.asarray(value, np.float32), (int(lengths.sum()), 1))
    actions["move"] = RaggedArray(data, lengths)
    return actions


def test_masks_name_the_actors_and_the_environment_gets_values_clipped_to_bounds() -> None:
    env = SerialVecEnv(Mixed, 2, seed=0, validate=True)
    obs = env.reset()
    mask = obs.action_masks["move"]
    assert isinstance(mask, VecContinuousMask)
    # Robots 10 and 12 (entity indices 0 and 2) move; the global actions' actor is entity 5.
    assert mask.actors.to_list()[0][:, 0].tolist() == [0, 2]
    assert obs.action_masks["speed"].actors.data[:, 0].tolist() == [5, 5]
    env.act(moves(env, [3.0, -0.5]))
    received = env.envs[0].env.received  # type: ignore[attr-defined]
    move = received["move"]
    assert isinstance(move, ContinuousAction) and move.dims == ("dx", "dy")
    assert move.actors == [10, 12]
    np.testing.assert_array_equal(move.values, [[1.0, 0.0], [1.0, 0.0]])
    speed = received["speed"]
    assert isinstance(speed, GlobalContinuousAction) and 0.0 <= speed.values[0] <= 5.0


def test_a_vec_env_refuses_values_of_the_wrong_kind_and_non_finite_values() -> None:
    env = SerialVecEnv(Mixed, 2, seed=0)
    env.reset()
    actions = moves(env, [0.0, 1.0])
    actions["move"] = RaggedArray(actions["move"].data[:, :1], actions["move"].lengths)
    with pytest.raises(
        ValueError, match=r"'move': expected a RaggedArray of float32 with 2 values"
    ):
        env.act(actions)
    actions = moves(env, [0.0, 1.0])
    actions["move"].data[2, 1] = np.nan
    with pytest.raises(ValueError, match=r"'move': row 1, actor 0: expected finite values, got"):
        env.act(actions)


def test_the_validator_checks_the_actions_an_environment_receives() -> None:
    # Legal actions, as a VecEnv hands them to its environment.
    vec = SerialVecEnv(Mixed, 1, seed=0)
    vec.reset()
    vec.act(moves(vec, [0.5, 0.5]))
    actions = dict(vec.envs[0].received)  # type: ignore[attr-defined]
    env = ValidatingEnvironment(Mixed())
    env.seed(0)
    env.reset()
    bad = ContinuousAction([10, 12], np.array([[0.5, 0.5], [0.5, 2.5]]), ("dx", "dy"))
    with pytest.raises(
        EnvValidationError,
        match=r"Mixed: act\(actions\['move'\]\): actor 12 gave 2.5 for component 'dy', "
        r"expected a finite number in \[0.0, 2.0\]",
    ):
        env.act({**actions, "move": bad})
    env.reset()
    short = ContinuousAction([10, 12], np.zeros((2, 1)), ("dx",))
    with pytest.raises(EnvValidationError, match=r"expected numbers of shape \(2, 2\)"):
        env.act({**actions, "move": short})
    env.reset()
    wrong_actors = ContinuousAction([10], np.zeros((1, 2)), ("dx", "dy"))
    with pytest.raises(EnvValidationError, match=r"expected actions from the offered actors"):
        env.act({**actions, "move": wrong_actors})
    env.reset()
    speed = GlobalContinuousAction(np.array([7.0]), ("throttle",))
    with pytest.raises(EnvValidationError, match=r"the global action gave 7.0 for component"):
        env.act({**actions, "speed": speed})


def test_the_validator_checks_continuous_masks() -> None:
    env = ValidatingEnvironment(Mixed())
    env.seed(0)
    obs = env.env.reset()
    obs.actions = {**obs.actions, "move": ContinuousActionMask(actor_ids=[999])}
    with pytest.raises(EnvValidationError, match=r"actions\['move'\].actor_ids\[0\]"):
        env._checked(obs)
    vec = SerialVecEnv(Mixed, 2, seed=0)
    batch = vec.reset()
    validate_vec_obs(batch, vec.obs_space, vec.action_space, "Mixed")
    batch.action_masks["speed"] = VecContinuousMask(batch.action_masks["move"].actors)
    with pytest.raises(EnvValidationError, match=r"action_masks\['speed'\].actors: row 0"):
        validate_vec_obs(batch, vec.obs_space, vec.action_space, "Mixed")


def test_random_values_fall_within_the_bounds() -> None:
    env = SerialVecEnv(Mixed, 8, seed=0)
    actions = RandomPolicy(env.action_space, seed=1).act(env.reset())
    move = actions["move"].data
    assert move.dtype == np.float32 and move.shape == (16, 2)
    assert (move[:, 0] >= -1).all() and (move[:, 0] <= 1).all()
    assert (move[:, 1] >= 0).all() and (move[:, 1] <= 2).all()
    env.act(actions)


def test_spaces_round_trip_through_plain_data_and_differences_name_the_bounds() -> None:
    env = Mixed()
    spaces = (env.obs_space(), env.action_space())
    assert spaces_from_data(spaces_to_data(*spaces)) == spaces
    other = {**spaces[1], "move": ContinuousActionSpace(["dx", "dy"], low=-1.0, high=2.0)}
    (difference,) = space_differences(spaces, (spaces[0], other))  # type: ignore[arg-type]
    assert "action 'move'" in difference and "low [-1.0, -1.0]" in difference


def test_every_space_has_a_kind() -> None:
    with pytest.raises(TypeError, match=r"expected an action space .*ContinuousActionSpace"):
        kind_of(object())


def test_worker_processes_batch_and_step_continuous_actions_as_one_process_does() -> None:
    serial = SerialVecEnv(Mixed, 4, seed=0)
    with ProcessVecEnv(Mixed, 4, seed=0, num_workers=2) as workers:
        a, b = serial.reset(), workers.reset()
        for step in range(6):
            assert a.action_masks["move"].actors == b.action_masks["move"].actors
            np.testing.assert_array_equal(a.global_features, b.global_features)
            actions = moves(serial, [0.25 * step - 0.5, 1.0])
            a, b = serial.act(actions), workers.act(actions)
            np.testing.assert_array_equal(a.reward, b.reward)


def test_values_clipped_to_a_bound_that_float32_rounds_up_still_validate() -> None:
    class Tenth(Mixed):
        def action_space(self) -> dict[str, object]:  # type: ignore[override]
            return {**super().action_space(), "move": ContinuousActionSpace(["dx", "dy"], 0, 0.1)}

    env = SerialVecEnv(Tenth, 1, seed=0, validate=True)
    env.reset()
    env.act(moves(env, [1.0, 1.0]))  # clipped to float32(0.1), a little above 0.1
    move = env.envs[0].env.received["move"]  # type: ignore[attr-defined]
    assert move.values.dtype == np.float32 and (move.values == np.float32(0.1)).all()
