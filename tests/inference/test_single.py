"""The runtime's direct path for single decisions (entityrl.inference.single) gives the model
exactly the inputs the general path (Batcher, then model_inputs) gives it, and the same
actions and decisions: random spaces and observations (0 to many entities per type, ids,
visibility, masks, global features), and episodes of built-in environments."""

from __future__ import annotations

import functools

import numpy as np
import onnx
import pytest
from env.strategies import observations, spaces
from export.torch_reference import untrained_agent
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from entityrl.env import (
    Batcher,
    CategoricalActionMask,
    CategoricalActionSpace,
    ContinuousActionMask,
    ContinuousActionSpace,
    Entity,
    Environment,
    GlobalCategoricalActionMask,
    GlobalCategoricalActionSpace,
    GlobalContinuousActionMask,
    GlobalContinuousActionSpace,
    Observation,
    ObsSpace,
    SelectEntityAction,
    SelectEntityActionMask,
    SelectEntityActionSpace,
)
from entityrl.envs import REGISTRY, make
from entityrl.export import export_bytes
from entityrl.inference import OnnxPolicy, signature
from entityrl.inference.runtime import draw_one, draw_rows, model_inputs
from entityrl.inference.single import SingleObservation, applies

pytest.importorskip("onnxruntime", reason="the runtime needs onnxruntime (the 'inference' extra)")


def assert_same_inputs(obs_space: ObsSpace, action_space: dict, obs: Observation) -> None:
    """The direct inputs of ``obs`` equal the general path's: same names, dtypes, shapes and
    values."""
    names = {spec.name for spec in signature.input_specs(obs_space, action_space)}
    direct = SingleObservation(obs_space, action_space, names).prepare(obs).feeds
    batch = Batcher(obs_space, action_space).batch([obs])
    general = model_inputs(batch, 0, action_space)
    assert sorted(direct) == sorted(general)
    for name, want in general.items():
        got = direct[name]
        assert isinstance(got, np.ndarray), name
        assert got.dtype == want.dtype, name
        assert got.shape == want.shape, name
        np.testing.assert_array_equal(got, want, err_msg=name)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spaces(), st.data())
def test_direct_inputs_equal_the_batchers_for_random_observations(space, data) -> None:
    obs_space, action_space = space
    for obs in data.draw(st.lists(observations(obs_space, action_space), min_size=1, max_size=4)):
        assert_same_inputs(obs_space, action_space, obs)


GAUSSIAN_SPACE = (
    ObsSpace({"Ship": Entity(["x", "y"]), "Rock": Entity(["size"])}, ["time"]),
    {
        "thrust": ContinuousActionSpace(["dx", "dy"], low=-1.0, high=1.0),
        "throttle": GlobalContinuousActionSpace(["power"], low=[-0.5], high=[0.5]),
        "steer": CategoricalActionSpace(["left", "right", "none"]),
        "target": SelectEntityActionSpace(),
        "mode": GlobalCategoricalActionSpace(["calm", "rush"]),
    },
)


def gaussian_observations() -> list[Observation]:
    """Observations of :data:`GAUSSIAN_SPACE`: none to several entities, every action offered
    or not, actors by ids, by types or all, masks given or not, features as lists, float64
    arrays or float32 arrays."""
    rng = np.random.default_rng(0)
    found = [
        Observation(global_features=[0.5]),  # no entity, no action
        Observation(  # no entity, only the global actions
            global_features=np.array([1.0]),
            actions={
                "throttle": GlobalContinuousActionMask(),
                "mode": GlobalCategoricalActionMask(mask=[False, True]),
            },
        ),
    ]
    for ships in range(4):
        for rocks in range(3):
            ship_ids = [f"ship{i}" for i in range(ships)]
            features = {
                "Ship": rng.normal(size=(ships, 2)).astype(np.float32),
                "Rock": rng.normal(size=(rocks, 1)).tolist(),
            }
            if rocks == 1:
                features["Rock"] = np.asarray(features["Rock"], dtype=np.float64)
            obs = Observation(
                features=features,
                ids={"Ship": ship_ids} if ships % 2 else {},
                global_features=[float(ships)],
                visible={"Rock": rng.random(rocks) < 0.5} if rocks == 2 else {},
                actions={
                    "thrust": ContinuousActionMask(actor_types=["Ship"]),
                    "throttle": GlobalContinuousActionMask(),
                    "steer": CategoricalActionMask(
                        actor_ids=ship_ids[::-1] if ships % 2 else None,
                        actor_types=None if ships % 2 else ["Ship", "Rock"],
                        mask=None if rocks else np.ones((ships, 3), dtype=np.bool_),
                    ),
                    "mode": GlobalCategoricalActionMask(),
                },
            )
            if ships and rocks:
                obs.actions["target"] = SelectEntityActionMask(
                    actor_types=["Ship"],
                    actee_types=["Rock"],
                    mask=None if rocks == 1 else np.array([[True, False]] * ships),
                )
            if ships == 1 and rocks == 2:  # every entity a candidate: ids given and default
                obs.actions["target"] = SelectEntityActionMask(actor_types=["Ship", "Rock"])
            if ships == 2 and rocks == 1:  # candidates by id, across types
                obs.actions["target"] = SelectEntityActionMask(
                    actor_ids=[("Ship", 1)], actee_ids=[("Rock", 0), ("Ship", 1), ("Ship", 0)]
                )
            if ships == 3:
                del obs.actions["thrust"], obs.actions["mode"]
            found.append(obs)
    return found


