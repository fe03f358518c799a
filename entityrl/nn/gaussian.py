"""The head of continuous actions: a diagonal Gaussian per actor, with bounds.

Each actor's mean is ``center + half_range * proj(embedding)`` (the projection works in units
of the half range, so one learning rate suits any bounds); the log standard deviation is a
parameter per component, the same for every actor and state (as in CleanRL's and
Stable-Baselines3's PPO for continuous control), starting at the half range and kept within
``[LOG_STD_MIN, LOG_STD_MAX]`` (relative to the half range).

Bounds (:mod:`entityrl.env.actions.continuous`): the head samples the unbounded Gaussian and
scores what it sampled; the environment receives the sample clipped to ``[low, high]``. So the
log-probability and entropy are the Gaussian's, exactly, and nothing is lost where a bound is
far from the mean; a mean beyond a bound is pulled back by the returns, as clipping makes
every value past the bound act alike.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from entityrl.nn.kernels.categorical import HeadOutput
from entityrl.nn.layout import ActorInputs, BatchLayout, actor_inputs
from entityrl.ragged import RaggedArray

# The standard deviation stays within e^-7 and e^2 times the half range: wide enough to go
# from exploring the whole range to a precise choice, narrow enough that an entropy bonus or a
# run of bad updates cannot make it infinite or zero.
LOG_STD_MIN, LOG_STD_MAX = -7.0, 2.0
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


class GaussianHead(nn.Module):
    """Per actor, a Gaussian over the ``len(space)`` components of a continuous action."""

    def __init__(self, d_model: int, space: Any) -> None:
        super().__init__()
        dims = len(space)
        self.proj = nn.Linear(d_model, dims)
        # Means near the centre at first: small weights, as the categorical heads'.
        nn.init.orthogonal_(self.proj.weight, gain=0.01)
        nn.init.zeros_(self.proj.bias)
        self.log_std = nn.Parameter(torch.zeros(dims))
        low = torch.tensor(space.low, dtype=torch.float32)
        high = torch.tensor(space.high, dtype=torch.float32)
        # Derived from the space: not saved, so checkpoints hold parameters only.
        self.register_buffer("center", (high + low) / 2, persistent=False)
        self.register_buffer("half_range", (high - low) / 2, persistent=False)

    def prepare(self, mask: Any, layout: BatchLayout) -> ActorInputs:
        return actor_inputs(mask, layout.row_slot, layout.num_slots)

    @staticmethod
    def chosen(values: RaggedArray) -> torch.Tensor:
        return torch.from_numpy(values.data)

    def distribution(self, acting: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The actors' Gaussian: each one's mean ``(actors, dims)`` from its embedding in
        ``acting``, and the log standard deviation ``(dims,)`` they share (also what the
        exported model computes)."""
        mean = self.center + self.half_range * self.proj(acting.float())
        return mean, self.log_std.clamp(LOG_STD_MIN, LOG_STD_MAX) + self.half_range.log()

    def forward(
        self,
        x: torch.Tensor,
        inputs: ActorInputs,
        chosen: torch.Tensor | None = None,
        deterministic: bool = False,
        generator: torch.Generator | None = None,
    ) -> HeadOutput:
        """Sample (the mean if ``deterministic``) or score ``chosen`` ``(actors, dims)``."""
        dims = self.log_std.shape[0]
        if inputs.empty:
            empty = torch.zeros(0, device=x.device)
            return HeadOutput(torch.zeros(0, dims, device=x.device), empty, empty)
        acting = x if inputs.actors is None else x.index_select(0, inputs.actors)
        mean, log_std = self.distribution(acting)
        std = log_std.exp()
        if chosen is not None:
            actions = chosen.to(mean.dtype)
        elif deterministic:
            actions = mean.detach()
        else:
            noise = torch.randn(mean.shape, device=mean.device, generator=generator)
            actions = (mean + std * noise).detach()
        z = (actions - mean) / std
        logprob = (-0.5 * z * z - log_std - _HALF_LOG_2PI).sum(dim=1)
        entropy = (0.5 + _HALF_LOG_2PI + log_std).sum().expand(mean.shape[0])
        return HeadOutput(actions, logprob, entropy)
