"""entity-gym environments on entityrl: spaces, validation, vectorization, the exact actions
the environment receives, seeding, resume, errors, and training."""

from __future__ import annotations

import functools
import pickle
import re
from typing import Any

import fake_entity_gym as eg
import numpy as np
import pytest
from gym_envs import ENVS, Dial, Herd, PickBest
from vec_env_checks import assert_replays, assert_vec_obs_equal, play_past_a_saved_state

import entityrl
from entityrl.cli.main import main
from entityrl.compat.entity_gym import (
    EntityGymEnvironment,
    NamedEntityGymEnvironment,
    from_entity_gym,
)
from entityrl.env import (
    CategoricalActionSpace,
    Environment,
    GlobalCategoricalActionSpace,
    ProcessVecEnv,
    RandomPolicy,
    SelectEntityActionSpace,
    SerialVecEnv,
    ValidatingEnvironment,
    VecObs,
)
from entityrl.envs import make, make_vec
from entityrl.nn.rogue_net import RogueNetConfig
from entityrl.ragged import RaggedArray
from entityrl.training.config import LogConfig, OptimConfig, RolloutConfig, TrainConfig


def actions(**rows: list[list[int]]) -> dict[str, RaggedArray]:
    """Actions for a VecEnv: per action name, one list of values per row."""
    return {
        name: RaggedArray.from_arrays(
            [np.asarray(r, dtype=np.int64).reshape(-1, 1) for r in values],
            features=1,
            dtype=np.int64,
        )
        for name, values in rows.items()
    }


def play(env: Any, steps: int, seed: int = 0) -> list[VecObs]:
    """Random legal play; the list of observations."""
    with env:
        policy = RandomPolicy(env.action_space, seed=seed)
        history = [env.reset()]
        for _ in range(steps):
            history.append(env.act(policy.act(history[-1])))
    return history


def inner(vec: SerialVecEnv, i: int) -> Any:
    """The entity-gym environment behind row ``i``."""
    wrapped = vec.envs[i]
    if isinstance(wrapped, ValidatingEnvironment):
        wrapped = wrapped.env
    assert isinstance(wrapped, EntityGymEnvironment)
    return wrapped.env


# ---------------------------------------------------------------------------- spaces
def test_spaces_are_translated() -> None:
    env = EntityGymEnvironment(Dial())
    assert env.obs_space().entity_names == ["Knob"]
    assert env.obs_space().entities["Knob"].features == ("angle", "step")
    assert env.obs_space().global_features == ("target",)
    spaces = env.action_space()
    assert isinstance(spaces["turn"], GlobalCategoricalActionSpace)
    assert spaces["turn"].choices == Dial.DIRECTIONS
    assert isinstance(spaces["tap"], CategoricalActionSpace)
    assert isinstance(
        EntityGymEnvironment(PickBest()).action_space()["pick"], SelectEntityActionSpace
    )


# ---------------------------------------------------------------------------- validate, vectorize
@pytest.mark.parametrize("env_class", ENVS, ids=lambda c: c.__name__)
def test_validates_under_random_play(env_class: type) -> None:
    history = play(SerialVecEnv(from_entity_gym(env_class), 8, seed=0, validate=True), 40)
    assert sum(obs.done.sum() for obs in history) > 8  # episodes ended and restarted
    assert any(len(obs.metrics.get("episode_return", ())) for obs in history)


@pytest.mark.parametrize("env_class", ENVS, ids=lambda c: c.__name__)
def test_one_worker_process_plays_the_serial_episodes(env_class: type) -> None:
    factory = from_entity_gym(env_class)
    serial = play(SerialVecEnv(factory, 6, seed=4), 12)
    process = play(ProcessVecEnv(factory, 6, seed=4, num_workers=1), 12)
    for a, b in zip(serial, process, strict=True):
        assert_vec_obs_equal(a, b)


class Translated(Environment):
    """An EntityGymEnvironment behind a plain Environment: SerialVecEnv translates every step."""

    def __init__(self, env_class: type) -> None:
        self.inner = EntityGymEnvironment(env_class())

    def obs_space(self) -> Any:
        return self.inner.obs_space()

    def action_space(self) -> Any:
        return self.inner.action_space()

    def reset(self) -> Any:
        return self.inner.reset()

    def act(self, actions: Any) -> Any:
        return self.inner.act(actions)

    def seed(self, seed: int) -> None:
        self.inner.seed(seed)


