"""Corridor: a long walk with one reward at the far end (a sparse-reward exploration test)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from entityrl.env import (
    BatchedEnvironment,
    CategoricalActionSpace,
    Entity,
    ObsSpace,
    VecCategoricalMask,
    VecObs,
)
from entityrl.ragged import RaggedArray


class Corridor(BatchedEnvironment):
    """A walker starts at cell 0 of a corridor of ``length`` cells and steps left or right
    (a wall stops it at cell 0); reaching the last cell ends the episode with reward 1, the
    only reward there is. Episodes are cut off after ``max_steps`` steps (default: twice the
    length), with nothing, marked ``truncated`` (the walker does not see the time).

    The walker sees its cell as a fraction of the corridor (``position``). A policy that moves
    at random reaches the end of a long corridor almost never (a random walk covers about the
    square root of its steps), so it has nothing to learn from: an exploration bonus such as
    random network distillation (``rnd.coef``) is what gets it there.
    Optimal return: 1.0.
    """

    def __init__(
        self, num_envs: int, seed: int | None = None, length: int = 40, max_steps: int = 0
    ) -> None:
        if length < 2:
            raise ValueError(f"Corridor: length must be >= 2, got {length}")
        if max_steps < 0:
            raise ValueError(
                f"Corridor: max_steps must be >= 0 (0: twice the length), got {max_steps}"
            )
        super().__init__(num_envs, seed)
        self.length = length
        self.max_steps = max_steps or 2 * length
        self.obs_space = ObsSpace(entities={"Walker": Entity(["position"])})
        self.action_space = {"Move": CategoricalActionSpace(["left", "right"])}
        self.cell = np.zeros(num_envs, dtype=np.int64)
        self.steps = np.zeros(num_envs, dtype=np.int64)

    def reset_envs(self, envs: npt.NDArray[np.int64]) -> None:
        self.cell[envs] = 0
        self.steps[envs] = 0

    def step(
        self, actions: Mapping[str, RaggedArray]
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.bool_]]:
        move = actions["Move"].data[:, 0]  # one walker per row
        self.cell = np.maximum(self.cell + 2 * move - 1, 0)
        self.steps += 1
        arrived = self.cell >= self.length - 1
        return arrived.astype(np.float32), arrived | (self.steps >= self.max_steps)

    def truncated(self, ended: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        # The walker does not see the time: an ending short of the goal is the time limit's.
        return self.cell[ended] < self.length - 1

    def observe(self) -> VecObs:
        n = self.num_envs
        ones = np.ones(n, dtype=np.int64)
        position = (self.cell / (self.length - 1)).astype(np.float32).reshape(-1, 1)
        return VecObs(
            features={"Walker": RaggedArray(position, ones)},
            global_features=np.zeros((n, 0), dtype=np.float32),
            action_masks={
                "Move": VecCategoricalMask(RaggedArray(np.zeros((n, 1), np.int64), ones))
            },
            reward=np.zeros(n, dtype=np.float32),
            done=np.zeros(n, dtype=np.bool_),
        )

    def render(self, index: int = 0) -> str:
        cells = ["."] * self.length
        cells[-1] = "G"
        cells[int(self.cell[index])] = "@"
        return "".join(cells)
