"""Data-parallel scaling on this machine: one environment's shipped config trained by 1 and by
2 processes (``world_size``), samples/s and time to the config's target return; and what a
multi-machine run sends per iteration.

Each run is ``python -m entityrl train ENV world_size=W seed=S`` in a subprocess (default
torch threads: the cores shared by the processes). Samples/s: the median of the iterations'
``perf/sps`` after the first (which pays the start-up); time to target: seconds from the
process's start to the first iteration whose mean episode return reaches ``target_return``
(start-up included, as a user waits for it). Communication: the bytes one process sends per
iteration (a float32 all-reduce of the flat gradient per minibatch, plus a few float64
statistics), and a ring all-reduce estimate of the update's communication time at 8 and 64
processes for a network of a given bandwidth and latency.
Writes the section "Data-parallel scaling" of RESULTS.md.

usage: python benchmarks/scaling.py [--env CherryPick] [--world-sizes 1 2] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _peer import machine
from results import replace_section

from entityrl.training.config import load_config
from entityrl.training.runner import make_env

# A network between machines: 10 Gb/s Ethernet, 50 us per message.
BANDWIDTH = 10e9 / 8
LATENCY = 50e-6


def run(env: str, world_size: int, seed: int, target: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "-m", "entityrl", "train", env, f"world_size={world_size}",
                   f"seed={seed}", "log.progress=false", "log.tensorboard=false",
                   f"log.run_dir={tmp}/run"]  # fmt: skip
        started = time.time()
        subprocess.run(command, check=True, capture_output=True, env=dict(os.environ))
        finished = time.time()
        rows = [json.loads(line) for line in Path(tmp, "run/metrics.jsonl").read_text().split("\n")
                if line.strip()]  # fmt: skip
    reached = [r["time"] for r in rows if r.get("episode/episode_return", -1e9) >= target]
    return {
        "sps": statistics.median(r["perf/sps"] for r in rows[1:]),
        "to_target": (reached[0] - started) if reached else float("nan"),
        "seconds": finished - started,
    }


def communication(env: str) -> dict[str, float]:
    """Parameters, minibatches per iteration and bytes one process sends per iteration."""
    from entityrl.nn.rogue_net import RogueNet

    config = load_config(env)
    with make_env(config, None, num_envs=1) as vec:
        net = RogueNet(vec.obs_space, vec.action_space, config.net, device="cpu")
    params = sum(p.numel() for p in net.parameters())
    minibatches = config.ppo.update_epochs * (config.batch_size // config.optim.bs)
    gradient_bytes = 4 * params
    return {"params": params, "minibatches": minibatches,
            "bytes": minibatches * (gradient_bytes + 8 * 8)}  # fmt: skip


def _time_to_target(answers: list[dict[str, float]]) -> str:
    """Median over the seeds that reached the target, and how many did."""
    reached = [a["to_target"] for a in answers if not math.isnan(a["to_target"])]
    shown = f"{statistics.median(reached):.1f}" if reached else "-"
    return f"{shown} ({len(reached)} of {len(answers)} seeds)"


def ring_seconds(nbytes: float, ranks: int, messages: int) -> float:
    """A ring all-reduce of ``nbytes`` over ``ranks``: 2(N-1)/N of the data each way, 2(N-1)
    steps of latency; ``messages`` all-reduces per iteration."""
    steps = 2 * (ranks - 1)
    return steps / ranks * nbytes / BANDWIDTH + messages * steps * LATENCY


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="CherryPick")
    parser.add_argument("--world-sizes", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    config = load_config(args.env)
    target = config.target_return
    if target is None:
        raise SystemExit(f"{args.env}'s shipped config states no target_return")
    load_before = os.getloadavg()
    results: dict[int, list[dict[str, float]]] = {w: [] for w in args.world_sizes}
    for seed in range(1, args.runs + 1):
        for world_size in args.world_sizes:
            answer = run(args.env, world_size, seed, target)
            results[world_size].append(answer)
            print(f"seed {seed} world_size {world_size}: {answer}", flush=True)
    comm = communication(args.env)
    lines = [
        f"Command: `python benchmarks/scaling.py --env {args.env} --world-sizes "
        f"{' '.join(map(str, args.world_sizes))} --runs {args.runs}`",
        f"Machine: {machine()}; load average {load_before[0]:.1f} before the run (1-minute).",
        "",
        f"{args.env}'s shipped config ({config.total_timesteps:,} steps, "
        f"{config.rollout.num_envs} environments, target return {target}), default torch "
        f"threads (the cores split between the processes); medians of {args.runs} seeds.",
        "",
        "| processes | samples/s | speed-up | time to target (s) | whole run (s) |",
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    base = statistics.median(a["sps"] for a in results[args.world_sizes[0]])
    for world_size, answers in results.items():
        sps = statistics.median(a["sps"] for a in answers)
        lines.append(
            f"| {world_size} | {sps:,.0f} | {sps / base:.2f}x "
            f"| {_time_to_target(answers)} "
            f"| {statistics.median(a['seconds'] for a in answers):.1f} |"
        )
    # Computation per iteration of one process: the single-process run's samples/s.
    per_iteration = config.batch_size / base
    comm8, comm64 = (ring_seconds(comm["bytes"], n, comm["minibatches"]) for n in (8, 64))
    lines += [
        "",
        f"Per iteration each process sends one float32 all-reduce of the flat gradient per "
        f"minibatch ({comm['params']:,} parameters, {comm['minibatches']} minibatches) plus a "
        f"few float64 statistics: {comm['bytes'] / 2**20:.2f} MiB. A ring all-reduce over "
        f"10 Gb/s Ethernet with 50 us per message would take {comm8 * 1e3:.1f} ms per "
        f"iteration at 8 processes and {comm64 * 1e3:.1f} ms at 64, against about "
        f"{per_iteration * 1e3:.0f} ms of computation per iteration of one process here "
        f"(each process keeps its share of environments, so its computation stays the same): "
        f"an expected efficiency of {per_iteration / (per_iteration + comm8):.0%} at 8 and "
        f"{per_iteration / (per_iteration + comm64):.0%} at 64 processes. Bandwidth is not the "
        "limit for networks this small; the per-minibatch latency is (it grows with the "
        "number of processes), so fewer, larger minibatches (`optim.bs`) scale better.",
    ]
    replace_section("Data-parallel scaling", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
