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
    ratios: npt.NDArray[np.float32] | None = None,
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """Advantages and returns, each (steps, envs).

    ``dones[t]`` marks that the episode ended with the transition of step ``t``: its value is
    not bootstrapped from the next observation, which already belongs to a new episode.
    ``next_values`` is the value of the observation after the last step.

    ``ratios`` ((steps, envs), each in [0, 1]): for steps an older policy took, the importance
    ratio of the learner's policy to that one, truncated at 1. The returns are then V-trace's
    targets (Espeholt et al. 2018, with the lambda trace: each step's error and the trace
    through it weighted by its ratio) and the advantages their errors, which weigh each step
    by its own ratio as V-trace's policy gradient does. All ratios 1: exactly GAE.
    """
    steps = rewards.shape[0]
    advantages = np.zeros_like(rewards, dtype=np.float32)
    running = np.zeros(rewards.shape[1], dtype=np.float32)
    for t in reversed(range(steps)):
        following = next_values if t == steps - 1 else values[t + 1]
        alive = 1.0 - dones[t].astype(np.float32)
        delta = rewards[t] + gamma * following * alive - values[t]
        running = delta + gamma * gae_lambda * alive * running
        if ratios is not None:
            running = ratios[t] * running
        advantages[t] = running
    return advantages, advantages + values
