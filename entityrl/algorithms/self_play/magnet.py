"""The magnet of magnetic mirror descent (Sokota et al., 2023, "A Unified Approach to
Reinforcement Learning, Quantal Response Equilibria, and Two-Player Zero-Sum Games").

Each step pays a penalty ``coef * (log pi(a) - log rho(a))`` for the actions ``a`` the
learner's policy ``pi`` took, so that PPO climbs the task's return minus
``coef * KL(pi || rho)``: the policy is pulled towards the magnet ``rho``. With a magnet
that stands still this is the entropy bonus's regularization around ``rho`` (uniform
``rho``: a quantal response equilibrium); here the magnet follows the policy slowly (its
parameters move a fraction ``rate`` of the way to the policy's after every update), so the
regularized game's equilibrium moves with it towards the game's own, and the policy itself
(its last iterate, not an average) converges to it in two-player zero-sum games.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import torch

from entityrl.algorithms.common.rollout import Rollout
from entityrl.algorithms.self_play.average import ParameterAverage
from entityrl.nn.rogue_net import RogueNet


class Magnet(ParameterAverage):
    """A slowly moving copy of the policy (a :class:`ParameterAverage` of it) and the penalty
    for leaving it."""

    def __init__(self, net: RogueNet, coef: float, rate: float) -> None:
        super().__init__(net, rate)
        self.coef = coef

    def penalty(self, rollout: Rollout) -> npt.NDArray[np.float32]:
        """Per step and environment, ``coef`` times the sum over the row's actors and actions
        of ``log pi(a) - log rho(a)`` (``pi``: the policy that collected the rollout)."""
        with torch.no_grad():
            out = self.net.evaluate(rollout.obs, rollout.actions)
        total = np.zeros(rollout.obs.num_rows, np.float64)
        for name, old in rollout.logprobs.items():
            magnet = out.heads[name].logprob.double().cpu().numpy()
            rows = np.repeat(np.arange(old.lengths.shape[0]), old.lengths)
            total += np.bincount(rows, old.data[:, 0] - magnet, minlength=total.shape[0])
        return (self.coef * total).astype(np.float32).reshape(rollout.rewards.shape)
