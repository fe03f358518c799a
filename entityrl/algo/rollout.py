"""The samples of one rollout, stored ragged: rows are (step, env), entities and actors ragged."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch

from entityrl.env.vec_obs import VecObs
from entityrl.ragged import RaggedArray


@dataclass
class Minibatch:
    """Some rows of a rollout, ready for the loss (per-actor data ragged like the actions)."""

    obs: VecObs
    actions: dict[str, RaggedArray]
    logprobs: dict[str, torch.Tensor]  # per action, one old log-probability per actor
    actor_rows: dict[str, torch.Tensor]  # per action, the minibatch row of each actor
    values: torch.Tensor  # (rows,) value estimates at collection time
    advantages: torch.Tensor  # (rows,)
    returns: torch.Tensor  # (rows,)

    @property
    def num_rows(self) -> int:
        return self.obs.num_rows

    def to(self, device: torch.device) -> Minibatch:
        """The loss's tensors on ``device`` (the observations and actions stay numpy: the
        network prepares and moves them itself)."""
        if device.type == "cpu":
            return self
        return Minibatch(
            obs=self.obs,
            actions=self.actions,
            logprobs={name: lp.to(device) for name, lp in self.logprobs.items()},
            actor_rows={name: rows.to(device) for name, rows in self.actor_rows.items()},
            values=self.values.to(device),
            advantages=self.advantages.to(device),
            returns=self.returns.to(device),
        )


@dataclass
class Rollout:
    """Everything collected in one rollout; row ``t * num_envs + e`` is env ``e`` at step ``t``."""

    obs: VecObs
    actions: dict[str, RaggedArray]
    logprobs: dict[str, RaggedArray]  # float32, one per actor, laid out like ``actions``
    values: npt.NDArray[np.float32]  # (rows,)
    rewards: npt.NDArray[np.float32]  # (steps, envs)
    dones: npt.NDArray[np.bool_]  # (steps, envs): the episode ended with this step
    advantages: npt.NDArray[np.float32]  # (rows,)
    returns: npt.NDArray[np.float32]  # (rows,)
    metrics: dict[str, npt.NDArray[np.float64]]  # values of episodes that ended

    @property
    def num_rows(self) -> int:
        return self.obs.num_rows

    def minibatch(
        self, rows: npt.NDArray[np.int64], advantages: npt.NDArray[np.float32]
    ) -> Minibatch:
        """The given rows; ``advantages`` (one per row, e.g. normalized) replace the stored ones."""
        actions = {name: a.take(rows) for name, a in self.actions.items()}
        return Minibatch(
            obs=self.obs.take(rows),
            actions=actions,
            logprobs={
                name: torch.from_numpy(lp.take(rows).data[:, 0])
                for name, lp in self.logprobs.items()
            },
            actor_rows={name: torch.from_numpy(a.row_index()) for name, a in actions.items()},
            values=torch.from_numpy(self.values[rows]),
            advantages=torch.from_numpy(advantages),
            returns=torch.from_numpy(self.returns[rows]),
        )
