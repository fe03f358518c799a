"""Crafter through its views: the full local view as entities, an entity view that hides what
Crafter's pixels hide (creature health; cells lost to the night's noise), and the 64 x 64 pixel
frame itself through the image path (``view=image``), scored as the Crafter paper scores: the success rate of each achievement over all of a run's training episodes, then the
geometric-mean score (entityrl.interop.crafter.crafter_score).

Each run is ``entityrl train crafter:default env.kwargs.view=VIEW seed=SEED`` with the shipped
config (``entityrl/configs/crafter_default.yaml``) and ``--steps`` steps; the training episodes'
achievement rates come from the run's metrics.jsonl (each iteration's means, weighted by its
episodes). Runs are cached in ``--cache`` as they finish, so an interrupted study resumes.

usage: python benchmarks/crafter_views.py [--seeds 1 2 3] [--steps 200704] [--views full pixels image]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from entityrl.interop.crafter import ACHIEVEMENTS, crafter_score

PREFIX = "episode/achievement/"


def training_rates(metrics: Path) -> tuple[dict[str, float], int]:
    """Each achievement's success rate over all training episodes, and their number."""
    totals = dict.fromkeys(ACHIEVEMENTS, 0.0)
    episodes = 0
    for line in metrics.read_text().splitlines():
        row = json.loads(line)
        count = int(row.get("episodes", 0))
        if not count or PREFIX + ACHIEVEMENTS[0] not in row:
            continue
        episodes += count
        for name in ACHIEVEMENTS:
            totals[name] += row[PREFIX + name] * count
    if not episodes:
        raise RuntimeError(f"{metrics} holds no finished training episode")
    return {name: total / episodes for name, total in totals.items()}, episodes


def train(view: str, seed: int, steps: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "-m", "entityrl.cli.main", "train", "crafter:default",
                   f"env.kwargs.view={view}", f"seed={seed}", f"total_timesteps={steps}",
                   "torch_threads=1", "log.progress=false", "log.tensorboard=false",
                   f"log.run_dir={tmp}/run"]  # fmt: skip
        started = time.time()
        done = subprocess.run(command, capture_output=True, text=True,
                              env=dict(os.environ, OMP_NUM_THREADS="1"))  # fmt: skip
        if done.returncode:
            raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
        rates, episodes = training_rates(Path(tmp, "run", "metrics.jsonl"))
    return {"rates": rates, "episodes": episodes, "seconds": time.time() - started}


def mean_interval(values: list[float], reps: int = 10_000, seed: int = 0) -> str:
    """Mean over seeds and its 95% percentile-bootstrap interval (resampling seeds)."""
    rng = np.random.default_rng(seed)
    means = rng.choice(values, (reps, len(values))).mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return f"{np.mean(values):.2f}% [{low:.2f}, {high:.2f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--steps", type=int, default=200_704)
    parser.add_argument("--views", nargs="+", default=["full", "pixels", "image"])
    parser.add_argument("--cache", type=Path, default=Path("benchmarks/crafter_views.json"))
    args = parser.parse_args()
    cache = json.loads(args.cache.read_text()) if args.cache.exists() else {}
    for seed in args.seeds:
        for view in args.views:
            key = f"{view}|{seed}|{args.steps}"
            if key not in cache:
                print(f"training view={view} seed={seed} ({args.steps:,} steps)", flush=True)
                cache[key] = train(view, seed, args.steps)
                partial = args.cache.with_suffix(".json.tmp")
                partial.write_text(json.dumps(cache, indent=1))
                partial.replace(args.cache)
    print("| view | score per seed (training episodes) | episodes | mean score [95% CI] | wall s |")
    print("|---|---|---:|---:|---:|")
    for view in args.views:
        runs = [cache[f"{view}|{seed}|{args.steps}"] for seed in args.seeds]
        scores = [crafter_score(run["rates"]) for run in runs]
        print(f"| {view} | {', '.join(f'{s:.2f}%' for s in scores)} | "
              f"{', '.join(str(run['episodes']) for run in runs)} | {mean_interval(scores)} | "
              f"{np.mean([run['seconds'] for run in runs]):.0f} |")  # fmt: skip


if __name__ == "__main__":
    main()
