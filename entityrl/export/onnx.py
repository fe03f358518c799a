"""Write a trained agent's policy as one ONNX model (see :mod:`entityrl.inference.signature`).

Needs the ``export`` extra (``pip install 'entityrl[export]'``: onnx and onnxruntime).
"""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import warnings
from pathlib import Path

import torch

import entityrl
from entityrl.env.space_data import spaces_to_data
from entityrl.export.batched import BatchedPolicy
from entityrl.export.one_observation import ExportError, OneObservationPolicy
from entityrl.inference import signature
from entityrl.nn.kernels.build import torch_path
from entityrl.nn.rogue_net import RogueNet
from entityrl.training.agent import Agent
from entityrl.training.checkpoint import atomic_write

OPSET = 18
"""The ONNX opset written: onnxruntime-web and every onnxruntime since 1.14 run it."""


def rebuilt_net(agent: Agent) -> RogueNet:
    """The agent's network rebuilt in float32 on the CPU with the plain torch path (built
    inside :func:`torch_path`, so no C++ kernel is traced)."""
    with torch_path(), torch.random.fork_rng(devices=()):
        config = dataclasses.replace(agent.net.config, precision="float32")
        net = RogueNet(agent.obs_space, agent.action_space, config)
    net.load_state_dict({k: v.cpu() for k, v in agent.net.state_dict().items()})
    return net


def one_observation_policy(agent: Agent) -> OneObservationPolicy:
    """The agent's policy for one observation at a time (see :func:`rebuilt_net`)."""
    return OneObservationPolicy(rebuilt_net(agent))


def example_inputs(policy: OneObservationPolicy) -> tuple[torch.Tensor, ...]:
    """Inputs of the right kinds for tracing (those ``policy`` takes): two entities per type,
    every entity acting on every other. Sizes differ between axes so that none is mistaken for
    another."""
    net = policy.net
    counts = {name: 2 for name in net.entity_names}
    total = sum(counts.values())
    tensors = []
    for spec in signature.input_specs(net.obs_space, net.action_space, policy.state_size):
        if spec.name not in policy.input_names:
            continue
        kind, _, name = spec.name.partition("/")
        if kind == "features":
            tensors.append(torch.rand(counts[name], int(spec.shape[1])))
        elif kind == "image":
            tensors.append(example_image(spec, 1))
        elif spec.name in (signature.GLOBAL_FEATURES, signature.STATE):
            tensors.append(torch.rand(int(spec.shape[0])))
        elif spec.name == signature.VISIBLE:
            tensors.append(torch.ones(total, dtype=torch.bool))
        elif kind == "actors":
            tensors.append(torch.arange(total - 1))
        elif kind == "actees":
            tensors.append(torch.arange(total))
        else:  # mask: (actors or 1, choices or actees)
            rows = 1 if spec.shape[0] == 1 else total - 1
            cols = spec.shape[1] if isinstance(spec.shape[1], int) else total
            tensors.append(torch.ones(rows, cols, dtype=torch.bool))
    return tuple(tensors)


def example_image(spec: signature.TensorSpec, rows: int) -> torch.Tensor:
    """Random images of ``spec`` (an ``image/<name>`` input), ``rows`` of them, in its dtype."""
    shape = (rows, *(int(n) for n in spec.shape[1:]))
    if spec.dtype == "uint8":
        return torch.randint(0, 256, shape, dtype=torch.uint8)
    return torch.rand(shape)


def batched_example_inputs(policy: BatchedPolicy) -> tuple[torch.Tensor, ...]:
    """Inputs of the right kinds for tracing the batched model: two observations, of two and
    one entities per type; every entity but the last acts, on every entity of its
    observation (three candidates per actor, the second observation's padded). Sizes differ
    between axes so that none is mistaken for another."""
    net = policy.net
    types = len(net.entity_names)
    per_row = [2, 1]
    width = max(per_row[0] * types, 1)  # a column at least, as the runtime feeds
    total = sum(per_row) * types
    # Per observation, its entities' numbers in the table (type after type) and grid positions.
    numbers = [
        [t * sum(per_row) + sum(per_row[:r]) + k for t in range(types) for k in range(n)]
        for r, n in enumerate(per_row)
    ]
    slots = torch.tensor([row + [total] * (width - len(row)) for row in numbers], dtype=torch.int64)
    positions = [[r * (width + 2) + j for j in range(len(row))] for r, row in enumerate(numbers)]
    actors = [p for row in positions for p in row][:-1]
    candidates = [(row * width)[:width] for row in positions for _ in row][:-1]
    entity_rows = [r for _ in range(types) for r, n in enumerate(per_row) for _ in range(n)]
    rows = len(per_row)
    tensors = []
    for spec in signature.batched_input_specs(net.obs_space, net.action_space, policy.state_size):
        kind = spec.name.partition("/")[0]
        if kind == "features":
            tensors.append(torch.rand(sum(per_row), int(spec.shape[1])))
        elif kind == "image":
            tensors.append(example_image(spec, rows))
        elif spec.name in (signature.GLOBAL_FEATURES, signature.STATE):
            tensors.append(torch.rand(rows, int(spec.shape[1])))
        elif spec.name == signature.VISIBLE:
            tensors.append(torch.ones(total, dtype=torch.bool))
        elif spec.name == signature.SLOTS:
            tensors.append(slots)
        elif spec.name == signature.ENTITY_ROWS:
            tensors.append(torch.tensor(entity_rows, dtype=torch.int64))
        elif kind == "actors":
            tensors.append(torch.tensor(actors, dtype=torch.int64))
        elif kind == "actees":
            tensors.append(torch.tensor(candidates, dtype=torch.int64))
        else:  # mask: (actors or rows, choices or candidates)
            height = rows if spec.shape[0] == "rows" else len(actors)
            cols = spec.shape[1] if isinstance(spec.shape[1], int) else width
            tensors.append(torch.ones(height, cols, dtype=torch.bool))
    return tuple(tensors)


