"""The batched model: several observations in one call decide as the torch policy decides each
(ragged rows, rows without entities, every action kind, memory), and act_batch acts as the
torch agent's batched call. test_onnx_parity.py checks the batched call on every drawn list
of observations as well; these are the cases a draw may miss."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest
from torch_reference import assert_same_decision, sharpened, torch_decision, untrained_agent

from entityrl.env import (
    Batcher,
    CategoricalActionMask,
    CategoricalActionSpace,
    ContinuousActionMask,
    ContinuousActionSpace,
    Entity,
    GlobalCategoricalActionMask,
    GlobalCategoricalActionSpace,
    GlobalContinuousActionMask,
    GlobalContinuousActionSpace,
    Observation,
    ObsSpace,
    SelectEntityActionMask,
    SelectEntityActionSpace,
)
from entityrl.export import export_bytes
from entityrl.inference import OnnxPolicy, PolicyFileError
from entityrl.inference.runtime import batched_inputs
from entityrl.nn.embedding import TranslationConfig
from entityrl.nn.relpos import RelposConfig
from entityrl.training.agent import Agent

pytest.importorskip("onnxruntime", reason="exporting needs the 'export' extra")

TOLERANCE = 1e-5

SPACE = (
    ObsSpace(
        {"Unit": Entity(["x", "y", "hp"]), "Wall": Entity(["x", "y"]), "Flag": Entity([])},
        global_features=["time"],
    ),
    {
        "move": CategoricalActionSpace(["left", "right", "up", "down"]),
        "target": SelectEntityActionSpace(),
        "mode": GlobalCategoricalActionSpace(["calm", "bold"]),
        "thrust": ContinuousActionSpace(["dx", "dy"], low=[-1.0, 0.0], high=[1.0, 3.0]),
        "power": GlobalContinuousActionSpace(["level"], low=0.0, high=5.0),
    },
)


def observation(units: int, walls: int, flags: int, seed: int, offered: bool = True) -> Observation:
    """Units and walls at random places, units acting in every action (walls and flags are
    the candidates, some illegal; no selection without any), the global actions ``offered``
    or not."""
    rng = np.random.default_rng(seed)
    legal_moves = rng.random((units, 4)) < 0.7
    legal_targets = rng.random((units, walls + flags)) < 0.8
    legal_moves[:, 0] = legal_targets[:, :1] = True  # every actor has a choice
    actions: dict[str, object] = {
        "move": CategoricalActionMask(actor_types=["Unit"], mask=legal_moves),
        "thrust": ContinuousActionMask(actor_types=["Unit"]),
    }
    if walls + flags or not units:  # (actors need something to select)
        actions["target"] = SelectEntityActionMask(
            actor_types=["Unit"], actee_types=["Wall", "Flag"], mask=legal_targets
        )
    if offered:
        actions["mode"] = GlobalCategoricalActionMask(mask=np.array([True, seed % 2 == 0]))
        actions["power"] = GlobalContinuousActionMask()
    return Observation(
        features={
            "Unit": rng.uniform(-3, 3, (units, 3)).astype(np.float32),
            "Wall": rng.uniform(-3, 3, (walls, 2)).astype(np.float32),
            "Flag": np.zeros((flags, 0), np.float32),
        },
        ids={
            "Unit": [f"u{i}" for i in range(units)],
            "Wall": list(range(walls)),
            "Flag": [f"f{i}" for i in range(flags)],
        },
        global_features=[float(seed)],
        actions=actions,  # type: ignore[arg-type]
    )


RAGGED = [
    observation(0, 0, 0, seed=1),  # no entity at all
    observation(3, 4, 1, seed=2),
    observation(1, 0, 0, seed=3, offered=False),  # nothing to select
    observation(0, 2, 2, seed=4),  # candidates without actors
    observation(5, 1, 0, seed=5),
    observation(0, 0, 0, seed=6, offered=False),
]

OPTIONS = {
    "attention": {"n_head": 4},
    "relative positions": {"relpos": RelposConfig(["x", "y"], [2, 1], 1.0, True)},
    "translation": {"translation": TranslationConfig("Unit", ["x", "y"], None)},
    "pooling": {"pooling": "meanmax"},
    "memory": {"memory": True},
    "separate value": {"separate_value": True},
}


@functools.cache
def policy_of(option: str) -> tuple[Agent, OnnxPolicy]:
    agent = sharpened(untrained_agent(*SPACE, **OPTIONS[option]))
    return agent, OnnxPolicy(export_bytes(agent), deterministic=True)


@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_ragged_rows_decide_as_torch_in_one_call(option: str) -> None:
    agent, policy = policy_of(option)
    for row, got in enumerate(policy.decide_batch(RAGGED, new_episode=True)):
        assert_same_decision(got, torch_decision(agent, RAGGED[row])[0], TOLERANCE)


@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_act_batch_acts_as_the_agents_batched_call(option: str) -> None:
    """Deterministic actions of one act_batch call equal those of one batched call of the torch
    agent, row by row (entity ids, candidates and continuous values)."""
    agent, policy = policy_of(option)
    batcher = Batcher(*SPACE)
    agent.deterministic = True
    want = batcher.unbatch(agent.act(batcher.batch(RAGGED)), RAGGED)
    got = policy.act_batch(RAGGED, new_episode=True)
    for mine, theirs in zip(got, want, strict=True):
        assert mine.keys() == theirs.keys()
        for name, action in mine.items():
            expected = dataclasses.asdict(theirs[name])
            for key, value in dataclasses.asdict(action).items():
                if np.asarray(value).dtype.kind == "f":  # continuous values
                    np.testing.assert_allclose(value, expected[key], atol=TOLERANCE)
                else:  # entity ids, choices
                    assert np.asarray(value).tolist() == np.asarray(expected[key]).tolist()


def test_a_call_without_observations_runs_nothing() -> None:
    _, policy = policy_of("memory")
    policy.act_batch(RAGGED[:2], new_episode=True)
    state = policy.state
    assert policy.act_batch([]) == [] and policy.decide_batch([]) == []
    assert policy.state is state  # no step of any episode


def test_the_batched_inputs_place_each_row_in_its_grid() -> None:
    """Entity j of row r at grid position r * (width + 2) + j, candidates per actor padded,
    padding slots holding the entity count."""
    rows = [
        observation(2, 1, 0, 0),
        observation(0, 0, 0, 1, offered=False),
        observation(1, 2, 1, 2),
    ]
    feeds = batched_inputs(Batcher(*SPACE).batch(rows), SPACE[1])
    # Table numbers: Units 0-2 (rows 0, 0, 2), Walls 3-5 (rows 0, 2, 2), the Flag 6 (row 2).
    np.testing.assert_array_equal(feeds["slots"], [[0, 1, 3, 7], [7, 7, 7, 7], [2, 4, 5, 6]])
    np.testing.assert_array_equal(feeds["entity_rows"], [0, 0, 2, 0, 2, 2, 2])
    np.testing.assert_array_equal(feeds["actors/move"], [0, 1, 12])  # width 4: rows of 6
    # Row 0's units choose among its wall (position 2), row 2's unit among positions 13-15.
    np.testing.assert_array_equal(feeds["actees/target"], [[2, 0, 0], [2, 0, 0], [13, 14, 15]])
    assert not feeds["mask/target"][:2, 1:].any()
    assert feeds["mask/mode"].shape == (3, 2) and feeds["mask/mode"][1].all()


def test_a_model_without_a_batched_graph_is_asked_to_be_exported_again() -> None:
    """Models exported before batched calls still decide one observation at a time; several
    at once name the missing metadata and the command that helps."""
    import onnx

    agent, policy = policy_of("attention")
    model = onnx.load_from_string(export_bytes(agent))
    kept = [p for p in model.metadata_props if p.key != "entityrl.batched"]
    del model.metadata_props[:]
    model.metadata_props.extend(kept)
    old = OnnxPolicy(model.SerializeToString(), deterministic=True)
    assert old.decide(RAGGED[1]).value == pytest.approx(policy.decide(RAGGED[1]).value)
    with pytest.raises(PolicyFileError, match=r"no batched model .*entityrl\.batched.*export"):
        old.act_batch(RAGGED[:2])
