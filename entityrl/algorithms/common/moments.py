"""Running mean and variance of a stream of numbers, merged a batch at a time (Chan et al.'s
parallel update), for the running scales of rewards and values."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

Combine = Callable[[npt.ArrayLike], npt.NDArray[np.float64]]
"""Sums an array over the processes of a data-parallel run (the identity in one process)."""


class RunningMoments:
    """Count, mean and sum of squared deviations of every value seen."""

    def __init__(self) -> None:
        self.count = 0.0
        self.mean = 0.0
        self.m2 = 0.0  # sum of squared deviations from the mean

    def variance(self, empty: float = 1.0) -> float:
        """The variance of the values seen (``empty`` before any)."""
        return self.m2 / self.count if self.count > 0 else empty

    def update(self, values: npt.ArrayLike, combine: Combine | None = None) -> None:
        """Take ``values`` into the statistics (``combine``: summed over processes first)."""
        seen = np.asarray(values, dtype=np.float64)
        part = np.array([seen.size, seen.sum(), np.square(seen).sum()], dtype=np.float64)
        count, total, squares = combine(part) if combine is not None else part
        if count == 0:
            return
        mean = total / count
        m2 = squares - count * mean**2
        delta = mean - self.mean
        merged = self.count + count
        # Python floats (doubles, as numpy's would be): arithmetic with them keeps the dtype
        # of the arrays it meets, before and after a checkpoint's round trip alike.
        self.m2 = float(self.m2 + (m2 + delta**2 * self.count * count / merged))
        self.mean = float(self.mean + delta * count / merged)
        self.count = float(merged)

    def state_dict(self) -> dict[str, Any]:
        # Plain floats: checkpoints load with weights_only=True, which refuses numpy scalars.
        return {"count": float(self.count), "mean": float(self.mean), "m2": float(self.m2)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.count, self.mean, self.m2 = state["count"], state["mean"], state["m2"]
