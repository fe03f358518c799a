"""MiniGrid-DoorKey-5x5 from pixels against its entity view, at the same steps.

Each run is ``entityrl train minigrid:MiniGrid-DoorKey-5x5-v0 env.kwargs.view=VIEW seed=SEED``
with the shipped config (``entityrl/configs/minigrid_minigrid_doorkey_5x5_v0.yaml``) and
``--steps`` steps. The pixel view is MiniGrid's ``RGBImgPartialObsWrapper`` (56x56x3, the same
7x7 cells the entity view lists as entities), encoded by ``net.image_encoder`` (docs/images.md).
Figures per run, from its metrics.jsonl: the success rate of the training episodes of the last
quarter of the run (weighted by episodes), the first step whose iteration's training episodes
succeed at least 90% of the time, and the wall time.

usage: python benchmarks/minigrid_pixels.py [--seeds 1 2 3] [--steps 98304]
           [--views entities pixels] [--encoder small]
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

ENV = "minigrid:MiniGrid-DoorKey-5x5-v0"


def summary(metrics: Path, steps: int) -> dict[str, float | int | None]:
    """Late training success, and the first step an iteration's episodes reach 90%."""
    episodes = successes = 0.0
    first = None
    for line in metrics.read_text().splitlines():
        row = json.loads(line)
        count = row.get("episodes", 0)
        if not count or "episode/success" not in row:
            continue
        if first is None and row["episode/success"] >= 0.9:
            first = row["step"]
        if row["step"] > 0.75 * steps:
            episodes += count
            successes += row["episode/success"] * count
    return {"late_success": successes / episodes if episodes else None, "first_90": first}


def train(view: str, seed: int, steps: int, encoder: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "-m", "entityrl.cli.main", "train", ENV,
                   f"env.kwargs.view={view}", f"net.image_encoder={encoder}", f"seed={seed}",
                   f"total_timesteps={steps}", "torch_threads=1", "log.progress=false",
                   "log.tensorboard=false", f"log.run_dir={tmp}/run"]  # fmt: skip
        started = time.time()
        done = subprocess.run(command, capture_output=True, text=True,
                              env=dict(os.environ, OMP_NUM_THREADS="1"))  # fmt: skip
        if done.returncode:
            raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
        result = summary(Path(tmp, "run", "metrics.jsonl"), steps)
    return {"view": view, "seed": seed, "seconds": round(time.time() - started), **result}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--steps", type=int, default=98304)
    parser.add_argument("--views", nargs="+", default=["entities", "pixels"])
    parser.add_argument("--encoder", default="small", choices=["small", "impala"])
    args = parser.parse_args()
    for view in args.views:
        for seed in args.seeds:
            print(json.dumps(train(view, seed, args.steps, args.encoder)), flush=True)


if __name__ == "__main__":
    main()
