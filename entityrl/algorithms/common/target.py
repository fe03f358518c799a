"""Target networks: slowly moving copies of a network that value-based targets are computed with."""

from __future__ import annotations

import copy

import torch
from torch import nn


def frozen_copy(net: nn.Module) -> nn.Module:
    """A copy of ``net`` that no gradient reaches (its parameters do not require grad)."""
    target = copy.deepcopy(net)
    for parameter in target.parameters():
        parameter.requires_grad_(False)
    return target


@torch.no_grad()
def soft_update(target: nn.Module, source: nn.Module, tau: float) -> None:
    """``target = (1 - tau) * target + tau * source``, parameters and buffers (input
    normalization statistics included); ``tau=1`` copies ``source``."""
    if not 0 < tau <= 1:
        raise ValueError(f"tau must be in (0, 1], got {tau}")
    for t, s in zip(target.state_dict().values(), source.state_dict().values(), strict=True):
        if t.is_floating_point():
            t.lerp_(s, tau)
        else:
            t.copy_(s)
