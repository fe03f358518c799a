"""A Polyak (exponential moving) average of the learner's parameters, for self-play.

Magnetic mirror descent's last iterate converges in two-player zero-sum games, but only as
fast as its steps shrink: with a large learning rate the policy circles the equilibrium (on Kuhn
poker its exploitability swings between 0.02 and 0.07 until the learning rate has annealed). An
average over the recent iterates sits nearer the circle's centre. Averaging the *parameters* is
a cheap proxy for the average *policy*: the policy is not linear in the parameters, so this is
not the average strategy that fictitious play or CFR output, only close to it while the
iterates averaged are close to one another.
"""

from __future__ import annotations

import copy

import torch

from entityrl.nn.rogue_net import RogueNet


class ParameterAverage:
    """``average <- average + rate * (params - average)`` after every update."""

    def __init__(self, net: RogueNet, rate: float) -> None:
        self.net = copy.deepcopy(net)
        self.net.requires_grad_(False)
        self.rate = rate

    def reset(self, net: RogueNet) -> None:
        """Stand where ``net`` is (a run's start, or before the averaging starts)."""
        self.net.load_state_dict(net.state_dict())

    def follow(self, net: RogueNet) -> None:
        """Move the average's parameters ``rate`` of the way to ``net``'s (its input
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
