"""Continuous against discrete actions: the steps MoveToOrigin and ContinuousMoveToOrigin take
to reach the discrete version's target return, with fixed seeds.

Each shipped config is trained for ``--budget`` times the discrete config's step budget (the
continuous one with its own settings, rescaled to that length), evaluated every
``--interval`` steps on 64 episodes; a run's "steps to target" is the first evaluation whose
mean return reaches the discrete config's ``target_return``. The final agents are evaluated
on 400 fresh episodes (sampled actions).

usage: python benchmarks/continuous.py [--seeds 1 2 3] [--threads 1] [--write]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from _peer import machine
from results import replace_section

from entityrl.training import evaluate, load_agent, make_eval_env
from entityrl.training.config import CONFIG_DIR, load_config
from entityrl.training.runner import Trainer

CONFIGS = ("move_to_origin", "continuous_move_to_origin")
EPISODES = 400


def run(name: str, seed: int, steps: int, interval: int, threads: int) -> tuple[int | None, float]:
    """(first evaluated step at or above the discrete target, final return) of one run."""
    target = load_config(CONFIG_DIR / f"{CONFIGS[0]}.yaml").target_return
    with tempfile.TemporaryDirectory() as run_dir:
        config = load_config(
            CONFIG_DIR / f"{name}.yaml",
            [f"log.run_dir={run_dir}", "log.tensorboard=false", "log.progress=false",
             f"torch_threads={threads}", f"seed={seed}", f"total_timesteps={steps}",
             f"eval.interval={interval}", "eval.episodes=64"],
        )  # fmt: skip
        Trainer(config).run()
        reached = None
        for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines():
            row = json.loads(line)
            if row.get("eval/episode_return", -float("inf")) >= target:  # type: ignore[operator]
                reached = int(row["step"])
                break
        agent = load_agent(run_dir, seed=0)
        with make_eval_env(agent, num_envs=16, seed=12345) as env:
            final = float(evaluate(agent, env, EPISODES).mean())
    return reached, final


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--budget", type=float, default=2.0, help="x the discrete budget")
    parser.add_argument("--interval", type=int, default=8192, help="steps between evaluations")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per run")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    discrete = load_config(CONFIG_DIR / f"{CONFIGS[0]}.yaml")
    steps = int(discrete.total_timesteps * args.budget)
    lines = [
        "| config | seed | steps to return "
        f"{discrete.target_return} | final return ({EPISODES} episodes) |",
        "|---|---|---|---|",
    ]
    medians = {}
    for name in CONFIGS:
        reached_all = []
        for seed in args.seeds:
            reached, final = run(name, seed, steps, args.interval, args.threads)
            reached_all.append(reached if reached is not None else float("inf"))
            shown = f"{reached:,}" if reached is not None else f"not within {steps:,}"
            lines.append(f"| {name} | {seed} | {shown} | {final:.3f} |")
            print(lines[-1], flush=True)
        medians[name] = statistics.median(reached_all)
    ratio = medians[CONFIGS[1]] / medians[CONFIGS[0]]
    summary = (
        f"Median steps to {discrete.target_return}: discrete {medians[CONFIGS[0]]:,.0f}, "
        f"continuous {medians[CONFIGS[1]]:,.0f} (continuous / discrete = {ratio:.2f})."
    )
    print(summary)
    if args.write:
        seeds = " ".join(map(str, args.seeds))
        replace_section(
            "Continuous actions: ContinuousMoveToOrigin against MoveToOrigin",
            f"Command: `python benchmarks/continuous.py --seeds {seeds} --budget {args.budget} "
            f"--interval {args.interval} --threads {args.threads} --write`\n\n"
            f"Machine: {machine()}; torch threads {args.threads}.\n\n"
            "Both shipped configs, trained for "
            f"{steps:,} steps each and evaluated every {args.interval:,} steps on 64 episodes; "
            "steps to target = the first evaluation at or above the discrete config's target "
            f"return.\n\n" + "\n".join(lines) + f"\n\n{summary}\n",
        )


if __name__ == "__main__":
    main()