def test_direct_inputs_equal_the_batchers_for_every_kind() -> None:
    for obs in gaussian_observations():
        assert_same_inputs(*GAUSSIAN_SPACE, obs)


def both_paths(model: bytes, deterministic: bool) -> tuple[OnnxPolicy, OnnxPolicy]:
    """The same policy twice, equally seeded: deciding single observations directly, and
    through the batcher."""
    direct = OnnxPolicy(model, deterministic=deterministic, seed=7)
    general = OnnxPolicy(model, deterministic=deterministic, seed=7)
    general.single = None
    assert direct.single is not None
    return direct, general


def assert_same_actions(got: dict, want: dict) -> None:
    assert list(got) == list(want)
    for name, action in want.items():
        assert type(got[name]) is type(action), name
        for field, value in vars(action).items():
            if isinstance(value, np.ndarray):
                np.testing.assert_array_equal(getattr(got[name], field), value, err_msg=name)
            else:
                assert getattr(got[name], field) == value, (name, field)


def assert_same_decision(got, want) -> None:
    assert got.value == want.value
    for table in ("probs", "mean", "std"):
        assert list(getattr(got, table)) == list(getattr(want, table))
        for name, value in getattr(want, table).items():
            np.testing.assert_array_equal(getattr(got, table)[name], value, err_msg=name)


@pytest.mark.parametrize("deterministic", [False, True])
def test_direct_actions_and_decisions_equal_the_batchers_for_every_kind(deterministic) -> None:
    agent = untrained_agent(*GAUSSIAN_SPACE)
    direct, general = both_paths(export_bytes(agent), deterministic)
    for obs in gaussian_observations():
        assert_same_actions(direct.act(obs), general.act(obs))
        assert_same_decision(direct.decide(obs), general.decide(obs))
        # A call of one observation takes the direct path too.
        (batched,) = direct.act_batch([obs], new_episode=[True])
        assert_same_actions(batched, general.act_batch([obs], new_episode=[True])[0])


ENVIRONMENTS = [
    "CherryPick",
    "ContinuousMoveToOrigin",
    "MineSweeper",
    "MultiArmedBandit",
    "TreasureHunt",
    "Xor",
]


@functools.cache
def exported(name: str) -> tuple[ObsSpace, dict, bytes]:
    env = make(name)
    agent = untrained_agent(env.obs_space(), env.action_space(), env_id=name)
    return env.obs_space(), env.action_space(), export_bytes(agent)


@pytest.mark.parametrize("name", ENVIRONMENTS)
def test_builtin_episodes_decide_alike_on_both_paths(name: str) -> None:
    """Episodes of a built-in environment played by the direct path: every observation gets
    the same inputs, actions (sampled from equally seeded generators) and decisions as
    through the batcher."""
    assert issubclass(REGISTRY[name], Environment)
    obs_space, action_space, model = exported(name)
    direct, general = both_paths(model, deterministic=False)
    env = make(name)
    steps = 0
    for seed in range(3):
        env.seed(seed)
        obs = env.reset()
        for _ in range(15):
            assert_same_inputs(obs_space, action_space, obs)
            assert_same_decision(direct.decide(obs), general.decide(obs))
            actions = direct.act(obs)
            assert_same_actions(actions, general.act(obs))
            steps += 1
            if obs.done:
                break
            obs = env.act(actions)
    assert steps >= 3


