"""Goal-conditioned networks (net.conditioning) export and decide as torch does, for one
observation and for a batch."""

from __future__ import annotations

import pytest
from env.strategies import observations
from hypothesis import given, settings
from hypothesis import strategies as st
from test_onnx_parity import assert_same_decisions
from torch_reference import untrained_agent

from entityrl.env import CategoricalActionSpace, Entity, GlobalCategoricalActionSpace, ObsSpace
from entityrl.export import export_bytes
from entityrl.inference import OnnxPolicy

pytest.importorskip("onnxruntime", reason="exporting needs the 'export' extra")

# The goal columns out of order and between plain global features: the export must pick the
# same columns the network does.
GOAL_SPACE = (
    ObsSpace(
        {"Unit": Entity(["x", "y"]), "Flag": Entity(["kind"])},
        global_features=["time", "goal_b", "energy", "goal_a"],
        goal_features=["goal_a", "goal_b"],
    ),
    {
        "move": CategoricalActionSpace(["left", "right", "stay"]),
        "mode": GlobalCategoricalActionSpace(["calm", "bold"]),
    },
)


# Every global feature a goal: the global token then has no features of its own.
GOAL_ONLY_SPACE = (
    ObsSpace(
        {"Unit": Entity(["x", "y"])},
        global_features=["goal_a", "goal_b"],
        goal_features=["goal_a", "goal_b"],
    ),
    GOAL_SPACE[1],
)


@pytest.mark.parametrize(
    ("space", "conditioning", "n_layer"),
    [
        (GOAL_SPACE, "hyper", 0),
        (GOAL_SPACE, "hyper", 2),
        (GOAL_SPACE, "film", 0),
        (GOAL_SPACE, "film", 2),
        (GOAL_ONLY_SPACE, "hyper", 1),
    ],
)
def test_goal_conditioned_networks_export(space: tuple, conditioning: str, n_layer: int) -> None:
    agent = untrained_agent(*space, conditioning=conditioning, n_layer=n_layer)
    assert agent.net.encoder.conditioning is not None
    policy = OnnxPolicy(export_bytes(agent))
    check = settings(max_examples=8, deadline=None)(
        given(st.lists(observations(*space), min_size=2, max_size=3))(
            lambda drawn: assert_same_decisions(agent, policy, drawn)
        )
    )
    check()
