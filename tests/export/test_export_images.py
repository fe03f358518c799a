"""Policies whose observations carry images export: one ``image/<name>`` input per image, of the
space's dtype, converted in the graph as the network converts it; the exported models decide as
the torch policy does, one observation at a time and in one batched call, with both image
encoders and with the options that place the image tokens among the entities."""

from __future__ import annotations

import base64

import numpy as np
import onnx
import pytest
from env.strategies import observations
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nn.image_envs import ACTIONS, SPACE, LitLamp, with_images
from test_onnx_parity import TOLERANCE, assert_same_decisions
from torch_reference import IMAGE_TOLERANCE, sharpened, untrained_agent

from entityrl.export import export_bytes
from entityrl.inference import OnnxPolicy, signature
from entityrl.nn.relpos import RelposConfig

pytest.importorskip("onnxruntime", reason="exporting needs the 'export' extra")


def test_images_are_inputs_of_the_space_dtype_and_shape() -> None:
    model = onnx.load_from_string(export_bytes(untrained_agent(SPACE, ACTIONS)))
    metadata = {p.key: p.value for p in model.metadata_props}
    batched = onnx.load_from_string(base64.b64decode(metadata[signature.BATCHED_KEY]))
    for graph, rows in ((model.graph, [1]), (batched.graph, ["rows"])):
        inputs = {i.name: i.type.tensor_type for i in graph.input}
        for name, dtype, shape in (
            ("camera", onnx.TensorProto.UINT8, [12, 9, 3]),
            ("heat", onnx.TensorProto.FLOAT, [5, 6, 2]),
        ):
            tensor = inputs[signature.image_input(name)]
            assert tensor.elem_type == dtype
            dims = [d.dim_value or d.dim_param for d in tensor.shape.dim]
            assert dims == rows + shape
    domains = {opset.domain for opset in model.opset_import}
    assert domains <= {"", "ai.onnx"} and model.opset_import[0].version == 18


OPTIONS = [
    {"image_encoder": "small"},
    {"image_encoder": "impala"},
    {"image_encoder": "small", "memory": True},
    {"image_encoder": "impala", "separate_value": True},
    {"image_encoder": "small", "pooling": "meanmax"},
    {"image_encoder": "small", "relpos": RelposConfig(["x", "y"], extent=[2, 2])},
]


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: "-".join(map(str, o.values())))
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_image_policies_decide_as_torch(options: dict, data) -> None:
    agent = sharpened(untrained_agent(SPACE, ACTIONS, **options))
    policy = OnnxPolicy(export_bytes(agent))
    drawn = data.draw(st.lists(observations(SPACE, ACTIONS), min_size=3, max_size=3))
    for seed, obs in enumerate(drawn):
        with_images(obs, SPACE, seed)
        obs.done = False  # every observation the policy decides carries its images
    assert_same_decisions(agent, policy, drawn, IMAGE_TOLERANCE)


@pytest.mark.parametrize("encoder", ["small", "impala"])
def test_lit_lamp_observations_decide_as_torch(encoder: str) -> None:
    env = LitLamp()
    agent = sharpened(untrained_agent(env.obs_space(), env.action_space(), image_encoder=encoder))
    policy = OnnxPolicy(export_bytes(agent))
    found = []
    for seed in range(4):
        env.seed(seed)
        found.append(env.reset())
    assert_same_decisions(agent, policy, found, IMAGE_TOLERANCE)
    # The image is read: the same lamps under the other half lit are worth another value.
    left, right = env.observe(0, np.arange(2)), env.observe(1, np.arange(2))
    assert abs(policy.decide(left).value - policy.decide(right).value) > 100 * TOLERANCE
