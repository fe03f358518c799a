"""Memory: Recall learned with and without a recurrent state (net.memory).

Per seed, train Recall with its shipped config (net.memory=true) and with net.memory=false,
then evaluate each agent on the same 400 fresh episodes (sampled actions, environment seed
12345). A policy without memory cannot expect more than 0.5 (docs/memory.md).

usage: python benchmarks/memory.py [--seeds 1 2 3] [--threads 1] [--write]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from _peer import machine
from results import replace_section

from entityrl.training import evaluate, load_agent, load_config, make_eval_env, train

EPISODES = 400
EVAL_SEED = 12345


def run(memory: bool, seed: int, threads: int, tmp: str) -> tuple[float, float, int]:
    """Evaluation return, wall time and steps of one run."""
    started = time.time()
    result = train(
        "Recall",
        overrides=[f"net.memory={memory}", f"seed={seed}", f"log.run_dir={tmp}/{memory}-{seed}",
                   "log.tensorboard=false", "log.progress=false", f"torch_threads={threads}"],
    )  # fmt: skip
    seconds = time.time() - started
    agent = load_agent(result.run_dir, seed=0)
    with make_eval_env(agent, num_envs=16, seed=EVAL_SEED) as env:
        return evaluate(agent, env, EPISODES).mean(), seconds, result.steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", nargs="*", type=int, default=[1, 2, 3])
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            for memory in (True, False):
                value, seconds, steps = run(memory, seed, args.threads, tmp)
                rows.append((seed, memory, value, seconds, steps))
                print(rows[-1], flush=True)
    config = load_config("Recall")
    medians = {
        memory: statistics.median(r[2] for r in rows if r[1] == memory) for memory in (True, False)
    }
    body = "\n".join(
        [
            f"Command: `python benchmarks/memory.py --seeds {' '.join(map(str, args.seeds))} "
            f"--threads {args.threads} --write`",
            "",
            f"Machine: {machine()}; torch threads {args.threads}.",
            "",
            f"Recall (delay 4) with its shipped config ({config.total_timesteps:,} steps, "
            f"ppo.seq_len={config.ppo.seq_len}, rollout.steps={config.rollout.steps}); each agent "
            f"evaluated on the same {EPISODES} episodes (sampled actions). The return is the "
            "share of questions answered right; without memory no policy expects more than 0.5.",
            "",
            "| seed | net.memory | steps | evaluation return | wall time (s) |",
            "|---|---|---|---|---|",
            *(
                f"| {seed} | {str(memory).lower()} | {steps:,} | {value:.3f} | {seconds:.0f} |"
                for seed, memory, value, seconds, steps in rows
            ),
            "",
            f"Median return: {medians[True]:.3f} with memory, {medians[False]:.3f} without.",
        ]
    )
    print(body)
    if args.write:
        replace_section("Memory: Recall (benchmarks/memory.py)", body)


if __name__ == "__main__":
    main()
