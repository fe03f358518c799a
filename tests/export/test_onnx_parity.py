"""Exported models decide as the torch policy does: every built-in environment's spaces,
random observations with 0 to many entities per type, and every network option that exports."""

from __future__ import annotations

import base64
import functools
from pathlib import Path

import onnx
import pytest
import torch
from env.strategies import observations, spaces
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch_reference import assert_same_decision, torch_decision, untrained_agent

from entityrl.env import (
    CategoricalActionSpace,
    ContinuousActionMask,
    ContinuousActionSpace,
    Entity,
    Environment,
    GlobalCategoricalActionSpace,
    GlobalContinuousActionMask,
    GlobalContinuousActionSpace,
    Observation,
    ObsSpace,
    SelectEntityActionSpace,
)
from entityrl.env.actions import kind_of, kinds
from entityrl.envs import REGISTRY, make, make_vec
from entityrl.export import export_bytes
from entityrl.inference import OnnxPolicy, signature
from entityrl.inference.signature import EXPORTED_SPACES
from entityrl.nn.embedding import TranslationConfig
from entityrl.nn.relpos import RelposConfig
from entityrl.training.agent import Agent
from entityrl.training.config import CONFIG_DIR, ConfigError, load_config

pytest.importorskip("onnxruntime", reason="exporting needs the 'export' extra")

TOLERANCE = 1e-5


def assert_same_decisions(
    agent, policy: OnnxPolicy, observations_, tolerance: float = TOLERANCE
) -> None:
    """Each observation decided alone, and all of them in one call of the batched model (with
    memory: each as the first of an episode; see test_export_memory.py for episodes), equal
    within ``tolerance``."""
    together = policy.decide_batch(observations_, new_episode=True) if observations_ else []
    for row, obs in enumerate(observations_):
        want = torch_decision(agent, obs)[0]
        assert_same_decision(policy.decide(obs, new_episode=True), want, tolerance)
        assert_same_decision(together[row], want, tolerance)


@st.composite
def any_observations(draw: st.DrawFn, obs_space: ObsSpace, action_space) -> Observation:
    """Random observations (:func:`observations`, which offers discrete actions only) with the
    continuous actions offered or not, taken by all entities, some types or some ids."""
    discrete = {n: s for n, s in action_space.items() if kind_of(s).discrete}
    obs = draw(observations(obs_space, discrete))
    for name, space in action_space.items():
        if name in discrete or not draw(st.booleans()):
            continue
        if isinstance(space, GlobalContinuousActionSpace):
            obs.actions[name] = GlobalContinuousActionMask()
            continue
        ids = obs.named_entities(list(obs_space.entities))
        how = draw(st.sampled_from(["all", "types", "ids"]))
        obs.actions[name] = ContinuousActionMask(
            actor_ids=draw(st.permutations(ids)) if how == "ids" else None,
            actor_types=draw(st.lists(st.sampled_from(list(obs_space.entities)), unique=True))
            if how == "types"
            else None,
        )
    return obs


@functools.cache
def builtin_agent(name: str) -> tuple[Agent, OnnxPolicy]:
    vec = make_vec(name, 1, seed=0)
    agent = untrained_agent(vec.obs_space, vec.action_space, env_id=name)
    vec.close()
    return agent, OnnxPolicy(export_bytes(agent))


# Every action kind exports: every built-in environment.
assert set(EXPORTED_SPACES) == {kind.space for kind in kinds()}
EXPORTABLE = sorted(REGISTRY)


@pytest.mark.parametrize("name", EXPORTABLE)
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_builtin_environment_exports_and_decides_as_torch(name: str, data) -> None:
    agent, policy = builtin_agent(name)
    drawn = data.draw(st.lists(any_observations(agent.obs_space, agent.action_space), max_size=3))
    assert_same_decisions(agent, policy, drawn)


@pytest.mark.parametrize("name", [n for n in EXPORTABLE if issubclass(REGISTRY[n], Environment)])
def test_real_observations_decide_as_torch(name: str) -> None:
    agent, policy = builtin_agent(name)
    env = make(name)
    found = []
    for seed in range(3):
        env.seed(seed)
        found.append(env.reset())
    assert_same_decisions(agent, policy, found)


NET_OPTIONS = [
    {"n_layer": 0},
    {"n_layer": 1, "n_head": 4},
    {"pooling": "mean"},
    {"pooling": "max"},
    {"pooling": "meanmax"},
    {"separate_value": True},
]


UNPADDED_CASES = [
    *(("CherryPick", options) for options in NET_OPTIONS),
    ("TreasureHunt", {"relpos": RelposConfig(["x_pos", "y_pos"], extent=[2, 2])}),
]


@pytest.mark.parametrize(("name", "options"), UNPADDED_CASES)
def test_the_unpadded_model_takes_the_common_observations_and_decides_as_torch(
    name: str, options: dict
) -> None:
    """The model for the common observation (every entity visible, at least one, candidates
    for every select-entity action) takes the one-observation model's inputs but ``visible``,
    in standard ONNX, and decides the observations it takes as torch does: each network
    option, on an environment's observations (which it takes all)."""
    env = make(name)
    agent = untrained_agent(env.obs_space(), env.action_space(), **options)
    encoded = export_bytes(agent)
    model = onnx.load_from_string(encoded)
    props = {p.key: p.value for p in model.metadata_props}
    unpadded = onnx.load_from_string(base64.b64decode(props[signature.UNPADDED_KEY]))
    inputs = [i.name for i in model.graph.input if i.name != signature.VISIBLE]
    assert [i.name for i in unpadded.graph.input] == inputs
    assert {opset.domain for opset in unpadded.opset_import} <= {"", "ai.onnx"}
    policy = OnnxPolicy(encoded)
    assert policy.single is not None
    found = []
    for seed in range(3):
        env.seed(seed)
        obs = env.reset()
        assert not policy.single.prepare(obs).padded
        found.append(obs)
    assert_same_decisions(agent, policy, found)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spaces(), st.sampled_from(NET_OPTIONS), st.data())
