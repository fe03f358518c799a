"""Statistics over training runs, as Agarwal et al. (2021, "Deep RL at the edge of the
statistical precipice") recommend for comparing algorithms on a suite with few seeds.

Scores come as one array per task, one normalized score per run (seed): tasks may have
different numbers of runs. The aggregates:

* :func:`iqm`: the interquartile mean over all runs of all tasks (the mean of the middle half:
  a quarter of the sorted scores cut from each end), robust to outlier runs yet using more of
  the data than the median;
* :func:`mean`, :func:`median`, :func:`optimality_gap` (how far the runs fall short of a target
  score, 1 by default: the mean of ``max(target - score, 0)``);
* :func:`interval`: any of them with a 95% stratified bootstrap interval: each replicate
  resamples every task's runs with replacement, keeping the task mix fixed (percentile
  interval);
* :func:`performance_profile`: for each threshold, the share of runs scoring above it
  (averaged over tasks), with its bootstrap interval;
* :func:`probability_of_improvement`: the chance that a run of one method outscores a run of
  the other on a task drawn at random (ties count half), with its interval.

numpy only. Checked against the ``rliable`` package on the same data
(``benchmarks/stats_check.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Scores = Sequence[npt.ArrayLike]
"""One array of run scores per task."""
Aggregate = Callable[[Sequence[npt.NDArray[np.float64]]], float]


@dataclass(frozen=True)
class Estimate:
    """A point estimate and its confidence interval."""

    value: float
    low: float
    high: float

    def __str__(self) -> str:
        return f"{self.value:.3f} [{self.low:.3f}, {self.high:.3f}]"


def _tasks(scores: Scores) -> list[npt.NDArray[np.float64]]:
    tasks = [np.asarray(runs, dtype=np.float64).reshape(-1) for runs in scores]
    if not tasks or any(runs.size == 0 for runs in tasks):
        sizes = [runs.size for runs in tasks]
        raise ValueError(
            f"scores need at least one task and one run per task, got run counts {sizes}"
        )
    if any(not np.isfinite(runs).all() for runs in tasks):
        raise ValueError("scores must be finite numbers; got NaN or infinity")
    return tasks


def iqm(scores: Scores) -> float:
    """Interquartile mean of all runs of all tasks."""
    ordered = np.sort(np.concatenate(_tasks(scores)))
    cut = int(0.25 * len(ordered))
    return float(ordered[cut : len(ordered) - cut].mean())


def mean(scores: Scores) -> float:
    """Mean over tasks of each task's mean run score."""
    return float(np.mean([runs.mean() for runs in _tasks(scores)]))


def median(scores: Scores) -> float:
    """Median over tasks of each task's mean run score."""
    return float(np.median([runs.mean() for runs in _tasks(scores)]))


def optimality_gap(scores: Scores, target: float = 1.0) -> float:
    """Mean over all runs of how far each falls short of ``target`` (0 above it)."""
    return float(np.maximum(target - np.concatenate(_tasks(scores)), 0.0).mean())


def _resample(
    tasks: list[npt.NDArray[np.float64]], rng: np.random.Generator
) -> list[npt.NDArray[np.float64]]:
    return [runs[rng.integers(0, runs.size, runs.size)] for runs in tasks]


def _percentiles(values: npt.ArrayLike, confidence: float) -> npt.NDArray[np.float64]:
    """The low and high ends of the ``confidence`` interval of the replicates (along their
    first axis): an array of 2 rows."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    tail = 100 * (1 - confidence) / 2
    return np.percentile(values, [tail, 100 - tail], axis=0)


def interval(
    scores: Scores,
    aggregate: Aggregate = iqm,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Estimate:
    """``aggregate(scores)`` with its stratified bootstrap percentile interval."""
    tasks = _tasks(scores)
    rng = np.random.default_rng(seed)
    replicates = [aggregate(_resample(tasks, rng)) for _ in range(reps)]
    low, high = _percentiles(replicates, confidence)
    return Estimate(aggregate(tasks), float(low), float(high))


def performance_profile(
    scores: Scores,
    thresholds: npt.ArrayLike,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """For each threshold, the share of runs scoring above it (each task's share, averaged
    over tasks), and the low and high ends of its interval."""
    tasks = _tasks(scores)
    taus = np.asarray(thresholds, dtype=np.float64).reshape(-1)

    def profile(sample: Sequence[npt.NDArray[np.float64]]) -> npt.NDArray[np.float64]:
        return np.mean([(runs[:, None] > taus[None, :]).mean(axis=0) for runs in sample], axis=0)

    rng = np.random.default_rng(seed)
    replicates = np.stack([profile(_resample(tasks, rng)) for _ in range(reps)])
    low, high = _percentiles(replicates, confidence)
    return profile(tasks), np.asarray(low), np.asarray(high)


def probability_of_improvement(
    ours: Scores, theirs: Scores, reps: int = 2000, confidence: float = 0.95, seed: int = 0
) -> Estimate:
    """P(a run of ``ours`` outscores a run of ``theirs``), averaged over tasks (the same tasks,
    in the same order), ties counting half; with its stratified bootstrap interval."""
    x, y = _tasks(ours), _tasks(theirs)
    if len(x) != len(y):
        raise ValueError(f"both methods need the same tasks: got {len(x)} and {len(y)} tasks")

    def chance(
        xs: Sequence[npt.NDArray[np.float64]], ys: Sequence[npt.NDArray[np.float64]]
    ) -> float:
        return float(np.mean([((a[:, None] > b[None, :]) + 0.5 * (a[:, None] == b[None, :])).mean()
                              for a, b in zip(xs, ys, strict=True)]))  # fmt: skip

    rng = np.random.default_rng(seed)
    replicates = [chance(_resample(x, rng), _resample(y, rng)) for _ in range(reps)]
    low, high = _percentiles(replicates, confidence)
    return Estimate(chance(x, y), float(low), float(high))
