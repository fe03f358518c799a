"""entityrl's own training samples/s at two revisions of the tree, in the same run: a check for
regressions that holds on a busy machine, where comparisons across runs do not.

The two trees (git worktrees, e.g. ``git worktree add ../old 65f13a2``) train the same config in
turns, ``--runs`` times each, with this interpreter and ``PYTHONPATH`` pointing at each tree;
samples/s = the median of the iterations' ``perf/sps`` after the first.

usage: python benchmarks/revisions.py OLD_TREE NEW_TREE [--env CherryPick] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _peer import FAST_REGIME

# benchmarks/throughput.py's network and rollout, on entityrl's own environment, 1 thread.
SETTINGS = [*FAST_REGIME, "net.d_model=32", "net.n_layer=2", "net.n_head=2", "torch_threads=1",
            "log.progress=false", "log.tensorboard=false", "total_timesteps=40960"]  # fmt: skip


def samples_per_second(tree: Path, env: str) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        variables = dict(os.environ, PYTHONPATH=str(tree), OMP_NUM_THREADS="1")
        command = [sys.executable, "-m", "entityrl.cli.main", "train", env, *SETTINGS,
                   f"log.run_dir={tmp}/run"]  # fmt: skip
        subprocess.run(command, check=True, capture_output=True, env=variables, cwd=tree)
        rows = [json.loads(line) for line in Path(tmp, "run/metrics.jsonl").read_text().split("\n")
                if line.strip()]  # fmt: skip
    return statistics.median(row["perf/sps"] for row in rows[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--env", default="CherryPick")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    trees = {"old": args.old.resolve(), "new": args.new.resolve()}
    results: dict[str, list[float]] = {name: [] for name in trees}
    for run in range(args.runs):
        order = list(trees.items()) if run % 2 == 0 else list(trees.items())[::-1]
        for name, tree in order:
            results[name].append(samples_per_second(tree, args.env))
            print(f"run {run + 1} {name}: {results[name][-1]:,.0f} samples/s", flush=True)
    for name, values in results.items():
        print(f"{name} ({trees[name]}): median {statistics.median(values):,.0f} "
              f"{[round(v) for v in values]}")  # fmt: skip
    ratio = statistics.median(results["new"]) / statistics.median(results["old"])
    print(f"new / old = {ratio:.2f}")


if __name__ == "__main__":
    main()
