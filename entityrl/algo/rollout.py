"""The samples of one rollout, stored ragged: rows are (step, env), entities and actors ragged."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import torch

from entityrl.algo.gae import gae
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
    """Everything collected in one rollout; row ``t * num_envs + e`` is env ``e`` at step ``t``.

    The sampler fills in what happened; the algorithm then chooses the rewards to learn from
    (the environment's, scaled, with a bonus, or a learned one) and calls
    :meth:`estimate_advantages` before taking minibatches.
    """

    obs: VecObs
    actions: dict[str, RaggedArray]
    logprobs: dict[str, RaggedArray]  # float32, one per actor, laid out like ``actions``
    values: npt.NDArray[np.float32]  # (rows,)
    rewards: npt.NDArray[np.float32]  # (steps, envs): the environment's
    dones: npt.NDArray[np.bool_]  # (steps, envs): the episode ended with this step
    # (steps, envs): the value of the final observation of an episode cut off (truncated) on
    # this step, else 0.
    bootstrap: npt.NDArray[np.float32]
    next_obs: VecObs  # the observation after the last step
    next_values: npt.NDArray[np.float32]  # (envs,): its value
    metrics: dict[str, npt.NDArray[np.float64]]  # values of episodes that ended
    # (rows,) each, from estimate_advantages.
    advantages: npt.NDArray[np.float32] = field(default_factory=lambda: np.zeros(0, np.float32))
    returns: npt.NDArray[np.float32] = field(default_factory=lambda: np.zeros(0, np.float32))

    @property
    def num_rows(self) -> int:
        return self.obs.num_rows

    def estimate_advantages(
        self, rewards: npt.NDArray[np.float32], gamma: float, gae_lambda: float
    ) -> None:
        """Advantages and returns by GAE from ``rewards`` ((steps, envs), e.g. the
        environment's rewards scaled or with a bonus)."""
        # A truncated episode did not end in the task: its last step earns the discounted value
        # of the state it was cut off in, which GAE (stopping at the episode's end) would drop.
        steps, envs = self.dones.shape
        advantages, returns = gae(
            rewards + gamma * self.bootstrap,
            self.values.reshape(steps, envs),
            self.dones,
            self.next_values,
            gamma,
            gae_lambda,
        )
        self.advantages, self.returns = advantages.reshape(-1), returns.reshape(-1)

    def minibatch(
        self, rows: npt.NDArray[np.int64], advantages: npt.NDArray[np.float32]
    ) -> Minibatch:
        """The given rows; ``advantages`` (one per row, e.g. normalized) replace the stored ones."""
        if self.returns.shape[0] != self.num_rows:
            raise RuntimeError("Rollout.minibatch: call estimate_advantages first")
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
