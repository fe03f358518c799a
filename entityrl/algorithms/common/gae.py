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


def decision_gae(
    rewards: npt.NDArray[np.float32],
    values: npt.NDArray[np.float32],
    dones: npt.NDArray[np.bool_],
    decides: npt.NDArray[np.bool_],
    next_values: npt.NDArray[np.float32],
    next_decides: npt.NDArray[np.bool_],
    gamma: float,
    gae_lambda: float,
    ratios: npt.NDArray[np.float32] | None = None,
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32], npt.NDArray[np.bool_]]:
    """GAE over each row's own decisions (see :mod:`entityrl.env.decisions`): advantages,
    returns and which steps are samples, each (steps, envs).

    ``decides[t]`` marks the rows whose agent decided at step ``t``. A decision's reward is
    the sum of its row's rewards from its step up to the step before the row's next decision,
    or up to the end of its episode when that comes first (the decision then ends the
    episode); ``gamma`` and ``gae_lambda`` apply once per decision, as if the steps between
    were not there. Rewards on steps before an episode's first decision belong to no decision.
    Non-decision steps are no samples (advantage 0, return their value). The last decision of
    a row is a sample only if its period is complete within the rollout: it ended its episode,
    or the row decides on the observation after the last step (``next_decides``; it is
    bootstrapped from ``next_values``); otherwise it is no sample, and its value bootstraps the
    decision before it, as ``next_values`` does in :func:`gae`.

    ``ratios`` ((steps, envs), each in [0, 1]) as for :func:`gae` (V-trace), one per decision:
    the ratio of a decision's row weighs its error and the trace through it (rows without a
    decision have no actors, and their ratios weigh nothing). All ratios 1: exactly the
    estimate without them.
    """
    steps = rewards.shape[0]
    advantages = np.zeros_like(rewards, dtype=np.float32)
    samples = np.zeros(rewards.shape, dtype=np.bool_)
    # Per row, going backwards: the rewards from this step to the end of the period that
    # contains it, whether that period ended the episode, whether it is complete, and the
    # value and advantage of the decision after it.
    period_reward = np.zeros(rewards.shape[1], dtype=np.float32)
    ends = np.zeros(rewards.shape[1], dtype=np.bool_)
    complete = np.asarray(next_decides, dtype=np.bool_).copy()
    following = np.asarray(next_values, dtype=np.float32).copy()
    running = np.zeros(rewards.shape[1], dtype=np.float32)
    for t in reversed(range(steps)):
        done = dones[t]
        # An episode's end closes the period it falls in: later rewards are the next episode's.
        period_reward = np.where(done, rewards[t], rewards[t] + period_reward)
        ends |= done
        complete |= done
        decided = decides[t]
        alive = 1.0 - ends.astype(np.float32)
        delta = period_reward + gamma * following * alive - values[t]
        advantage = delta + gamma * gae_lambda * alive * running
        if ratios is not None:
            advantage = ratios[t] * advantage
        samples[t] = decided & complete
        advantages[t] = np.where(samples[t], advantage, 0.0)
        # The decision before this one bootstraps from it; from an incomplete one only its
        # value (its advantage is unknown).
        following = np.where(decided, values[t], following)
        running = np.where(decided, np.where(complete, advantage, 0.0), running)
        period_reward[decided] = 0.0
        ends &= ~decided
        complete |= decided
    return advantages, advantages + values, samples