def export_onnx(agent: Agent, path: str | Path) -> Path:
    """Write ``agent``'s policy to ``path`` (through a temporary file, renamed when complete)
    and return the path. Raises :class:`ExportError` for networks that cannot be exported."""
    model = export_bytes(agent)
    target = Path(path)
    atomic_write(target, lambda f: f.write(model))
    return target


def export_bytes(agent: Agent) -> bytes:
    """``agent``'s policy as a serialized ONNX model, metadata included: the graph for one
    observation, and in its metadata the batched one (:data:`signature.BATCHED_KEY`) and the
    one for the common observation (:data:`signature.UNPADDED_KEY`)."""
    import onnx

    net = rebuilt_net(agent)
    single = OneObservationPolicy(net)
    unpadded = OneObservationPolicy(net, padded=False)
    batched = BatchedPolicy(net)
    state = single.state_size
    outputs = signature.output_specs(agent.action_space, state)
    model = onnx.load_from_string(
        _traced(
            single,
            example_inputs(single),
            signature.input_specs(agent.obs_space, agent.action_space, state),
            outputs,
        )
    )
    unpadded_model = _traced(
        unpadded,
        example_inputs(unpadded),
        signature.unpadded_input_specs(agent.obs_space, agent.action_space, state),
        outputs,
    )
    batched_model = _traced(
        batched,
        batched_example_inputs(batched),
        signature.batched_input_specs(agent.obs_space, agent.action_space, state),
        signature.batched_output_specs(agent.action_space, state),
    )
    metadata = {
        signature.FORMAT_KEY: signature.FORMAT,
        signature.SPACES_KEY: json.dumps(spaces_to_data(agent.obs_space, agent.action_space)),
        signature.VERSION_KEY: entityrl.__version__,
        signature.ENV_KEY: json.dumps(
            {"id": agent.config.env.id, "kwargs": dict(agent.config.env.kwargs)}
        ),
        signature.BATCHED_KEY: base64.b64encode(batched_model).decode("ascii"),
        signature.UNPADDED_KEY: base64.b64encode(unpadded_model).decode("ascii"),
    }
    if state is not None:
        metadata[signature.STATE_KEY] = signature.state_metadata(state)
    if agent.config.env.stack > 1:
        metadata[signature.STACK_KEY] = signature.stack_metadata(agent.config.env.stack)
    onnx.helper.set_model_props(model, metadata)
    model.doc_string = f"entityrl policy for {agent.config.env.id}, trained {agent.step:,} steps"
    return model.SerializeToString()


def _traced(
    policy: torch.nn.Module,
    example: tuple[torch.Tensor, ...],
    inputs: list[signature.TensorSpec],
    outputs: list[signature.TensorSpec],
) -> bytes:
    """``policy`` traced on ``example`` as a serialized ONNX model with these inputs and
    outputs (their string dimensions dynamic)."""
    dynamic = {
        spec.name: {axis: dim for axis, dim in enumerate(spec.shape) if isinstance(dim, str)}
        for spec in [*inputs, *outputs]
    }
    buffer = io.BytesIO()
    with torch_path(), torch.inference_mode(), warnings.catch_warnings():
        # The tracer's notes on shape arithmetic (which the parity tests cover) and the
        # TorchScript exporter's deprecation notice say nothing the user can act on. This
        # exporter (dynamo=False) is the one the parity tests cover; the torch.export-based
        # one has not been tried on these modules.
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(
            policy,
            example,
            buffer,
            input_names=[spec.name for spec in inputs],
            output_names=[spec.name for spec in outputs],
            dynamic_axes={name: axes for name, axes in dynamic.items() if axes},
            opset_version=OPSET,
            dynamo=False,
        )
    return buffer.getvalue()


__all__ = ["ExportError", "export_bytes", "export_onnx", "one_observation_policy", "rebuilt_net"]
