"""Asynchronous sampling with memory and decisions (issue #31): sync against async at equal
steps.

Per task and seed, train with ``rollout.mode=sync`` and with ``rollout.mode=async`` (2 worker
processes each, one torch thread), then evaluate each agent on the same ``--episodes`` episodes
(sampled actions, environment seed 12345). Tasks:

- ``recall``: Recall with its shipped config (``net.memory=true``, 40,960 steps); without
  memory no policy expects more than 0.5;
- ``move``: MoveToOrigin with a decision every other step (``env.decisions.period=2``, the
  thrust repeated between), 51,200 steps; an untrained policy scores about -0.3;
- ``move-memory``: the same with ``net.memory=true`` (both together).

``--overrides`` adds config overrides to every run (e.g. ``total_timesteps=16384``: a
smaller budget). Reported per run: the evaluation return, the wall time and (async) the mean |log ratio| of
learner to acting policy per row over the run.

usage: python benchmarks/async_memory_decisions.py [--seeds 1 2 3] [--tasks recall move ...]
                                                   [--episodes N] [--overrides KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _peer import machine

from entityrl.training import evaluate, load_agent, make_eval_env, train

EVAL_SEED = 12345
QUIET = ["log.tensorboard=false", "log.progress=false", "torch_threads=1", "rollout.processes=2"]
TASKS = {
    "recall": ("Recall", []),
    "move": ("MoveToOrigin", ["env.decisions.period=2", "total_timesteps=51200"]),
    "move-memory": (
        "MoveToOrigin",
        ["env.decisions.period=2", "total_timesteps=51200", "net.memory=true"],
    ),
}


def run(
    task: str, mode: str, seed: int, episodes: int, overrides: list[str], tmp: str
) -> tuple[float, float, float]:
    """Evaluation return, wall time and mean |log ratio| (nan in sync mode) of one run."""
    env, extra = TASKS[task]
    run_dir = f"{tmp}/{task}-{mode}-{seed}"
    started = time.time()
    train(env, overrides=[*QUIET, *extra, *overrides, f"rollout.mode={mode}", f"seed={seed}",
                          f"log.run_dir={run_dir}"])  # fmt: skip
    seconds = time.time() - started
    lines = (Path(run_dir) / "metrics.jsonl").read_text().splitlines()
    ratios = [
        m["async/abs_log_ratio"] for m in map(json.loads, lines) if "async/abs_log_ratio" in m
    ]
    agent = load_agent(run_dir, seed=0)
    with make_eval_env(agent, num_envs=16, seed=EVAL_SEED) as eval_env:
        value = evaluate(agent, eval_env, episodes).mean()
    return value, seconds, statistics.fmean(ratios) if ratios else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--tasks", nargs="+", choices=list(TASKS), default=list(TASKS))
    parser.add_argument("--episodes", type=int, default=400)
    parser.add_argument("--overrides", nargs="+", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    print(machine(), flush=True)
    print(
        "| task | overrides | mode | seed | evaluation return | wall time (s) | mean abs log ratio |"
    )
    print("| --- | --- | --- | ---: | ---: | ---: | ---: |", flush=True)
    returns: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for task in args.tasks:
            env, extra = TASKS[task]
            extra = [*extra, *args.overrides]
            for seed in args.seeds:
                for mode in ("sync", "async"):
                    value, seconds, ratio = run(
                        task, mode, seed, args.episodes, args.overrides, tmp
                    )
                    returns.setdefault((task, mode), []).append(value)
                    print(f"| {env} | {' '.join(extra)} | {mode} | {seed} | {value:.3f} | "
                          f"{seconds:.0f} | {ratio:.3f} |", flush=True)  # fmt: skip
    for (task, mode), values in returns.items():
        print(f"median return, {task}, {mode}: {statistics.median(values):.3f}")


if __name__ == "__main__":
    main()