@pytest.mark.parametrize("env_class", ENVS, ids=lambda c: c.__name__)
def test_native_stepping_batches_what_translation_batches(env_class: type) -> None:
    # One after the other: entity-gym environments share the global generators.
    native = SerialVecEnv(from_entity_gym(env_class), 6, seed=3)
    assert native._native
    first = play(native, 30)
    translated = SerialVecEnv(functools.partial(Translated, env_class), 6, seed=3)
    assert not translated._native
    for a, b in zip(first, play(translated, 30), strict=True):
        assert_vec_obs_equal(a, b)


def test_native_stepping_names_a_malformed_observation() -> None:
    class BrokenLater(Dial):
        def act(self, actions: Any) -> Any:
            return {"features": {}}

    with SerialVecEnv(from_entity_gym(BrokenLater), 2, seed=0) as vec:
        policy = RandomPolicy(vec.action_space, seed=0)
        with pytest.raises(TypeError, match=r"BrokenLater\.act\(\): expected an entity-gym"):
            vec.act(policy.act(vec.reset()))


def test_two_workers_are_reproducible_per_seed() -> None:
    factory = from_entity_gym(PickBest)
    first = play(ProcessVecEnv(factory, 6, seed=1, num_workers=2), 6)
    again = play(ProcessVecEnv(factory, 6, seed=1, num_workers=2), 6)
    other = play(ProcessVecEnv(factory, 6, seed=2, num_workers=2), 6)
    for a, b in zip(first, again, strict=True):
        assert_vec_obs_equal(a, b)
    assert first[0].features["Item"] != other[0].features["Item"]


