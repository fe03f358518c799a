"""Transformer blocks over ragged rows of entities.

Per-entity work (layer norms, projections, MLP) runs on the flat ``(N, d_model)`` tensor; only
attention needs rows, so queries/keys/values are scattered into a padded ``(rows, W)`` grid for
it and gathered back. When every row has the same length the grid *is* the flat tensor and no
copy is made. A key-padding mask keeps attention inside each row; entities hidden from the
policy are masked as keys for visible queries (hidden entities still see everything, which is
how the value path, pooling over all entities, can use them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn
from torch.nn.functional import scaled_dot_product_attention

from entityrl.nn.layout import BatchLayout
from entityrl.nn.relpos import RelativePositions

Pooling = Literal["mean", "max", "meanmax"]


@dataclass
class AttentionContext:
    """What every attention layer of one forward pass shares."""

    layout: BatchLayout
    mask: torch.Tensor | None  # bool, True = may attend; (R, 1, 1, W) or (R, 1, W, W)
    additive_mask: torch.Tensor | None  # same, as 0 / -inf, for the explicit path
    relpos_index: torch.Tensor | None = None
    relpos_key_types: torch.Tensor | None = None


def attention_context(layout: BatchLayout) -> AttentionContext:
    """Build the attention mask of a batch once, for all layers."""
    mask = None
    if layout.padded or layout.visible is not None:
        valid = layout.key_valid.clone()
        # A row without entities would have nothing to attend to (NaN); let its padding slots
        # attend to one padding slot instead. Their outputs are discarded.
        if layout.width:
            valid[:, 0] |= ~valid.any(dim=1)
        mask = valid[:, None, None, :]
        if layout.visible is not None:
            vis = torch.ones(layout.num_rows * layout.width, dtype=torch.bool)
            grid = layout.pad_index if layout.pad_index is not None else slice(None)
            vis[grid] = layout.visible
            vis = vis.view(layout.num_rows, layout.width)
            # Visible queries do not see hidden keys; hidden queries see every valid key.
            mask = mask & (~vis[:, None, :, None] | vis[:, None, None, :])
    additive = None
    if mask is not None:
        additive = torch.zeros(mask.shape).masked_fill_(~mask, float("-inf"))
    return AttentionContext(layout, mask, additive)


def to_grid(x: torch.Tensor, layout: BatchLayout) -> torch.Tensor:
    """Flat (N, c) -> padded (R, W, c)."""
    if layout.pad_index is None:
        return x.view(layout.num_rows, layout.width, x.shape[1])
    grid = x.new_zeros(layout.num_rows * layout.width, x.shape[1])
    grid.index_copy_(0, layout.pad_index, x)
    return grid.view(layout.num_rows, layout.width, x.shape[1])


def from_grid(y: torch.Tensor, layout: BatchLayout) -> torch.Tensor:
    """Padded (R, W, c) -> flat (N, c)."""
    flat = y.reshape(layout.num_rows * layout.width, y.shape[-1])
    return flat if layout.pad_index is None else flat.index_select(0, layout.pad_index)


class RaggedAttention(nn.Module):
    """Multi-head self-attention within each row."""

    def __init__(self, d_model: int, n_head: int, relpos: RelativePositions | None) -> None:
        super().__init__()
        if d_model % n_head:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_head ({n_head})")
        self.n_head = n_head
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.relpos = relpos

    def forward(self, x: torch.Tensor, ctx: AttentionContext) -> torch.Tensor:
        layout = ctx.layout
        rows, width, d = layout.num_rows, layout.width, x.shape[1]
        if rows == 0 or width == 0:
            return self.proj(x)
        qkv = to_grid(self.qkv(x), layout)
        q, k, v = qkv.view(rows, width, 3, self.n_head, d // self.n_head).permute(2, 0, 3, 1, 4)
        if self.relpos is None:
            y = scaled_dot_product_attention(q, k, v, attn_mask=ctx.mask)
        else:
            y = self._explicit(q, k, v, ctx)
        return self.proj(from_grid(y.transpose(1, 2).reshape(rows, width, d), layout))

    def _explicit(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, ctx: AttentionContext
    ) -> torch.Tensor:
        """Attention with relative-position terms (which the fused kernel cannot take)."""
        assert self.relpos is not None and ctx.relpos_index is not None
        scale = q.shape[-1] ** -0.5
        logits = (q @ k.transpose(-2, -1) + self.relpos.logits(q, ctx.relpos_index)) * scale
        if ctx.additive_mask is not None:
            logits = logits + ctx.additive_mask
        att = torch.softmax(logits, dim=-1)
        return att @ v + self.relpos.attend(att, ctx.relpos_index, ctx.relpos_key_types)


class RowPooling(nn.Module):
    """Replaces attention: each entity receives a projection of its row's pooled entities."""

    def __init__(self, d_model: int, pooling: Pooling) -> None:
        super().__init__()
        self.pooling = pooling
        self.prepool = nn.Linear(d_model, d_model)
        self.proj = nn.Linear(d_model * (2 if pooling == "meanmax" else 1), d_model)

    def forward(self, x: torch.Tensor, ctx: AttentionContext) -> torch.Tensor:
        layout = ctx.layout
        h = self.prepool(x)
        parts = []
        if self.pooling in ("mean", "meanmax"):
            parts.append(row_mean(h, layout))
        if self.pooling in ("max", "meanmax"):
            pooled = h.new_zeros(layout.num_rows, h.shape[1])
            idx = layout.row_of_entity.unsqueeze(1).expand_as(h)
            parts.append(pooled.scatter_reduce(0, idx, h, "amax", include_self=False))
        return self.proj(torch.cat(parts, dim=1))[layout.row_of_entity]


def row_mean(x: torch.Tensor, layout: BatchLayout) -> torch.Tensor:
    """Mean of each row's entities (zeros for a row without entities)."""
    total = x.new_zeros(layout.num_rows, x.shape[1]).index_add_(0, layout.row_of_entity, x)
    counts = torch.from_numpy(layout.lengths).clamp(min=1).to(x.dtype)
    return total / counts.unsqueeze(1)


class Block(nn.Module):
    """Pre-norm transformer block: x + attention(LN(x)), then x + MLP(LN(x)) with 4x width."""

    def __init__(
        self,
        d_model: int,
        n_head: int,
        pooling: Pooling | None,
        relpos: RelativePositions | None,
    ) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.mix: nn.Module = (
            RowPooling(d_model, pooling)
            if pooling is not None
            else RaggedAttention(d_model, n_head, relpos)
        )
        self.mlp = nn.Sequential(
            nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model)
        )

    def forward(self, x: torch.Tensor, ctx: AttentionContext) -> torch.Tensor:
        x = x + self.mix(self.ln1(x), ctx)
        return x + self.mlp(self.ln2(x))
