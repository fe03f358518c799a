"""Survival stress: PPO on DayAndNight under three life limits and three reward modes.

For each config in this folder (life limit 50/100/150 x dense/sparse/very sparse reward), train
for ``--steps`` environment steps, then measure the trained agent's and a uniformly random
policy's mean lifetime (episode length) and return over ``--episodes`` fresh episodes. Writes a
table and two figures (learning curves of lifetime; trained vs random lifetime) into docs/ and
the "Survival-stress results" section of docs/survival.md.

usage: python experiments/survival_stress/run.py [--steps 300000] [--episodes 200] [--threads 1]
       [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from entityrl.env import RandomPolicy
from entityrl.training import evaluate, load_agent, make_eval_env
from entityrl.training.config import load_config
from entityrl.training.run_log import read_metrics
from entityrl.training.runner import Trainer

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
DOCS = ROOT / "docs"
LIFE_LIMITS = (50, 100, 150)
REWARDS = ("dense", "sparse", "very_sparse")


def run_one(life_limit: int, reward: str, args: argparse.Namespace, out: Path) -> dict:
    path = HERE / f"day_and_night_ll{life_limit}_{reward}.yaml"
    run_dir = out / path.stem
    config = load_config(
        path,
        [f"total_timesteps={args.steps}", f"log.run_dir={run_dir}", "log.tensorboard=false",
         "log.progress=false", f"torch_threads={args.threads}"],
    )  # fmt: skip
    started = time.time()
    Trainer(config).run()
    seconds = time.time() - started
    agent = load_agent(run_dir, seed=0)
    with make_eval_env(agent, num_envs=32, seed=777) as env:
        trained = evaluate(agent, env, args.episodes)
        baseline = evaluate(RandomPolicy(env.action_space, seed=0), env, args.episodes)
    curve = [
        (r["step"], r["episode/episode_length"])
        for r in read_metrics(run_dir)
        if "episode/episode_length" in r
    ]
    return {
        "life_limit": life_limit,
        "reward": reward,
        "lifetime": trained.mean("episode_length"),
        "return": trained.mean("episode_return"),
        "meals": trained.mean("task/eat_meat"),
        "drinks": trained.mean("task/drink_water"),
        "random_lifetime": baseline.mean("episode_length"),
        "random_return": baseline.mean("episode_return"),
        "random_meals": baseline.mean("task/eat_meat"),
        "seconds": seconds,
        "curve": curve,
    }


def plot(results: list[dict], path: Path) -> None:
    fig, axes = plt.subplots(1, 4, figsize=(18, 4), constrained_layout=True)
    for ax, reward in zip(axes[:3], REWARDS, strict=True):
        for r in (r for r in results if r["reward"] == reward):
            steps, lengths = zip(*r["curve"], strict=True) if r["curve"] else ((), ())
            ax.plot(steps, lengths, label=f"life limit {r['life_limit']}")
        ax.set(title=f"{reward} reward", xlabel="environment steps", ylabel="mean lifetime")
        ax.legend()
    ax = axes[3]
    labels = [f"{r['life_limit']}/{r['reward'][:5]}" for r in results]
    x = np.arange(len(results))
    ax.bar(x - 0.2, [r["lifetime"] for r in results], 0.4, label="PPO")
    ax.bar(x + 0.2, [r["random_lifetime"] for r in results], 0.4, label="random")
    ax.set_xticks(x, labels, rotation=60, fontsize=7)
    ax.set(title="lifetime after training", ylabel="mean lifetime")
    ax.legend()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, path)


def write_section(results: list[dict], args: argparse.Namespace, figure: Path) -> None:
    rows = [
        "| life limit | reward | PPO lifetime | random lifetime | ratio | PPO return "
        "| random return | PPO meals / drinks | random meals | training time (s) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        rows.append(
            f"| {r['life_limit']} | {r['reward']} | {r['lifetime']:.1f} | "
            f"{r['random_lifetime']:.1f} | {r['lifetime'] / r['random_lifetime']:.2f}x | "
            f"{r['return']:.2f} | {r['random_return']:.2f} | {r['meals']:.1f} / "
            f"{r['drinks']:.1f} | {r['random_meals']:.1f} | {r['seconds']:.0f} |"
        )
    body = (
        f"Command: `python experiments/survival_stress/run.py --steps {args.steps} "
        f"--episodes {args.episodes} --threads {args.threads} --jobs {args.jobs}`. Each config of "
        f"`experiments/survival_stress/` trained for {args.steps:,} steps (instead of their "
        f"2M, for time), then the agent (sampled actions) and a uniformly random policy each "
        f"played {args.episodes} fresh episodes (meals and drinks: meat and water consumed per "
        "episode).\n\n" + "\n".join(rows) + "\n\n"
        f"![learning curves and lifetimes]({figure.relative_to(DOCS).as_posix()})\n"
    )
    doc = DOCS / "survival.md"
    text = doc.read_text()
    section = "## Survival-stress results\n\n" + body
    pattern = re.compile(r"^## Survival-stress results\n.*?(?=^## |\Z)", re.S | re.M)
    text = (
        pattern.sub(lambda _: section + "\n", text)
        if pattern.search(text)
        else (text.rstrip("\n") + "\n\n" + section)
    )
    tmp = doc.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, doc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300_000)
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1, help="torch threads per run")
    parser.add_argument("--jobs", type=int, default=1, help="runs trained at the same time")
    parser.add_argument("--out", type=Path, help="keep the run directories here")
    args = parser.parse_args()
    grid = [(life_limit, reward) for life_limit in LIFE_LIMITS for reward in REWARDS]
    with tempfile.TemporaryDirectory() as tmp, ProcessPoolExecutor(args.jobs) as pool:
        out = args.out or Path(tmp)
        futures = [pool.submit(run_one, ll, reward, args, out) for ll, reward in grid]
        results = []
        for future in futures:
            results.append(future.result())
            print(json.dumps({k: v for k, v in results[-1].items() if k != "curve"}), flush=True)
    figure = DOCS / "images" / "survival_stress.png"
    figure.parent.mkdir(parents=True, exist_ok=True)
    plot(results, figure)
    write_section(results, args, figure)
    print(f"wrote {figure} and docs/survival.md", file=sys.stderr)


if __name__ == "__main__":
    main()
