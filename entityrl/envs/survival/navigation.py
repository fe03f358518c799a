"""Navigation to a river spot: the survival world's meta-RL task family (Eden-navigation-40x40).

The map holds nothing but rivers. The agent starts in the centre and moves by an x and a y offset
in [-2, 2] per step (right and up are positive); the reward is the decrease of its squared
distance to the target river spot. An episode ends on the target or after ``horizon`` steps.

A task is one map with its target. With ``task=None`` every episode draws a new task from the
environment's generator (the task distribution); with ``task=k`` every copy and every episode
plays task ``k`` (its map and target depend on ``k`` only), for adapting to one task. As a
:class:`~entityrl.env.tasks.TaskFamily`, each copy's task can be set apart
(:meth:`~entityrl.env.tasks.TaskFamily.set_tasks`), as meta-RL's trials do.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from entityrl.env.batched import BatchedEnvironment
from entityrl.env.spaces import CategoricalActionSpace, Entity, ObsSpace
from entityrl.env.tasks import TaskFamily
from entityrl.env.vec_obs import VecCategoricalMask, VecObs
from entityrl.ragged import RaggedArray

IntArray = npt.NDArray[np.int64]


class RiverNavigation(TaskFamily, BatchedEnvironment):
    """Reach a target river spot on a ``size`` x ``size`` map (see the module docstring).

    Optimal return: the squared distance from the centre to the target (the rewards telescope
    to the initial minus the final squared distance).
    """

    def __init__(
        self,
        num_envs: int = 1,
        seed: int | None = None,
        *,
        size: int = 40,
        horizon: int = 20,
        max_offset: int = 2,
        rivers: int = 4,
        task: int | None = None,
        validate: bool = False,
    ) -> None:
        for name, value, low in (
            ("size", size, 3),
            ("horizon", horizon, 1),
            ("max_offset", max_offset, 1),
            ("rivers", rivers, 1),
        ):
            if value < low:
                raise ValueError(f"RiverNavigation: {name} must be >= {low}, got {value}")
        super().__init__(num_envs, seed, validate=validate)
        self.size = size
        self.horizon = horizon
        self.rivers = rivers
        self.init_tasks(num_envs, task)
        offsets = range(-max_offset, max_offset + 1)
        self.offsets = np.array(list(offsets), dtype=np.int64)
        labels = [f"{d:+d}" for d in offsets]
        self.obs_space = ObsSpace(entities={"Agent": Entity(["x", "y"])})
        self.action_space = {
            "move_x": CategoricalActionSpace(labels),
            "move_y": CategoricalActionSpace(labels),
        }
        self.water = np.zeros((num_envs, size, size), dtype=np.bool_)
        self.target = np.zeros((num_envs, 2), dtype=np.int64)
        self.position = np.zeros((num_envs, 2), dtype=np.int64)
        self.t = np.zeros(num_envs, dtype=np.int64)

    def reset_envs(self, envs: IntArray) -> None:
        for group, rng in self.task_draws(envs, self.rng):
            water, target = self._draw_tasks(group.shape[0], rng)
            self.water[group] = water
            self.target[group] = target
        self.position[envs] = self.size // 2
        self.t[envs] = 0

    def _draw_tasks(
        self, k: int, rng: np.random.Generator
    ) -> tuple[npt.NDArray[np.bool_], IntArray]:
        """``k`` maps of meandering rivers, each crossing the map, and a target on one of them."""
        size, rivers = self.size, self.rivers
        along = np.broadcast_to(np.arange(size), (k, rivers, size))
        start = rng.integers(0, size, size=(k, rivers, 1))
        across = np.clip(
            start + np.cumsum(rng.integers(-1, 2, size=(k, rivers, size)), -1), 0, size - 1
        )
        vertical = rng.random((k, rivers, 1)) < 0.5
        xs = np.where(vertical, across, along)
        ys = np.where(vertical, along, across)
        water = np.zeros((k, size, size), dtype=np.bool_)
        water[np.arange(k)[:, None, None], ys, xs] = True
        river = rng.integers(0, rivers, size=k)
        spot = rng.integers(0, size, size=k)
        target = np.stack([xs[np.arange(k), river, spot], ys[np.arange(k), river, spot]], axis=1)
        return water, target

    def step(
        self, actions: Mapping[str, RaggedArray]
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.bool_]]:
        move = np.stack(
            [
                self.offsets[actions["move_x"].data[:, 0]],
                self.offsets[actions["move_y"].data[:, 0]],
            ],
            axis=1,
        )
        before = self._squared_distance()
        self.position = np.clip(self.position + move, 0, self.size - 1)
        after = self._squared_distance()
        self.t += 1
        done = (after == 0) | (self.t >= self.horizon)
        return (before - after).astype(np.float32), done

    def episode_metrics(self, ended: IntArray) -> dict[str, npt.NDArray[np.float64]]:
        distance = np.sqrt(self._squared_distance()[ended])
        return {"reached": (distance == 0).astype(np.float64), "final_distance": distance}

    def _squared_distance(self) -> npt.NDArray[np.float64]:
        return ((self.position - self.target) ** 2).sum(axis=1).astype(np.float64)

    def observe(self) -> VecObs:
        n = self.num_envs
        ones = np.ones(n, dtype=np.int64)
        actors = RaggedArray(np.zeros((n, 1), dtype=np.int64), ones)
        return VecObs(
            features={"Agent": RaggedArray(self.position.astype(np.float32), ones)},
            global_features=np.zeros((n, 0), dtype=np.float32),
            action_masks={name: VecCategoricalMask(actors) for name in self.action_space},
            reward=np.zeros(n, dtype=np.float32),
            done=np.zeros(n, dtype=np.bool_),
        )

    def render(self, index: int = 0) -> str:
        grid = np.where(self.water[index], "~", ".")
        grid[self.target[index, 1], self.target[index, 0]] = "X"
        grid[self.position[index, 1], self.position[index, 0]] = "@"
        x, y = self.position[index]
        tx, ty = self.target[index]
        status = f"step {self.t[index]}/{self.horizon}  agent ({x}, {y})  target ({tx}, {ty})"
        return "\n".join(["".join(row) for row in grid[::-1]] + [status])