def test_random_spaces_and_network_options_decide_as_torch(space, options, data) -> None:
    agent = untrained_agent(*space, **options)
    policy = OnnxPolicy(export_bytes(agent))
    drawn = data.draw(st.lists(observations(*space), min_size=4, max_size=4))
    assert_same_decisions(agent, policy, drawn)


@pytest.mark.parametrize("rotation", [None, "angle"])
def test_translation_is_exported(rotation) -> None:
    obs_space = ObsSpace(
        {
            "Ship": Entity(["x", "y", "angle"]),
            "Rock": Entity(["x", "y", "size"]),
            "Beacon": Entity(["strength"]),
        },
        global_features=["time"],
    )
    actions = {"Steer": CategoricalActionSpace(["left", "right", "none"])}
    translation = TranslationConfig("Ship", ["x", "y"], rotation)
    agent = untrained_agent(obs_space, actions, translation=translation)
    policy = OnnxPolicy(export_bytes(agent))
    check = settings(max_examples=12, deadline=None)(
        given(st.lists(observations(obs_space, actions), min_size=2, max_size=3))(
            lambda drawn: assert_same_decisions(agent, policy, drawn)
        )
    )
    check()


CONTINUOUS_SPACE = (
    ObsSpace({"Ship": Entity(["x", "y"]), "Rock": Entity(["x", "y", "size"])}, ["time"]),
    {
        "thrust": ContinuousActionSpace(["dx", "dy"], low=[-0.5, -2.0], high=[1.5, 2.0]),
        "throttle": GlobalContinuousActionSpace(["power"], low=0.0, high=10.0),
        "target": SelectEntityActionSpace(),
    },
)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from([{}, {"pooling": "mean"}, {"memory": True}, {"separate_value": True}]),
    st.lists(any_observations(*CONTINUOUS_SPACE), min_size=3, max_size=3),
)
def test_continuous_actions_export_their_gaussian(options, drawn) -> None:
    """Each actor's mean and the standard deviation equal torch's, per action and global,
    with bounds of several widths and log standard deviations of several sizes."""
    policy, agent = continuous_model(tuple(sorted(options.items())))
    assert_same_decisions(agent, policy, drawn)


@functools.cache
def continuous_model(options: tuple[tuple[str, object], ...]) -> tuple[OnnxPolicy, Agent]:
    agent = untrained_agent(*CONTINUOUS_SPACE, **dict(options))
    with torch.no_grad():  # the standard deviations unlike each other, one beyond the clamp
        agent.net.heads["thrust"].log_std.copy_(torch.tensor([-1.5, 0.7]))
        agent.net.heads["throttle"].log_std.copy_(torch.tensor([-9.0]))
    return OnnxPolicy(export_bytes(agent)), agent


RELPOS_SPACE = (
    ObsSpace(
        {"Unit": Entity(["x", "y", "hp"]), "Wall": Entity(["x", "y"]), "Flag": Entity([])},
        global_features=["time"],
    ),
    {
        "move": CategoricalActionSpace(["left", "right", "up", "down"]),
        "target": SelectEntityActionSpace(),
        "mode": GlobalCategoricalActionSpace(["calm", "bold"]),
    },
)


@pytest.mark.parametrize("per_entity_values", [False, True])
@pytest.mark.parametrize("scale", [1.0, 0.5])
def test_relative_positions_are_exported(per_entity_values: bool, scale: float) -> None:
    relpos = RelposConfig(["x", "y"], [2, 1], scale, per_entity_values)
    agent = untrained_agent(*RELPOS_SPACE, relpos=relpos, n_head=4)
    policy = OnnxPolicy(export_bytes(agent))
    check = settings(max_examples=15, deadline=None)(
        given(st.lists(observations(*RELPOS_SPACE), min_size=2, max_size=3))(
            lambda drawn: assert_same_decisions(agent, policy, drawn)
        )
    )
    check()


@pytest.mark.parametrize(
    "config_file",
    sorted(CONFIG_DIR.glob("*.yaml")),
    ids=lambda p: p.stem,
)
def test_every_shipped_config_exports_and_decides_as_torch(config_file: Path) -> None:
    """The networks the shipped configs train (relative positions, translation, widths)."""
    try:
        config = load_config(config_file)
        vec = make_vec(config.env.id, 1, seed=0, **config.env.kwargs)
    except (ConfigError, ImportError, KeyError) as err:  # an adapter's library is not installed
        pytest.skip(f"{config_file.name}: {err}")
    agent = untrained_agent(vec.obs_space, vec.action_space, config.env.id, config=config.net)
    vec.close()
    policy = OnnxPolicy(export_bytes(agent))
    found = []
    cls = REGISTRY.get(config.env.id)
    if cls is not None and issubclass(cls, Environment):
        env = make(config.env.id, **config.env.kwargs)
        for seed in range(3):
            env.seed(seed)
            found.append(env.reset())
    drawn = settings(max_examples=4, deadline=None)(
        given(
            st.lists(any_observations(agent.obs_space, agent.action_space), min_size=2, max_size=3)
        )(lambda obs: assert_same_decisions(agent, policy, obs))
    )
    drawn()
    assert_same_decisions(agent, policy, found)
