"""The scaling model on paper (``benchmarks/scaling.py --model``, issue #31): its arithmetic,
on fixed costs (the measuring half runs training and is the benchmark's)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "scaling.py"
if not _PATH.exists():
    pytest.skip("benchmarks/ is not in this checkout", allow_module_level=True)
_spec = importlib.util.spec_from_file_location("_scaling_benchmark", _PATH)
assert _spec is not None and _spec.loader is not None
scaling = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(scaling)

# Costs of the order measured on CherryPick (benchmarks/RESULTS.md, "Scaling model").
COSTS = {
    "batch": 2048,
    "act": 130e-6,
    "rollout_bytes": 480.0,
    "param_bytes": 110e3,
    "update": 180e-6,
    "correct": 22e-6,
    "iteration": 0.46,
    "allreduce_bytes": 0.61 * 2**20,
    "minibatches": 6,
}


def test_one_learner_is_bound_by_the_samplers_then_by_the_learner() -> None:
    slow = [scaling.one_learner(COSTS, n, 2, sim_ms=10.0) for n in (8, 16, 32, 64)]
    # 8 machines of 2 cores at ~10.13 ms of CPU per sample: ~1,580 samples/s, all used.
    assert slow[0]["limit"] == "samplers"
    assert slow[0]["rate"] == pytest.approx(16 / 10.13e-3, rel=1e-3)
    # The learner takes ~4,900 samples/s at most: from ~25 machines on, more add nothing.
    assert slow[-1]["limit"] == "learner"
    assert slow[-1]["rate"] < 1 / (COSTS["update"] + COSTS["correct"])
    assert 20 < slow[0]["stops"] < 30
    assert slow[2]["rate"] >= slow[3]["rate"]  # past saturation only the link grows
    # CPU-bound environments: one sampler machine already outruns the learner.
    assert scaling.one_learner(COSTS, 8, 2, sim_ms=0.0)["stops"] < 1


def test_data_parallel_stops_where_communication_passes_computation() -> None:
    fixed = [scaling.data_parallel(COSTS, n, grow=False) for n in (8, 16, 32, 64)]
    grown = [scaling.data_parallel(COSTS, n, grow=True) for n in (8, 16, 32, 64)]
    # The config's batch split 64 ways: 7 ms of computation against ~39 ms of all-reduce.
    assert fixed[-1]["comm"] == pytest.approx(scaling.ring_seconds(COSTS["allreduce_bytes"], 64, 6))
    assert fixed[-1]["efficiency"] < 0.2
    assert fixed[-1]["rate"] < fixed[2]["rate"]  # slower at 64 than at 32 machines
    # Each rank keeping a whole batch: the all-reduce stays small against 0.46 s.
    assert all(g["efficiency"] > 0.9 for g in grown)
    assert grown[-1]["rate"] == pytest.approx(64 * 2048 / (0.46 + fixed[-1]["comm"]), rel=1e-9)
