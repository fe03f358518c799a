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

from typing import Any

import numpy as np
import numpy.typing as npt

from entityrl.algorithms.common.moments import Combine, RunningMoments

EPSILON = 1e-8


class RewardScaler:
    """Running scale of the discounted return of ``num_envs`` environments."""

    def __init__(self, num_envs: int, gamma: float) -> None:
        self.gamma = gamma
        self.returns = np.zeros(num_envs, dtype=np.float64)
        self.moments = RunningMoments()

    @property
    def std(self) -> float:
        return float(np.sqrt(self.moments.variance() + EPSILON))

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
        self.moments.update(seen, combine)
        return (rewards / self.std).astype(np.float32)

    def state_dict(self) -> dict[str, Any]:
        return {"returns": self.returns.tolist(), **self.moments.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.returns = np.asarray(state["returns"], dtype=np.float64)
        self.moments.load_state_dict(state)
