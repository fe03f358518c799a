"""Goal conditioning: GoalGrid learned with net.conditioning=hyper, film and none.

Per seed and conditioning, train GoalGrid with its shipped config (goals drawn from the six
training combinations of shape and colour; the three default held-out ones never appear),
then evaluate each agent on the same episodes of the training combinations and of the held-out
combinations (goals="held_out": every goal new, the distractors known), with actions sampled
as in training and with the most probable ones (greedy). The figure is the success rate: the
share of episodes that end on the goal object.

usage: python benchmarks/goal_conditioning.py [--seeds 1 2 3] [--threads 1] [--write]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from _peer import machine
from results import replace_section

from entityrl.envs.goal_grid import GoalGrid
from entityrl.training import evaluate, load_agent, load_config, make_eval_env, train

MODES = ("hyper", "film", "none")
EPISODES = 200
EVAL_SEED = 12345
# (column label, goals mode, greedy)
EVALUATIONS = (
    ("train, sampled", "train", False),
    ("held out, sampled", "held_out", False),
    ("train, greedy", "train", True),
    ("held out, greedy", "held_out", True),
)


def run(mode: str, seed: int, threads: int, tmp: str) -> tuple[list[float], float]:
    """The success rates of one run (in EVALUATIONS order) and its training wall time."""
    started = time.time()
    result = train(
        "GoalGrid",
        overrides=[f"net.conditioning={mode}", f"seed={seed}", f"log.run_dir={tmp}/{mode}-{seed}",
                   "log.tensorboard=false", "log.progress=false", f"torch_threads={threads}"],
    )  # fmt: skip
    seconds = time.time() - started
    rates = []
    for _, goals, greedy in EVALUATIONS:
        agent = load_agent(result.run_dir, seed=0, deterministic=greedy)
        factory = functools.partial(GoalGrid, goals=goals)
        with make_eval_env(agent, num_envs=16, seed=EVAL_SEED, env=factory) as env:
            rates.append(evaluate(agent, env, EPISODES).mean("success"))
    return rates, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", nargs="*", type=int, default=[1, 2, 3])
    parser.add_argument("--modes", nargs="*", choices=MODES, default=list(MODES))
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            for mode in args.modes:
                rates, seconds = run(mode, seed, args.threads, tmp)
                rows.append((seed, mode, rates, seconds))
                print(f"seed {seed} {mode}: {[round(r, 3) for r in rates]} {seconds:.0f} s",
                      flush=True)  # fmt: skip
    labels = [label for label, _, _ in EVALUATIONS]
    per_seed = [
        f"| {seed} | {mode} | " + " | ".join(f"{r:.3f}" for r in rates) + f" | {seconds:.0f} |"
        for seed, mode, rates, seconds in rows
    ]
    medians = [
        f"| median | {mode} | "
        + " | ".join(
            f"{statistics.median(r[2][i] for r in rows if r[1] == mode):.3f}"
            for i in range(len(EVALUATIONS))
        )
        + " | |"
        for mode in args.modes
    ]
    config = load_config("GoalGrid")
    table = "\n".join(
        [
            f"| seed | net.conditioning | {' | '.join(labels)} | training wall time (s) |",
            "|---" * (len(labels) + 3) + "|",
            *per_seed,
            *medians,
        ]
    )
    print(table)
    if args.write:
        body = "\n".join(
            [
                f"Command: `python benchmarks/goal_conditioning.py --seeds "
                f"{' '.join(map(str, args.seeds))} --threads {args.threads} --write`",
                "",
                f"Machine: {machine()}; torch threads {args.threads}.",
                "",
                f"GoalGrid (5x5, 3 objects, goal = shape x colour, red_square, green_circle and "
                f"blue_triangle held out) with its shipped config ({config.total_timesteps:,} "
                f"steps); success rate over {EPISODES} episodes per column (environment seed "
                f"{EVAL_SEED}).",
                "",
                table,
            ]
        )
        replace_section("Goal conditioning (GoalGrid, held-out goals)", body)


if __name__ == "__main__":
    main()
