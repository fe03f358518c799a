"""Aggregate statistics over runs: exact values on small cases, intervals that behave."""

from __future__ import annotations

import numpy as np
import pytest

from entityrl import stats


def test_iqm_is_the_mean_of_the_middle_half_of_all_runs() -> None:
    scores = [[1.0, 8.0, 3.0], [2.0, 7.0], [4.0, 6.0, 5.0]]  # 1..8 over tasks of 2-3 runs
    assert stats.iqm(scores) == pytest.approx(4.5)  # mean of 3, 4, 5, 6
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    many = [rng.normal(size=n) for n in (5, 7, 9)]
    assert stats.iqm(many) == pytest.approx(scipy_stats.trim_mean(np.concatenate(many), 0.25))


def test_mean_median_and_optimality_gap() -> None:
    scores = [[0.0, 1.0], [0.5, 0.5], [2.0, 0.0]]
    assert stats.mean(scores) == pytest.approx(2 / 3)
    assert stats.median(scores) == pytest.approx(0.5)
    # Shortfalls from 1: 1, 0, 0.5, 0.5, 0, 1.
    assert stats.optimality_gap(scores) == pytest.approx(0.5)
    assert stats.optimality_gap(scores, target=2.0) == pytest.approx(8 / 6)


def test_intervals_hold_the_estimate_shrink_with_runs_and_repeat_by_seed() -> None:
    rng = np.random.default_rng(1)
    few = [rng.normal(0.5, 0.2, 3) for _ in range(4)]
    many = [rng.normal(0.5, 0.2, 100) for _ in range(4)]
    narrow, wide = stats.interval(many, reps=500), stats.interval(few, reps=500)
    for estimate in (narrow, wide):
        assert estimate.low <= estimate.value <= estimate.high
    assert narrow.high - narrow.low < (wide.high - wide.low) / 2
    assert stats.interval(few, seed=3) == stats.interval(few, seed=3)
    same = stats.interval([[0.7, 0.7], [0.7]], aggregate=stats.mean)
    assert (same.value, same.low, same.high) == pytest.approx((0.7, 0.7, 0.7))
    assert str(same) == "0.700 [0.700, 0.700]"


def test_the_bootstrap_keeps_each_tasks_runs_within_the_task() -> None:
    # Task 0 always scores 0, task 1 always 1: any stratified replicate has mean 0.5 exactly
    # (a pooled bootstrap would not).
    estimate = stats.interval([[0.0] * 3, [1.0] * 5], aggregate=stats.mean, reps=200)
    assert (estimate.low, estimate.high) == pytest.approx((0.5, 0.5))


def test_performance_profile_is_the_share_of_runs_above_each_threshold() -> None:
    profile, low, high = stats.performance_profile([[0.1, 0.5, 0.9], [1.0]], [0.0, 0.5, 1.0])
    np.testing.assert_allclose(profile, [1.0, (1 / 3 + 1) / 2, 0.0])
    assert (low <= profile + 1e-12).all() and (profile <= high + 1e-12).all()


def test_probability_of_improvement() -> None:
    better, worse = [[0.9, 0.8], [0.7]], [[0.1, 0.2], [0.3]]

    def chance(ours, theirs):  # type: ignore[no-untyped-def]
        return stats.probability_of_improvement(ours, theirs, reps=200)

    assert chance(better, worse).value == 1.0
    assert chance(worse, better).value == 0.0
    assert chance(better, better).value == 0.5
    mixed = chance([[1.0, 0.0]], [[0.5]])
    assert mixed.value == 0.5 and mixed.low == 0.0 and mixed.high == 1.0


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: stats.iqm([]), "at least one task and one run per task, got run counts \\[\\]"),
        (lambda: stats.iqm([[1.0], []]), "got run counts \\[1, 0\\]"),
        (lambda: stats.mean([[1.0, float("nan")]]), "must be finite"),
        (
            lambda: stats.interval([[1.0]], confidence=95),
            "confidence must be in \\(0, 1\\), got 95",
        ),
        (
            lambda: stats.probability_of_improvement([[1.0]], [[1.0], [2.0]]),
            "same tasks: got 1 and 2",
        ),
    ],
)
def test_bad_scores_are_refused(call, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=message):
        call()
