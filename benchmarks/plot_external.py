"""Draw the learning curves benchmarks/external.py kept (``--curves FILE``).

One figure per task, docs/images/external_<task>.png: the periodic evaluations' mean return
(success rate for MiniGrid) against environment steps and against wall time, one line per
trainer and seed. Needs matplotlib (``pip install 'entityrl[plot]'``).

usage: python benchmarks/plot_external.py CURVES.json [CURVES.json ...] [--out docs/images]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

COLOURS = {"entityrl": "tab:blue", "SB3 PPO": "tab:orange"}
# Which column of an evaluation (steps, seconds, return, success) the task is judged by.
SUCCESS_TASKS = ("MiniGrid-",)


def draw(task: str, trainers: dict[str, list[list[list[float]]]], out: Path) -> Path:
    column, label = (3, "success rate") if task.startswith(SUCCESS_TASKS) else (2, "mean return")
    figure = Figure(figsize=(9, 3.4), layout="constrained")
    by_steps, by_time = figure.subplots(1, 2, sharey=True)
    for trainer, runs in trainers.items():
        for seed, points in enumerate(runs):
            if not points:
                continue
            steps, seconds, values = zip(*((p[0], p[1], p[column]) for p in points), strict=True)
            legend = trainer if seed == 0 else None
            colour = COLOURS.get(trainer)
            by_steps.plot(steps, values, marker="o", ms=3, color=colour, label=legend, alpha=0.8)
            by_time.plot(seconds, values, marker="o", ms=3, color=colour, alpha=0.8)
    by_steps.set(xlabel="environment steps", ylabel=f"evaluation {label}", title=task)
    by_time.set(xlabel="wall time (s)", title=f"{task}, against time")
    by_steps.legend(loc="lower right")
    for axes in (by_steps, by_time):
        axes.grid(alpha=0.3)
    path = out / f"external_{task.lower().replace('-', '_')}.png"
    figure.savefig(path, dpi=100)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("curves", type=Path, nargs="+")
    parser.add_argument("--out", type=Path, default=Path(__file__).parents[1] / "docs/images")
    args = parser.parse_args()
    merged: dict[str, Any] = {}
    for path in args.curves:
        merged.update(json.loads(path.read_text()))
    for task, trainers in merged.items():
        if any(points for runs in trainers.values() for points in runs):  # Crafter has none
            print(draw(task, trainers, args.out))


if __name__ == "__main__":
    main()
