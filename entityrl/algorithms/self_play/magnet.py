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

import copy

import numpy as np
import numpy.typing as npt
import torch

from entityrl.algorithms.common.rollout import Rollout
from entityrl.nn.rogue_net import RogueNet


class Magnet:
    """A slowly moving copy of the policy and the penalty for leaving it."""

    def __init__(self, net: RogueNet, coef: float, rate: float) -> None:
        self.net = copy.deepcopy(net)
        self.net.requires_grad_(False)
        self.coef = coef
        self.rate = rate

    def reset(self, net: RogueNet) -> None:
        """Stand where ``net`` is (a fresh or pretrained run's start)."""
        self.net.load_state_dict(net.state_dict())

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

    def follow(self, net: RogueNet) -> None:
        """Move the magnet's parameters ``rate`` of the way to ``net``'s (its input
        normalization statistics are taken as they are)."""
        with torch.no_grad():
            for mine, theirs in zip(self.net.parameters(), net.parameters(), strict=True):
                mine.lerp_(theirs, self.rate)
            for mine, theirs in zip(self.net.buffers(), net.buffers(), strict=True):
                mine.copy_(theirs)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return self.net.state_dict()

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        self.net.load_state_dict(state)
