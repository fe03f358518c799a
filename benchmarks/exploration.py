"""Exploration: PPO with and without random network distillation on the sparse Corridor.

Trains entityrl/configs/corridor.yaml (RND on) and the same config with ``rnd.coef=0`` on
seeds 1-3 with the same step budget, and reports for each run the first step at which an
episode reached the goal, the mean return of the last 100 training episodes and the mean
return of the final agent on fresh episodes. ``--plain-budget N`` also trains plain PPO for
N steps, to show how much longer it needs.

usage: python benchmarks/exploration.py [--seeds 1 2 3] [--plain-budget 122880] [--write]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from _peer import machine
from results import replace_section

from entityrl.training import evaluate, load_agent, make_eval_env
from entityrl.training.callbacks import Callback
from entityrl.training.config import CONFIG_DIR, load_config
from entityrl.training.runner import Trainer

CONFIG = CONFIG_DIR / "corridor.yaml"
EPISODES = 200


class FirstGoal(Callback):
    """Remembers the step of the first iteration in which an episode earned a reward."""

    def __init__(self) -> None:
        self.step: int | None = None

    def on_iteration(self, trainer: Trainer, metrics: dict[str, float]) -> None:
        if self.step is None and metrics.get("episode/episode_return", 0.0) > 0:
            self.step = trainer.step


def run(seed: int, coef: float, steps: int | None) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as run_dir:
        overrides = [
            f"log.run_dir={run_dir}", "log.tensorboard=false", "log.progress=false",
            "torch_threads=1", f"seed={seed}", f"rnd.coef={coef}",
        ]  # fmt: skip
        if steps is not None:
            overrides.append(f"total_timesteps={steps}")
        config = load_config(CONFIG, overrides)
        first = FirstGoal()
        started = time.time()
        result = Trainer(config, callbacks=[first]).run()
        seconds = time.time() - started
        agent = load_agent(run_dir, seed=0)
        with make_eval_env(agent, num_envs=16, seed=12345) as env:
            evaluated = evaluate(agent, env, EPISODES).mean()
    return {
        "seed": seed,
        "rnd": coef,
        "steps": config.total_timesteps,
        "first": "never" if first.step is None else f"{first.step:,}",
        "training": result.mean_return or 0.0,
        "evaluated": evaluated,
        "seconds": seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="*", default=[1, 2, 3])
    parser.add_argument("--plain-budget", type=int, default=0, help="also plain PPO this long")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    torch.set_num_threads(1)
    lines = [
        "| rnd.coef | seed | steps | first goal at step | mean return, last 100 training "
        f"episodes | mean return, {EPISODES} evaluation episodes | wall time (s) |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    runs = [(coef, None) for coef in (1.0, 0.0)]
    if args.plain_budget:
        runs.append((0.0, args.plain_budget))
    for coef, steps in runs:
        for seed in args.seeds:
            r = run(seed, coef, steps)
            lines.append(
                f"| {r['rnd']:g} | {r['seed']} | {r['steps']:,} | {r['first']} "
                f"| {r['training']:.3f} | {r['evaluated']:.3f} | {r['seconds']:.0f} |"
            )
            print(lines[-1], flush=True)
    if args.write:
        command = "python benchmarks/exploration.py" + (
            f" --plain-budget {args.plain_budget}" if args.plain_budget else ""
        )
        replace_section(
            "Exploration: random network distillation on Corridor",
            f"Command: `{command} --write`\n\nMachine: {machine()}; torch threads 1.\n\n"
            "entityrl/configs/corridor.yaml (a corridor of 40 cells, reward 1 only at the far "
            "end, episodes cut off after 80 steps; RND with rnd.coef=1) against the same "
            "config with rnd.coef=0, seeds as listed. The evaluation plays the final agent "
            "with sampled actions.\n\n" + "\n".join(lines) + "\n",
        )


if __name__ == "__main__":
    main()
