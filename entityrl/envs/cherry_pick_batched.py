"""CherryPick as a natively batched simulator: every copy's bowl is one row of a numpy array."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from entityrl.env import (
    BatchedEnvironment,
    SelectEntityActionSpace,
    VecObs,
    VecSelectEntityMask,
)
from entityrl.envs.cherry_pick import (
    CHERRY_PICK_SPACE,
    check_num_cherries,
    cherry_qualities,
    describe_bowl,
)
from entityrl.ragged import RaggedArray, ranges


class CherryPickBatched(BatchedEnvironment):
    """``num_envs`` copies of :class:`~entityrl.envs.cherry_pick.CherryPick`, stepped at once.

    Same spaces and rules: the player selects one remaining cherry per step, is rewarded its
    quality, and the episode ends after ``num_cherries // 2`` picks. Cherries stay in a
    ``(num_envs, num_cherries)`` array; a boolean array marks those still in the bowl, so the
    remaining cherries keep their order, as in the per-environment version.
    Optimal return: 1.0.
    """

    def __init__(
        self,
        num_envs: int,
        seed: int | None = None,
        num_cherries: int = 32,
        *,
        validate: bool = False,
    ) -> None:
        check_num_cherries("CherryPickBatched", num_cherries)
        super().__init__(num_envs, seed, validate=validate)
        self.num_cherries = num_cherries
        self.num_picks = num_cherries // 2
        self.obs_space = CHERRY_PICK_SPACE
        self.action_space = {"Pick Cherry": SelectEntityActionSpace()}
        self.quality = np.zeros((num_envs, num_cherries))
        self.remaining = np.ones((num_envs, num_cherries), dtype=np.bool_)
        self.steps = np.zeros(num_envs, dtype=np.int64)

    def reset_envs(self, envs: npt.NDArray[np.int64]) -> None:
        self.quality[envs] = cherry_qualities(self.rng, (envs.shape[0], self.num_cherries))
        self.remaining[envs] = True
        self.steps[envs] = 0

    def step(
        self, actions: Mapping[str, RaggedArray]
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.bool_]]:
        reward = np.zeros(self.num_envs, dtype=np.float32)
        pick = actions.get("Pick Cherry")
        if pick is not None and pick.items:
            rows = pick.row_index()
            # The k-th remaining cherry of a row is the column where its running count reaches k+1.
            seen = np.cumsum(self.remaining[rows], axis=1)
            columns = (seen <= pick.data[:, :1]).sum(axis=1)
            np.add.at(reward, rows, self.quality[rows, columns])
            self.remaining[rows, columns] = False
        self.steps += 1
        return reward, self.steps >= self.num_picks

    def observe(self) -> VecObs:
        n = self.num_envs
        cherries = self.remaining.sum(axis=1)
        ones = np.ones(n, dtype=np.int64)
        # The player comes after the row's cherries, in observation-space order.
        actors = RaggedArray(cherries.reshape(-1, 1), ones)
        actees = RaggedArray(ranges(np.zeros(n, dtype=np.int64), cherries).reshape(-1, 1), cherries)
        return VecObs(
            features={
                "Cherry": RaggedArray(
                    self.quality[self.remaining].astype(np.float32).reshape(-1, 1), cherries
                ),
                "Player": RaggedArray(np.zeros((n, 0), dtype=np.float32), ones),
            },
            global_features=np.zeros((n, 0), dtype=np.float32),
            action_masks={"Pick Cherry": VecSelectEntityMask(actors, actees)},
            reward=np.zeros(n, dtype=np.float32),
            done=np.zeros(n, dtype=np.bool_),
        )

    def render(self, index: int = 0) -> str:
        bowl = self.quality[index, self.remaining[index]]
        return describe_bowl(int(self.steps[index]), self.num_picks, bowl)
