"""Goal conditioning: the goal signal (an observation space's ``goal_features``) shapes the
network's layers instead of entering as plain features (``net.conditioning``, docs/goals.md).

Two ways, as in ML-Agents' goal-conditioned policies:

* ``hyper`` (the default): a hypernetwork turns each row's goal into the weight matrix and
  bias of a linear layer, which every entity embedding of that row passes through (added to
  the embedding) before the first transformer block. The goal so decides how each entity is
  seen, which plain features (appended to each entity's own) can do only additively.
* ``film``: feature-wise linear modulation. Each row's goal gives a per-channel scale and
  shift of its entity embeddings after the embedding and after every transformer block.

Both start from the goal normalized by running statistics (as every input is) and one hidden
layer. ``none`` builds nothing here: the goal features stay global features.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn

from entityrl.env.spaces import ObsSpace
from entityrl.nn.input_norm import Combine, RunningNorm
from entityrl.nn.layout import BatchLayout

Conditioning = Literal["hyper", "film", "none"]
CONDITIONINGS: tuple[Conditioning, ...] = ("hyper", "film", "none")

HIDDEN = 16
"""Units of the goal's hidden layer. Goals are a few features; the hypernetwork's product per
entity grows with this width (``d_model * (HIDDEN + 1) * d_model``), so it stays small."""


class GoalConditioning(nn.Module):
    """What both ways share: the goal's normalization and hidden layer, per row.

    :meth:`row_context` computes, once per forward, what each row's entities need from its
    goal (:meth:`context`: spread to the slots); :meth:`forward` applies it at one ``site``: 0
    is the embedding, ``i`` the output of transformer block ``i``.
    """

    def __init__(self, goal_width: int, norm_clip: float) -> None:
        super().__init__()
        self.norm = RunningNorm(goal_width, norm_clip)
        self.hidden = nn.Sequential(nn.Linear(goal_width, HIDDEN), nn.ReLU())

    def encode(self, goal: torch.Tensor) -> torch.Tensor:
        """(rows, goal features) -> (rows, HIDDEN)."""
        return self.hidden(self.norm(goal))

    @torch.no_grad()
    def update_normalizer(self, goal: torch.Tensor, combine: Combine | None = None) -> None:
        self.norm.update(goal, combine)

    def row_context(self, goal: torch.Tensor) -> torch.Tensor:
        """(rows, goal features) -> (rows, context width)."""
        raise NotImplementedError

    def context(self, goal: torch.Tensor, layout: BatchLayout) -> torch.Tensor:
        """Each slot its row's context; padding slots zeros (which leave them unchanged)."""
        return layout.per_slot(self.row_context(goal))

    def forward(self, x: torch.Tensor, context: torch.Tensor, site: int) -> torch.Tensor:
        raise NotImplementedError


class HyperConditioning(GoalConditioning):
    """A goal-generated linear layer on the entity embeddings: ``x + x @ W(g) + b(g)``.

    The hypernetwork's output layer makes ``W(g) = A_0 + sum_k h_k(g) A_k`` from the hidden
    layer ``h``; ``x @ W(g)`` is computed as ``sum_k h_k (x @ A_k)``: one product over all
    slots, then a weighted sum per slot, instead of a ``(d_model, d_model)`` matrix per row
    gathered to every slot.
    """

    def __init__(self, goal_width: int, d_model: int, norm_clip: float) -> None:
        super().__init__(goal_width, norm_clip)
        self.d_model = d_model
        # Scaled so that W(g) starts as a default linear layer's weights would (entries of
        # about 1 / sqrt(d_model)), whatever the hidden width.
        std = (d_model * (HIDDEN + 1)) ** -0.5
        self.weights = nn.Parameter(torch.randn(d_model, (HIDDEN + 1) * d_model) * std)
        self.bias = nn.Linear(HIDDEN, d_model)

    def row_context(self, goal: torch.Tensor) -> torch.Tensor:
        """The hidden layer with a constant 1 (the weight of ``A_0``), and the generated
        bias."""
        h = self.encode(goal)
        return torch.cat([h, torch.ones_like(h[:, :1]), self.bias(h)], dim=1)

    def forward(self, x: torch.Tensor, context: torch.Tensor, site: int) -> torch.Tensor:
        if site:
            return x
        mix, bias = context.split([HIDDEN + 1, self.d_model], dim=1)
        products = (x @ self.weights).view(-1, HIDDEN + 1, self.d_model)
        return x + torch.bmm(mix.unsqueeze(1), products).squeeze(1) + bias


class FiLMConditioning(GoalConditioning):
    """``x * (1 + scale(g)) + shift(g)`` per channel, after the embedding and after each of
    ``n_layer`` blocks (each site its own scale and shift)."""

    def __init__(self, goal_width: int, d_model: int, n_layer: int, norm_clip: float) -> None:
        super().__init__(goal_width, norm_clip)
        self.d_model = d_model
        self.modulation = nn.Linear(HIDDEN, (n_layer + 1) * 2 * d_model)

    def row_context(self, goal: torch.Tensor) -> torch.Tensor:
        """Every site's scale and shift."""
        return self.modulation(self.encode(goal))

    def forward(self, x: torch.Tensor, context: torch.Tensor, site: int) -> torch.Tensor:
        width = 2 * self.d_model
        scale, shift = context[:, site * width : (site + 1) * width].chunk(2, dim=1)
        return x * (1 + scale) + shift


def goal_conditioning(
    mode: Conditioning, obs_space: ObsSpace, d_model: int, n_layer: int, norm_clip: float
) -> GoalConditioning | None:
    """The conditioning ``mode`` builds for ``obs_space``; None for ``none`` and for spaces
    without goal features (those then run exactly as before)."""
    goal_width = len(obs_space.goal_features)
    if mode == "none" or not goal_width:
        return None
    if mode == "hyper":
        return HyperConditioning(goal_width, d_model, norm_clip)
    return FiLMConditioning(goal_width, d_model, n_layer, norm_clip)
