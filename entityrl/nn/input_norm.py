"""Running mean/variance normalization of input features."""

from __future__ import annotations

import torch
from torch import nn


class RunningNorm(nn.Module):
    """Normalizes features by running statistics and clips the result to ``[-clip, clip]``.

    The statistics are buffers (saved with the model) and change only through :meth:`update`,
    which the trainer calls with rollout data; the forward pass never updates them, so a batch
    evaluated twice gives the same result.
    """

    count: torch.Tensor
    mean: torch.Tensor
    m2: torch.Tensor

    def __init__(self, num_features: int, clip: float = 5.0) -> None:
        super().__init__()
        self.clip = clip
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))
        self.register_buffer("mean", torch.zeros(num_features, dtype=torch.float64))
        self.register_buffer("m2", torch.zeros(num_features, dtype=torch.float64))
        self.register_buffer("scale_mean", torch.zeros(num_features))
        self.register_buffer("scale_inv_std", torch.ones(num_features))

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        """Merge the statistics of ``x`` (items, features) into the running ones (Chan et al.)."""
        n = x.shape[0]
        if n == 0:
            return
        x64 = x.to(torch.float64)
        batch_mean = x64.mean(dim=0)
        batch_m2 = ((x64 - batch_mean) ** 2).sum(dim=0)
        total = self.count + n
        delta = batch_mean - self.mean
        self.mean += delta * (n / total)
        self.m2 += batch_m2 + delta**2 * (self.count * n / total)
        self.count.copy_(total)
        if self.count > 1:
            std = torch.sqrt(self.m2 / (self.count - 1))
            # A constant feature keeps unit scale instead of exploding.
            std = torch.where(std > 1e-8, std, torch.ones_like(std))
            self.scale_mean.copy_(self.mean.to(torch.float32))
            self.scale_inv_std.copy_((1.0 / std).to(torch.float32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp((x - self.scale_mean) * self.scale_inv_std, -self.clip, self.clip)