def test_metrics_and_returns_reach_the_batch() -> None:
    with SerialVecEnv(from_entity_gym(Herd, length=1), 3, seed=0) as vec:
        obs = vec.reset()
        hungry = [row[:, 0].astype(bool) for row in obs.features["Sheep"]]
        obs = vec.act(actions(graze=[[int(h) for h in row] + [0] for row in hungry]))
    np.testing.assert_array_equal(obs.reward, [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(obs.metrics["correct"], [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(obs.metrics["episode_return"], [1.0, 1.0, 1.0])


# ---------------------------------------------------------------------------- exact actions
def test_categorical_actions_arrive_with_default_ids_labels_and_masks() -> None:
    vec = SerialVecEnv(from_entity_gym(Herd), 2, seed=0)
    obs = vec.reset()
    sheep = obs.features["Sheep"].lengths.tolist()
    # Every entity acts; the dog (last in ObsSpace order) may only rest.
    assert obs.action_masks["graze"].actors.lengths.tolist() == [n + 1 for n in sheep]
    assert obs.action_masks["graze"].mask[0][-1].tolist() == [True, False]
    chosen = [[1] * n + [0] for n in sheep]
    vec.act(actions(graze=chosen))
    for i, n in enumerate(sheep):
        graze = inner(vec, i).last_actions["graze"]
        assert type(graze) is eg.CategoricalAction
        assert list(graze.actors) == [("Sheep", k) for k in range(n)] + [("Dog", 0)]
        assert graze.indices.tolist() == chosen[i]
        assert graze.index_to_label == ["rest", "eat"]
        assert graze.labels == ["eat"] * n + ["rest"]
        assert graze.probs is None


def test_select_entity_actions_arrive_as_candidate_ids() -> None:
    vec = SerialVecEnv(from_entity_gym(PickBest), 2, seed=0, validate=True)
    obs = vec.reset()
    mask = obs.action_masks["pick"]
    # Item entities come first (indices 0-4), the picker is entity 5; the first candidate is
    # masked for the picker.
    assert mask.actors[0].ravel().tolist() == [5]
    assert mask.actees[0].ravel().tolist() == [0, 1, 2, 3, 4]
    assert mask.mask[0].ravel().tolist() == [False, True, True, True, True]
    values = [inner(vec, i).values for i in range(2)]
    obs = vec.act(actions(pick=[[2], [4]]))
    picks = [inner(vec, i).last_actions["pick"] for i in range(2)]
    assert all(type(p) is eg.SelectEntityAction for p in picks)
    assert [(list(p.actors), list(p.actees)) for p in picks] == [
        (["picker"], ["item-2"]),
        (["picker"], ["item-4"]),
    ]
    np.testing.assert_allclose(obs.reward, [values[0][2], values[1][4]], rtol=1e-6)
    # The picked item is hidden from the policy, and no longer a candidate.
    assert obs.visible["Item"][0].ravel().tolist() == [True, True, False, True, True]
    assert obs.action_masks["pick"].actees[0].ravel().tolist() == [0, 1, 3, 4]
    # Position 1 in the new candidate list is item-1.
    vec.act(actions(pick=[[1], [1]]))
    assert list(inner(vec, 0).last_actions["pick"].actees) == ["item-1"]


def test_global_actions_and_actions_offered_on_some_steps() -> None:
    vec = SerialVecEnv(from_entity_gym(Dial), 3, seed=5, validate=True)
    obs = vec.reset()
    targets = obs.global_features[:, 0].astype(int)
    # The global action's actor is the pseudo-entity after the row's one knob.
    assert obs.action_masks["turn"].actors.data.ravel().tolist() == [1, 1, 1]
    assert obs.action_masks["turn"].mask.data[:, 4].tolist() == [False] * 3
    assert obs.action_masks["tap"].actors.lengths.tolist() == [1, 1, 1]
    obs = vec.act(actions(turn=[[t] for t in targets], tap=[[1], [0], [1]]))
    np.testing.assert_array_equal(obs.reward, [1.0, 1.0, 1.0])
    received = inner(vec, 0).last_actions
    assert type(received["turn"]) is eg.GlobalCategoricalAction
    assert (received["turn"].index, received["turn"].label) == (targets[0], "nesw"[targets[0]])
    assert type(received["tap"]) is eg.CategoricalAction
    assert list(received["tap"].actors) == ["knob"] and received["tap"].labels == ["hard"]
    # Step 1 offers no tap: the environment must not receive one.
    assert obs.action_masks["tap"].actors.lengths.tolist() == [0, 0, 0]
    vec.act(actions(turn=[[0], [0], [0]], tap=[[], [], []]))
    assert "tap" not in inner(vec, 0).last_actions


def test_actions_are_built_from_the_classes_next_to_a_subclassed_space() -> None:
    class Thrusters(eg.CategoricalActionSpace):
        """A space subclass defined outside the API module."""

    class Rocket(Herd):
        def action_space(self) -> dict[str, Any]:
            return {"graze": Thrusters(["rest", "eat"])}

    vec = SerialVecEnv(lambda: EntityGymEnvironment(Rocket()), 1, seed=0)
    obs = vec.reset()
    vec.act(actions(graze=[[0] * int(obs.action_masks["graze"].actors.lengths[0])]))
    assert type(inner(vec, 0).last_actions["graze"]) is eg.CategoricalAction


# ---------------------------------------------------------------------------- seeding, resume
def test_seed_makes_the_batch_reproducible() -> None:
    first = play(SerialVecEnv(from_entity_gym(Herd), 4, seed=9), 5)
    again = play(SerialVecEnv(from_entity_gym(Herd), 4, seed=9), 5)
    for a, b in zip(first, again, strict=True):
        assert_vec_obs_equal(a, b)


def test_resume_from_state_continues_exactly() -> None:
    factory = from_entity_gym(PickBest)
    with SerialVecEnv(factory, 4, seed=2) as vec:
        _, state, chosen, after = play_past_a_saved_state(vec, warmup=3, steps=5)
        np.random.seed(12345)  # disturb the global generator the environments draw from
        vec.set_state(state)
        assert_replays(vec, chosen, after)


def test_seed_calls_the_environments_own_seed() -> None:
    seen: list[int] = []

    class Seeded(Herd):
        def seed(self, seed: int) -> None:
            seen.append(seed)

    EntityGymEnvironment(Seeded()).seed(7)
    assert seen == [7]


# ---------------------------------------------------------------------------- factory
def test_factory_pickles_and_names_the_environment() -> None:
    factory = pickle.loads(pickle.dumps(from_entity_gym(Herd, length=5)))
    env = factory()
    assert isinstance(env, EntityGymEnvironment) and env.env.length == 5
    assert factory.__name__ == "Herd"
    assert repr(factory) == "from_entity_gym(Herd, length=5)"


def test_factory_names_its_registry_id_when_the_class_can_be_imported_again() -> None:
    factory = from_entity_gym(Herd, length=5)
    assert (factory.env_id, factory.env_kwargs) == ("entity_gym:gym_envs:Herd", {"length": 5})

    class Local(Herd):
        pass

    assert from_entity_gym(Local).env_id is None  # defined in a function: not importable
    unplain = from_entity_gym(Herd, length=np.int64(5))  # not a YAML value: cannot be recorded
    assert (unplain.env_id, unplain.env_kwargs) == (None, {})


# ---------------------------------------------------------------------------- registry
def test_registry_builds_an_entity_gym_class_by_import_path() -> None:
    env = make("entity_gym:gym_envs:Herd", length=2)
    assert isinstance(env, NamedEntityGymEnvironment) and env.env.length == 2
    assert env.obs_space() == EntityGymEnvironment(Herd()).obs_space()
    vec = make_vec("entity_gym:gym_envs:Herd", 2, seed=0, length=2)
    assert len(play(vec, 3)) == 4


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("entity_gym:gym_envs", "expected entity_gym:<module>:<Class>"),
        ("entity_gym:no_such_module:Herd", "cannot import 'no_such_module'.*docs/interop.md"),
        ("entity_gym:gym_envs:Sheep", "module 'gym_envs' has no 'Sheep'"),
        ("entity_gym:gym_envs:random", "expected an environment class"),
    ],
)
def test_registry_names_what_is_wrong_with_an_entity_gym_id(name: str, message: str) -> None:
    with pytest.raises(KeyError, match=message):
        make(name)


# ---------------------------------------------------------------------------- errors
class _Odd:
    """Not an entity-gym class."""


def test_unknown_observation_space_is_named() -> None:
    class Shapeless(Herd):
        def obs_space(self) -> Any:
            return {"Sheep": ["hungry"]}

    with pytest.raises(
        TypeError, match=r"Shapeless\.obs_space\(\): expected an entity-gym ObsSpace"
    ):
        EntityGymEnvironment(Shapeless())


def test_unknown_action_space_is_named() -> None:
    class Strange(Herd):
        def action_space(self) -> dict[str, Any]:
            return {"graze": _Odd()}

    with pytest.raises(
        TypeError, match=r"Strange\.action_space\(\)\['graze'\]: expected .*got _Odd"
    ):
        EntityGymEnvironment(Strange())


def test_unknown_mask_is_named() -> None:
    class BadMask(Dial):
        def reset(self) -> Any:
            obs = super().reset()
            obs.actions["turn"] = _Odd()
            return obs

    with pytest.raises(TypeError, match=r"BadMask: observation actions\['turn'\]: .*got _Odd"):
        EntityGymEnvironment(BadMask()).reset()


def test_non_observation_is_named() -> None:
    class Broken(Dial):
        def reset(self) -> Any:
            return {"features": {}}

    with pytest.raises(TypeError, match=r"Broken\.reset\(\): expected an entity-gym Observation"):
        EntityGymEnvironment(Broken()).reset()


def test_missing_action_classes_are_reported() -> None:
    class Lonely:
        """A space whose module (this test module) defines no action classes."""

    Lonely.__name__ = "SelectEntityActionSpace"

    class Picker(PickBest):
        def action_space(self) -> dict[str, Any]:
            return {"pick": Lonely()}

    with pytest.raises(TypeError, match="cannot find class 'SelectEntityAction'"):
        EntityGymEnvironment(Picker())


def test_not_callable_factory_is_refused() -> None:
    with pytest.raises(TypeError, match="expected an entity-gym Environment class"):
        from_entity_gym(Herd())  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- training
def test_train_learns_a_fixture_environment_then_evaluates_and_plays_it(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    config = TrainConfig(
        total_timesteps=3_072,
        seed=3,
        torch_threads=1,
        net=RogueNetConfig(d_model=16, n_layer=1, n_head=1),
        rollout=RolloutConfig(num_envs=32, steps=8),
        optim=OptimConfig(bs=256, lr=0.01),
        log=LogConfig(run_dir=str(tmp_path / "run"), tensorboard=False, progress=False),
    )
    result = entityrl.train(from_entity_gym(Herd, length=1), config)
    assert result.steps == 3_072
    assert result.run_dir.name == "run"
    # Random play gets 0.5 (each sheep guesses); the last 100 episodes must do much better.
    assert result.mean_return is not None and result.mean_return > 0.9

    # The run records how to rebuild its environment, so it evaluates and plays by name.
    code = main(["eval", str(result.run_dir), "--episodes", "20", "--deterministic"])
    out, _ = capsys.readouterr()
    assert code == 0, out
    assert "entity_gym:gym_envs:Herd agent" in out
    mean_return = float(re.search(r"^episode_return\s+([-\d.]+)", out, re.M).group(1))  # type: ignore[union-attr]
    assert mean_return > 0.9
    args = ["play", "entity_gym:gym_envs:Herd", "--agent", str(result.run_dir)]
    assert main([*args, "--steps", "3", "--delay", "0"]) == 0