def test_an_observation_without_entities_or_actions() -> None:
    obs_space, action_space, model = exported("CherryPick")
    direct, general = both_paths(model, deterministic=False)
    empty = Observation()
    assert_same_inputs(obs_space, action_space, empty)
    assert direct.act(empty) == general.act(empty) == {}
    assert_same_decision(direct.decide(empty), general.decide(empty))


def test_memory_carries_on_alike_on_both_paths() -> None:
    env = make("CherryPick")
    agent = untrained_agent(env.obs_space(), env.action_space(), memory=True)
    direct, general = both_paths(export_bytes(agent), deterministic=True)
    env.seed(0)
    obs = env.reset()
    for step in range(6):
        new = step == 3  # an episode started afresh in the middle
        got, want = direct.decide(obs, new_episode=new), general.decide(obs, new_episode=new)
        assert_same_decision(got, want)
        np.testing.assert_array_equal(direct.state, general.state)
        pick = SelectEntityAction(obs.entity_ids("Player"), [obs.entity_ids("Cherry")[0]])
        obs = env.act({"Pick Cherry": pick})


def test_the_direct_path_covers_the_built_in_kinds_only() -> None:
    assert applies(GAUSSIAN_SPACE[1])
    assert not applies({"odd": object()})


def test_one_row_is_drawn_as_many_rows_are() -> None:
    """The plain-Python draw of a single decision picks what the vectorized draw picks from
    the same generator state: sharp, flat and zero probabilities, one to many choices."""
    rng = np.random.default_rng(0)
    for width in [1, 2, 3, 7, 24, 100]:
        for sharpness in [0.1, 1.0, 30.0]:
            for seed in range(40):
                logits = rng.normal(size=width) * sharpness
                row = np.exp(logits - logits.max()).astype(np.float32)
                row[rng.random(width) < 0.3] = 0.0  # masked choices
                if not row.any():
                    row[-1] = 1.0
                row /= row.sum()
                got = draw_one(row, np.random.default_rng(seed))
                want = draw_rows(row[None], np.random.default_rng(seed))
                np.testing.assert_array_equal(got, want)
                assert got.dtype == want.dtype == np.int64


def test_the_unpadded_model_takes_the_common_observations() -> None:
    """Observations with an entity, every entity visible and candidates for every select-entity
    action are prepared for the unpadded model (no ``visible`` input), the others for the
    one-observation model; both kinds occur here, and each decides as the other path (the
    batcher's, which runs the one-observation model) above."""
    policy = OnnxPolicy(export_bytes(untrained_agent(*GAUSSIAN_SPACE)))
    assert policy.single is not None and policy.unpadded_session is not None
    kinds = set()
    for obs in gaussian_observations():
        prepared = policy.single.prepare(obs)
        entities = sum(len(rows) for rows in obs.features.values())
        hidden = any(not np.all(flags) for flags in obs.visible.values())
        common = entities > 0 and not hidden and prepared.candidates["target"] > 0
        assert prepared.padded is not common
        assert (signature.VISIBLE in prepared.feeds) is prepared.padded
        kinds.add(common)
    assert kinds == {False, True}


def test_a_file_without_the_unpadded_model_decides_with_the_padded_one() -> None:
    """A policy exported before the unpadded model (no :data:`signature.UNPADDED_KEY`) decides
    every observation with the one-observation model, as the unpadded one decides."""
    model = onnx.load_from_string(exported("CherryPick")[2])
    props = [p for p in model.metadata_props if p.key != signature.UNPADDED_KEY]
    del model.metadata_props[:]
    model.metadata_props.extend(props)
    before = OnnxPolicy(model.SerializeToString(), seed=7)
    now = OnnxPolicy(exported("CherryPick")[2], seed=7)
    assert before.unpadded_session is None and before.single is not None
    env = make("CherryPick")
    env.seed(0)
    obs = env.reset()
    assert before.single.prepare(obs).padded and not now.single.prepare(obs).padded
    assert_same_decision(before.decide(obs), now.decide(obs))
    assert_same_actions(before.act(obs), now.act(obs))
