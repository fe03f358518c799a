"""Generalized advantage estimation over a (steps, envs) block of transitions."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


def gae(
    rewards: npt.NDArray[np.float32],
    values: npt.NDArray[np.float32],
    dones: npt.NDArray[np.bool_],
    next_values: npt.NDArray[np.float32],
    gamma: float,
    gae_lambda: float,
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """Advantages and returns, each (steps, envs).

    ``dones[t]`` marks that the episode ended with the transition of step ``t``: its value is
    not bootstrapped from the next observation, which already belongs to a new episode.
    ``next_values`` is the value of the observation after the last step.
    """
    steps = rewards.shape[0]
    advantages = np.zeros_like(rewards, dtype=np.float32)
    running = np.zeros(rewards.shape[1], dtype=np.float32)
    for t in reversed(range(steps)):
        following = next_values if t == steps - 1 else values[t + 1]
        alive = 1.0 - dones[t].astype(np.float32)
        delta = rewards[t] + gamma * following * alive - values[t]
        running = delta + gamma * gae_lambda * alive * running
        advantages[t] = running
    return advantages, advantages + values
