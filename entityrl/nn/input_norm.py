"""Running mean/variance normalization of input features."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

Combine = Callable[[npt.NDArray[np.float64]], npt.NDArray[np.float64]]


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
    def update(self, x: torch.Tensor, combine: Combine | None = None) -> None:
        """Merge the statistics of ``x`` (items, features) into the running ones (Chan et al.).

        ``combine`` sums an array over the processes of a data-parallel run, so that every
        process merges the statistics of all processes' items and they stay identical.
        """
        x64 = x.to(torch.float64)
        # One transfer from the network's device: the count, sums and sums of squares.
        moments = torch.cat([x64.sum(dim=0), (x64**2).sum(dim=0)]).cpu().numpy()
        sums = np.concatenate([[x64.shape[0]], moments])
        if combine is not None:
            sums = combine(sums)
        n = float(sums[0])
        if n == 0:
            return
        width = self.mean.shape[0]
        total = torch.from_numpy(sums[1 : 1 + width]).to(self.mean.device)
        squares = torch.from_numpy(sums[1 + width :]).to(self.mean.device)
        batch_mean = total / n
        batch_m2 = (squares - n * batch_mean**2).clamp(min=0)
        merged = self.count + n
        delta = batch_mean - self.mean
        self.mean += delta * (n / merged)
        self.m2 += batch_m2 + delta**2 * (self.count * n / merged)
        self.count.copy_(merged)
        if self.count > 1:
            std = torch.sqrt(self.m2 / (self.count - 1))
            # A constant feature keeps unit scale instead of exploding.
            std = torch.where(std > 1e-8, std, torch.ones_like(std))
            self.scale_mean.copy_(self.mean.to(torch.float32))
            self.scale_inv_std.copy_((1.0 / std).to(torch.float32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp((x - self.scale_mean) * self.scale_inv_std, -self.clip, self.clip)
