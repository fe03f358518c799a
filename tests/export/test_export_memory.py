"""Policies with memory (``net.memory``) export with their state as an input and the next state
as an output: fed observation by observation, each side carrying its own state and starting
every episode from zeros, the model decides as the torch policy does."""

from __future__ import annotations

import functools
import json

import numpy as np
import onnx
import pytest
import torch
from env.strategies import observations
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch_reference import recall_episodes, sharpened, torch_decision, untrained_agent

from entityrl.env import (
    Batcher,
    CategoricalActionSpace,
    Entity,
    GlobalCategoricalActionSpace,
    Observation,
    ObsSpace,
    SelectEntityActionSpace,
)
from entityrl.envs import Recall
from entityrl.export import export_bytes
from entityrl.inference import signature
from entityrl.inference.runtime import model_inputs
from entityrl.training.agent import Agent

ort = pytest.importorskip("onnxruntime", reason="exporting needs the 'export' extra")

TOLERANCE = 1e-5


def assert_decides_as_torch_step_by_step(
    agent: Agent, session: ort.InferenceSession, episodes: list[list[Observation]]
) -> None:
    """Every episode's observations in turn, through ``agent`` exported to ``session`` and
    through torch, each side carrying its own state and starting each episode from zeros
    (torch: None)."""
    names = {i.name for i in session.get_inputs()}
    outputs = [o.name for o in session.get_outputs()]
    batcher = Batcher(agent.obs_space, agent.action_space)
    size = agent.net.memory.size
    for episode in episodes:
        state, torch_state = np.zeros(size, np.float32), None
        for obs in episode:
            want, torch_state = torch_decision(agent, obs, torch_state)
            feeds = model_inputs(batcher.batch([obs]), 0, agent.action_space)
            feeds[signature.STATE] = state
            got = dict(zip(outputs, session.run(None, {k: feeds[k] for k in names}), strict=True))
            assert got[signature.VALUE][0] == pytest.approx(want.value, abs=TOLERANCE)
            for name, want_probs in want.probs.items():
                np.testing.assert_allclose(
                    got[signature.probs_output(name)][: want_probs.shape[0]],
                    want_probs,
                    atol=TOLERANCE,
                )
            state = got[signature.NEXT_STATE]
            np.testing.assert_allclose(state, torch_state[0].numpy(), atol=TOLERANCE)


@pytest.mark.parametrize(
    "options",
    [{"n_layer": 2}, {"n_layer": 0}, {"pooling": "mean"}],
    ids=["attention", "no layers", "pooling"],
)
def test_recall_episodes_decide_as_torch_with_the_state_carried_and_reset(options) -> None:
    """Four Recall episodes in a row (cues of both colours): the state carried within each,
    zeros at the start of the next."""
    env = Recall()
    agent = sharpened(
        untrained_agent(env.obs_space(), env.action_space(), "Recall", memory=True, **options)
    )
    episodes = recall_episodes(range(4))
    assert {float(e[0].features["Cue"][0][1]) for e in episodes} == {0.0, 1.0}, "one colour"
    assert_decides_as_torch_step_by_step(agent, ort.InferenceSession(export_bytes(agent)), episodes)


def test_the_state_decides_the_answer() -> None:
    """The question looks the same after either cue: only the state tells them apart, so the
    comparison above would catch a state that is not carried (or not reset)."""
    env = Recall()
    agent = sharpened(untrained_agent(env.obs_space(), env.action_space(), "Recall", memory=True))
    by_cue = {}
    for episode in recall_episodes(range(4)):
        state = None
        for obs in episode:
            decision, state = torch_decision(agent, obs, state)
        by_cue[int(np.argmax(episode[0].features["Cue"][0]))] = decision.probs["answer"][0]
    assert np.abs(by_cue[0] - by_cue[1]).max() > 100 * TOLERANCE


EVERY_KIND = (
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


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(observations(*EVERY_KIND), min_size=1, max_size=4), max_size=3))
def test_random_episodes_of_every_action_kind_decide_as_torch(episodes) -> None:
    """Random observations as episodes: 0 to many entities per type, hidden entities, global
    features and the global token, every kind of action the format holds."""
    assert_decides_as_torch_step_by_step(*every_kind_model(), episodes)


@functools.cache
def every_kind_model() -> tuple[Agent, ort.InferenceSession]:
    """A memory agent of :data:`EVERY_KIND` and its exported model, for every example of the
    test above (exporting is the slow part)."""
    agent = untrained_agent(*EVERY_KIND, memory=True, n_head=4)
    return agent, ort.InferenceSession(export_bytes(agent))


def test_the_metadata_declares_the_state_and_its_initial_value() -> None:
    env = Recall()
    agent = untrained_agent(env.obs_space(), env.action_space(), "Recall", memory=True, d_model=24)
    model = onnx.load_from_string(export_bytes(agent))
    props = {p.key: p.value for p in model.metadata_props}
    assert json.loads(props[signature.STATE_KEY]) == {"size": 24, "initial": "zeros"}
    assert signature.state_size(props) == 24
    # "zeros" is what the network starts an episode from: the runtimes rely on it.
    assert torch.equal(agent.net.initial_state(1), torch.zeros(1, 24))
    inputs = {
        i.name: [d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input
    }
    outputs = {
        o.name: [d.dim_value for d in o.type.tensor_type.shape.dim] for o in model.graph.output
    }
    assert inputs[signature.STATE] == [24] and outputs[signature.NEXT_STATE] == [24]


def test_a_model_without_memory_has_no_state() -> None:
    env = Recall()
    model = onnx.load_from_string(
        export_bytes(untrained_agent(env.obs_space(), env.action_space(), "Recall"))
    )
    assert signature.STATE_KEY not in {p.key for p in model.metadata_props}
    names = {i.name for i in model.graph.input} | {o.name for o in model.graph.output}
    assert not names & {signature.STATE, signature.NEXT_STATE}


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('{"size": 0, "initial": "zeros"}', "expected a positive integer size, got 0"),
        ('{"size": 8, "initial": "learned"}', "expected initial 'zeros'.*got 'learned'"),
        ('{"size": 8}', "expected JSON with 'size' and 'initial'"),
        ("not json", "expected JSON with 'size' and 'initial', got 'not json'"),
    ],
)
def test_malformed_state_declarations_are_named(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        signature.state_size({signature.STATE_KEY: text})
