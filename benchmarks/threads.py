"""Torch threads on a busy machine: a short PPO run and an evaluation of its agent, timed with
1 thread, 2 threads and the default (entityrl.training.threads), as the machine is and with
one busy-loop process added as artificial load.

usage: python benchmarks/threads.py [--steps 4096] [--episodes 64]
"""

from __future__ import annotations

import argparse
import functools
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from entityrl.training import evaluate, load_agent, make_eval_env, train
from entityrl.training.threads import INFERENCE_THREADS, training_threads

QUIET = ["log.tensorboard=false", "log.progress=false", "seed=1"]


def timed(work: Callable[[], object]) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def measure(label: str, steps: int, episodes: int, scratch: Path) -> None:
    """Train and evaluate with each thread count; one line per count."""
    chosen = training_threads(0)
    print(f"{label}: load average {os.getloadavg()[0]:.2f}, default training threads {chosen}")
    for name, train_threads, eval_threads in [
        ("1 thread", 1, 1),
        ("2 threads", 2, 2),
        ("default", 0, INFERENCE_THREADS),
    ]:
        run_dir = scratch / f"{label}-{name}".replace(" ", "_")
        overrides = [*QUIET, f"total_timesteps={steps}", f"torch_threads={train_threads}",
                     f"log.run_dir={run_dir}"]  # fmt: skip
        train_s = timed(functools.partial(train, "MoveToOrigin", overrides=overrides))
        agent = load_agent(run_dir, seed=0)
        with make_eval_env(agent, 16, seed=0) as env:
            eval_s = timed(functools.partial(evaluate, agent, env, episodes, threads=eval_threads))
        print(f"  {name:<9}  train {steps} steps {train_s:6.1f} s   evaluate {episodes} "
              f"episodes {eval_s:6.2f} s", flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4096)
    parser.add_argument("--episodes", type=int, default=64)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as scratch:
        measure("as is", args.steps, args.episodes, Path(scratch))
        busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            time.sleep(20)  # let the load average see it
            measure("plus a busy loop", args.steps, args.episodes, Path(scratch))
        finally:
            busy.kill()
            busy.wait()


if __name__ == "__main__":
    main()
