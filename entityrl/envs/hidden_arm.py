"""HiddenArm: a bandit whose paying arm is the task, the smallest meta-RL task family."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from entityrl.env.batched import BatchedEnvironment
from entityrl.env.spaces import GlobalCategoricalActionSpace, ObsSpace
from entityrl.env.tasks import TaskFamily
from entityrl.env.vec_obs import VecCategoricalMask, VecObs
from entityrl.ragged import RaggedArray

IntArray = npt.NDArray[np.int64]


class HiddenArm(TaskFamily, BatchedEnvironment):
    """``arms`` arms (a global ``pull`` action); one of them pays 1, the others nothing. An
    episode is ``pulls`` pulls; the observation (the share of the pulls made) says nothing of
    which arm pays.

    A task is the paying arm (drawn from the task's generator, see
    :mod:`entityrl.env.tasks`); with ``task=None`` every episode draws a new one. Within one
    episode of one pull no policy expects more than ``1 / arms``; over the episodes of one task
    (a meta-RL trial, :class:`~entityrl.envs.meta.Trials`) a policy that remembers what paid
    earns 1 from the episode after it found the arm on.

    Optimal return: ``pulls`` for a policy that knows the paying arm; one that does not can
    find it by trying, and within one pull expects ``1 / arms`` at best.
    """

    def __init__(
        self,
        num_envs: int = 1,
        seed: int | None = None,
        *,
        arms: int = 2,
        pulls: int = 1,
        task: int | None = None,
        validate: bool = False,
    ) -> None:
        for name, value, low in (("arms", arms, 2), ("pulls", pulls, 1)):
            if value < low:
                raise ValueError(f"HiddenArm: {name} must be >= {low}, got {value}")
        super().__init__(num_envs, seed, validate=validate)
        self.pulls = pulls
        self.init_tasks(num_envs, task)
        self.obs_space = ObsSpace(global_features=["pulled"])
        self.action_space = {
            "pull": GlobalCategoricalActionSpace([chr(ord("A") + i) for i in range(arms)])
        }
        self.arms = arms
        self.paying = np.zeros(num_envs, dtype=np.int64)
        self.t = np.zeros(num_envs, dtype=np.int64)

    def reset_envs(self, envs: IntArray) -> None:
        for group, rng in self.task_draws(envs, self.rng):
            self.paying[group] = rng.integers(0, self.arms, size=group.shape[0])
        self.t[envs] = 0

    def step(
        self, actions: Mapping[str, RaggedArray]
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.bool_]]:
        pulled = actions["pull"].data[:, 0]
        self.t += 1
        return (pulled == self.paying).astype(np.float32), self.t >= self.pulls

    def observe(self) -> VecObs:
        n = self.num_envs
        rows = RaggedArray(np.zeros((n, 1), dtype=np.int64), np.ones(n, dtype=np.int64))
        return VecObs(
            features={},
            global_features=(self.t / self.pulls).astype(np.float32)[:, None],
            action_masks={"pull": VecCategoricalMask(rows)},
            reward=np.zeros(n, dtype=np.float32),
            done=np.zeros(n, dtype=np.bool_),
        )

    def render(self, index: int = 0) -> str:
        paying = chr(ord("A") + int(self.paying[index]))
        return f"pull {self.t[index]}/{self.pulls}; arm {paying} pays"
