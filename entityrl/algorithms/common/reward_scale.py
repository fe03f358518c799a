"""Reward normalization: rewards divided by the running standard deviation of the discounted
return, so that the value head and the advantages see returns of about unit scale whatever the
environment's reward units (``ppo.norm_reward``; Stable-Baselines3's ``VecNormalize`` and
CleanRL's ``NormalizeReward`` do the same).

Each environment keeps its discounted return so far, ``G <- gamma * G + r`` (reset at the end
of an episode); the variance of all ``G`` seen is tracked with Chan et al.'s parallel update,
summed over the processes of a data-parallel run so all of them scale alike. Rewards are only
scaled, never shifted: shifting would change which policy is best in episodes of varying
length. Episode returns reported in the logs stay in the environment's own units.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

Combine = Callable[[npt.ArrayLike], npt.NDArray[np.float64]]

EPSILON = 1e-8


class RewardScaler:
    """Running scale of the discounted return of ``num_envs`` environments."""

    def __init__(self, num_envs: int, gamma: float) -> None:
        self.gamma = gamma
        self.returns = np.zeros(num_envs, dtype=np.float64)
        self.count = 0.0
        self.mean = 0.0
        self.m2 = 0.0  # sum of squared deviations from the mean

    @property
    def std(self) -> float:
        variance = self.m2 / self.count if self.count > 0 else 1.0
        return float(np.sqrt(variance + EPSILON))

    def __call__(
        self,
        rewards: npt.NDArray[np.float32],
        dones: npt.NDArray[np.bool_],
        combine: Combine | None = None,
    ) -> npt.NDArray[np.float32]:
        """``rewards`` (steps, envs) divided by the return's running scale, after taking this
        rollout's returns into the statistics (``combine`` sums over processes)."""
        seen = np.empty(rewards.shape, dtype=np.float64)
        for t in range(rewards.shape[0]):  # one step at a time: each depends on the last
            self.returns = self.returns * self.gamma + rewards[t]
            seen[t] = self.returns
            self.returns[dones[t]] = 0.0
        # This rollout's count, sum and sum of squares, summed over processes if several.
        part = np.array([seen.size, seen.sum(), np.square(seen).sum()], dtype=np.float64)
        count, total, squares = combine(part) if combine is not None else part
        mean = total / count
        m2 = squares - count * mean**2
        delta = mean - self.mean
        merged = self.count + count
        self.m2 += m2 + delta**2 * self.count * count / merged
        self.mean += delta * count / merged
        self.count = merged
        return (rewards / self.std).astype(np.float32)

    def state_dict(self) -> dict[str, Any]:
        # Plain floats: checkpoints load with weights_only=True, which refuses numpy scalars.
        return {"returns": self.returns.tolist(), "count": float(self.count),
                "mean": float(self.mean), "m2": float(self.m2)}  # fmt: skip

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.returns = np.asarray(state["returns"], dtype=np.float64)
        self.count, self.mean, self.m2 = state["count"], state["mean"], state["m2"]
