"""entityrl.stats against the rliable package on the same scores: point estimates must agree
exactly, bootstrap intervals within the spread of their own resampling.

Runs in an interpreter that has rliable (its own venv: ``python -m venv V; V/bin/pip install
rliable``) with this repository on ``PYTHONPATH`` (entityrl.stats needs numpy only):

usage: PYTHONPATH=. V/bin/python benchmarks/stats_check.py [--reps 20000]
"""

from __future__ import annotations

import argparse

import numpy as np
from rliable import library, metrics

from entityrl import stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=20_000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(
        "| case (runs x tasks) | statistic | entityrl | rliable | point difference | "
        "largest interval-end difference |"
    )
    print("|---|---|---|---|---:|---:|")
    for runs, tasks in ((3, 7), (5, 7), (10, 26)):
        scores = rng.beta(2.0, 3.0, (runs, tasks))  # rliable's layout: (runs, tasks)
        others = rng.beta(2.5, 3.0, (runs, tasks))
        ours = [scores[:, t] for t in range(tasks)]
        case = f"{runs} x {tasks}"
        aggregates = {
            "IQM": (stats.iqm, metrics.aggregate_iqm),
            "mean": (stats.mean, metrics.aggregate_mean),
            "median": (stats.median, metrics.aggregate_median),
            "optimality gap": (stats.optimality_gap, metrics.aggregate_optimality_gap),
        }
        for name, (ours_fn, theirs_fn) in aggregates.items():
            estimate = stats.interval(ours, ours_fn, reps=args.reps)
            point, intervals = library.get_interval_estimates(
                {"x": scores}, lambda s, f=theirs_fn: np.array([f(s)]), reps=args.reps
            )
            theirs = (float(point["x"][0]), *map(float, intervals["x"][:, 0]))
            ends = max(abs(estimate.low - theirs[1]), abs(estimate.high - theirs[2]))
            print(f"| {case} | {name} (point [95% CI]) | {estimate} | "
                  f"{theirs[0]:.3f} [{theirs[1]:.3f}, {theirs[2]:.3f}] | "
                  f"{abs(estimate.value - theirs[0]):.1e} | {ends:.4f} |")  # fmt: skip
        taus = np.linspace(0.0, 1.0, 11)
        profile, low, high = stats.performance_profile(ours, taus, reps=args.reps)
        their_profile, their_cis = library.create_performance_profile(
            {"x": scores}, taus, reps=args.reps
        )
        ends = max(np.abs(low - their_cis["x"][0]).max(), np.abs(high - their_cis["x"][1]).max())
        print(f"| {case} | performance profile, 11 thresholds | | | "
              f"{np.abs(profile - their_profile['x']).max():.1e} | {ends:.4f} |")  # fmt: skip
        chance = stats.probability_of_improvement(
            [others[:, t] for t in range(tasks)], ours, reps=1
        )
        theirs_chance = float(metrics.probability_of_improvement(others, scores))
        print(f"| {case} | probability of improvement | {chance.value:.4f} | "
              f"{theirs_chance:.4f} | {abs(chance.value - theirs_chance):.1e} | - |")  # fmt: skip


if __name__ == "__main__":
    main()
