"""End-to-end training throughput with PPO's loss in numpy with hand-written gradients (the
fused loss, ``ppo.fused_loss=true``) against the same loss in plain torch, in the same run.

The decision it serves: one copy of each loss, in plain torch, unless the second copy wins
more than 10% of end-to-end samples per second. It trains entityrl exactly as
benchmarks/throughput.py does (entity-gym's five example environments through
``entityrl.compat.entity_gym``, the matched settings, the reference interpreter; see that
script's doc for the setup), once with each loss per run, the order alternating between runs,
and writes the "PPO loss: numpy with hand-written gradients against plain torch" section of
RESULTS.md (medians over runs).

usage: python benchmarks/ppo_loss.py [--timesteps 65536] [--runs 3] [--envs CherryPick ...]
                                     [--torch-threads 1]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _peer import machine, require_peer
from results import replace_section
from throughput import ENVS, entityrl_revision, median_of, peer_versions, run_ours

TITLE = "PPO loss: numpy with hand-written gradients against plain torch (benchmarks/ppo_loss.py)"
LOSSES = {"numpy": "ppo.fused_loss=true", "torch": "ppo.fused_loss=false"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timesteps", type=int, default=65_536)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--envs", nargs="+", default=list(ENVS), choices=ENVS)
    parser.add_argument("--torch-threads", type=int, default=1)
    args = parser.parse_args()
    require_peer()
    revision, load_before = entityrl_revision(), os.getloadavg()
    results: dict[str, dict[str, list[dict]]] = {}
    for run in range(args.runs):
        for name in args.envs:
            cell = results.setdefault(name, {loss: [] for loss in LOSSES})
            order = list(LOSSES) if run % 2 == 0 else list(LOSSES)[::-1]
            for loss in order:
                answer = run_ours(
                    name, 1, args.timesteps, run + 1, args.torch_threads, [LOSSES[loss]]
                )
                cell[loss].append(answer)
                print(f"run {run + 1} {name:<18} {loss:<6} {answer['sps']:>9,.0f} samples/s",
                      flush=True)  # fmt: skip
    load_after = os.getloadavg()
    lines = [
        f"Command: `python benchmarks/ppo_loss.py --timesteps {args.timesteps} --runs "
        f"{args.runs} --envs {' '.join(args.envs)} --torch-threads {args.torch_threads}`",
        f"Machine: {machine()}; run in the reference interpreter with {peer_versions()}; "
        f"load average {load_before[0]:.1f} before and {load_after[0]:.1f} after (1-minute); "
        f"{revision}.",
        "",
        "benchmarks/throughput.py's entityrl side (1 process, the matched settings, "
        f"{args.timesteps:,} steps a run, {args.torch_threads} torch thread(s)), once with each "
        "PPO loss in every run, the order alternating; medians of samples per second. Ratio: "
        "numpy / torch (above 1.10 the numpy copy would earn its keep).",
        "",
        "| environment | numpy loss samples/s | torch loss samples/s | numpy / torch |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, cell in results.items():
        numpy_sps, torch_sps = median_of(cell["numpy"], "sps"), median_of(cell["torch"], "sps")
        lines.append(
            f"| {name} | {numpy_sps:,.0f} | {torch_sps:,.0f} | {numpy_sps / torch_sps:.3f} |"
        )
    lines += ["", "Every run (samples/s, numpy / torch):", ""]
    for name, cell in results.items():
        pairs = ", ".join(
            f"{a['sps']:,.0f} / {b['sps']:,.0f}"
            for a, b in zip(cell["numpy"], cell["torch"], strict=True)
        )
        lines.append(f"- {name}: {pairs}")
    replace_section(TITLE, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
