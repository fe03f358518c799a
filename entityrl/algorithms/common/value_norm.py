"""Value normalization (``ppo.norm_value``): the value head learns the value targets shifted
by their running mean and divided by their running standard deviation, and its outputs are
mapped back before they estimate advantages.

Why: the value head starts near 0 and PPO clips each update of a value to ``ppo.clip_coef``
around the rollout's estimate, so where the returns sit far from 0 (a reward that is negative
at every step, as in mpe2's simple_spread, even after ``ppo.norm_reward`` scales it) the
values take tens of iterations to reach their level. Until then the values bootstrapped where
a time limit cuts an episode off are too high, and states that look late in an episode look
good: on simple_spread the agents learned to drift away together, below random play
(benchmarks/RESULTS.md, "mpe2 simple_spread below random play"). Normalized targets have mean
0 and standard deviation 1 from the first update on, whatever the task's return level, and the
clip then bounds a step in units of the returns' spread. MAPPO (Yu et al. 2022) found the same
normalization important for PPO on MPE and SMAC.

The statistics are those of every target seen (Chan et al.'s parallel update, summed over the
processes of a data-parallel run); the network holds no statistics, so checkpoints of networks
and exported policies are unchanged, and the normalizer is kept in the algorithm's state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from entityrl.algorithms.common.moments import Combine, RunningMoments
from entityrl.algorithms.common.rollout import Rollout


class ValueNormalizer:
    """Maps the value head's outputs to values and value targets to the head's units."""

    def __init__(self) -> None:
        self.moments = RunningMoments()

    @property
    def std(self) -> float:
        # Never below 1: in a task of rare rewards the targets' spread is tiny until the first
        # successes, and dividing by it would magnify those into huge value errors, whose
        # gradients then crowd out the policy's (DoorKey-6x6 failed 2 of 3 seeds so).
        return max(float(np.sqrt(self.moments.variance())), 1.0)

    def denormalize(self, outputs: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Values from the head's ``outputs``."""
        return (outputs.astype(np.float64) * self.std + self.moments.mean).astype(np.float32)

    def normalize(self, values: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """The head's units of ``values``."""
        return ((values.astype(np.float64) - self.moments.mean) / self.std).astype(np.float32)

    def estimate(
        self, rollout: Rollout, estimate: Callable[[Rollout], None], combine: Combine | None
    ) -> None:
        """Run ``estimate(rollout)`` (which sets the rollout's advantages and returns from its
        values) on the rollout's values mapped back from the head's outputs; then take the
        returns of the rows learned from into the statistics, and leave the rollout's returns
        in the head's units (the targets of the value loss) and its values as the head gave
        them (the centre of the value clip)."""
        outputs = rollout.values
        rollout.values = self.denormalize(outputs)
        rollout.next_values = self.denormalize(rollout.next_values)
        if rollout.cut is not None:  # only the values of episodes cut off are bootstrapped
            rollout.bootstrap = np.where(
                rollout.cut, self.denormalize(rollout.bootstrap), np.float32(0.0)
            )
        estimate(rollout)
        learned = rollout.learned()
        self.moments.update(
            rollout.returns if learned is None else rollout.returns[learned], combine
        )
        rollout.returns = self.normalize(rollout.returns)
        rollout.values = outputs

    def state_dict(self) -> dict[str, Any]:
        return self.moments.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.moments.load_state_dict(state)
