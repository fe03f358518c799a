"""Exploration: PPO with random network distillation, with the intrinsic curiosity module and
with neither, on the sparse Corridor.

Trains entityrl/configs/corridor.yaml (RND on) and the same config with ICM instead
(``rnd.coef=0 icm.coef=1``) and with no bonus (``rnd.coef=0``), on seeds 1-3 with the same
step budget, and reports for each run the first step at which an episode reached the goal, the
mean return of the last 100 training episodes and the mean return of the final agent on fresh
episodes. ``--length L --steps N``: a corridor of L cells (episodes cut off after 2 L steps)
and N steps instead of the config's 40 and 30,720. ``--plain-budget N`` also trains plain PPO
for N steps, to show how much longer it needs.

usage: python benchmarks/exploration.py [--seeds 1 2 3] [--length 80 --steps 61440]
                                        [--plain-budget 122880] [--write]
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


# Each method's overrides of the shipped config (which has RND on).
METHODS = {"RND": [], "ICM": ["rnd.coef=0", "icm.coef=1"], "none": ["rnd.coef=0"]}


def run(seed: int, method: str, steps: int | None, length: int | None) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as run_dir:
        overrides = [
            f"log.run_dir={run_dir}", "log.tensorboard=false", "log.progress=false",
            "torch_threads=1", f"seed={seed}", *METHODS[method],
        ]  # fmt: skip
        if steps is not None:
            overrides.append(f"total_timesteps={steps}")
        if length is not None:
            overrides.append(f"env.kwargs.length={length}")
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
        "method": method,
        "steps": config.total_timesteps,
        "first": "never" if first.step is None else f"{first.step:,}",
        "training": result.mean_return or 0.0,
        "evaluated": evaluated,
        "seconds": seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="*", default=[1, 2, 3])
    parser.add_argument("--length", type=int, help="cells of the corridor (default: the config's)")
    parser.add_argument("--steps", type=int, help="steps per run (default: the config's)")
    parser.add_argument("--plain-budget", type=int, default=0, help="also plain PPO this long")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    torch.set_num_threads(1)
    lines = [
        "| bonus | seed | steps | first goal at step | mean return, last 100 training "
        f"episodes | mean return, {EPISODES} evaluation episodes | wall time (s) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    runs = [(method, args.steps) for method in METHODS]
    if args.plain_budget:
        runs.append(("none", args.plain_budget))
    for method, steps in runs:
        for seed in args.seeds:
            r = run(seed, method, steps, args.length)
            lines.append(
                f"| {r['method']} | {r['seed']} | {r['steps']:,} | {r['first']} "
                f"| {r['training']:.3f} | {r['evaluated']:.3f} | {r['seconds']:.0f} |"
            )
            print(lines[-1], flush=True)
    if args.write:
        options = [f"--length {args.length}"] if args.length else []
        options += [f"--steps {args.steps}"] if args.steps else []
        options += [f"--plain-budget {args.plain_budget}"] if args.plain_budget else []
        length = args.length or 40
        replace_section(
            f"Exploration: RND and ICM on Corridor ({length} cells)",
            f"Command: `python benchmarks/exploration.py {' '.join([*options, '--write'])}`"
            f"\n\nMachine: {machine()}; torch threads 1.\n\n"
            f"entityrl/configs/corridor.yaml (here a corridor of {length} cells, reward 1 only "
            f"at the far end, episodes cut off after {2 * length} steps; RND with rnd.coef=1) "
            "against the same config with ICM instead (rnd.coef=0 icm.coef=1) and with no "
            "bonus (rnd.coef=0), seeds as listed. The evaluation plays the final agent with "
            "sampled actions.\n\n" + "\n".join(lines) + "\n",
        )


if __name__ == "__main__":
    main()
