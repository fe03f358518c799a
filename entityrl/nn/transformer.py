"""Transformer blocks over ragged rows of entities.

Per-entity work (layer norms, projections, MLP) runs on the flat ``(slots, d_model)`` tensor.
Attention stays inside each row, in one of two ways (see :mod:`entityrl.nn.layout`):

- packed layout: the ragged attention kernel (:mod:`entityrl.nn.kernels`) reads each row's
  slots in place, with no padding at all;
- grid layout (relative positions, or no kernel on this machine): the flat tensor already is a
  sequence of padded ``(rows, width)`` grids, one per bucket of rows of similar length, so
  torch's attention views each bucket as a grid without copying, and a key-padding mask keeps
  attention inside each row.

Entities hidden from the policy are masked as keys for visible queries (hidden entities still
see everything, which is how the value path, pooling over all entities, can use them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn
from torch.nn import functional

from entityrl.nn.kernels import ragged_attention
from entityrl.nn.kernels.block import fused_block
from entityrl.nn.kernels.mlp import fused_mlp
from entityrl.nn.kernels.pointwise import add_layer_norm, gelu, layer_norm
from entityrl.nn.layout import BatchLayout
from entityrl.nn.precision import linear_in
from entityrl.nn.relpos import RelativePositions

Pooling = Literal["mean", "max", "meanmax"]


@dataclass
class AttentionContext:
    """What every attention layer of one forward pass shares: per-bucket masks (grid layout)
    or each row's first slot and length (packed layout)."""

    layout: BatchLayout
    masks: list[torch.Tensor | None]  # bool, True = may attend; (r, 1, 1, w) or (r, 1, w, w)
    relpos: list[tuple[torch.Tensor, torch.Tensor | None]] | None = None
    row_slot: torch.Tensor | None = None
    row_len: torch.Tensor | None = None
    _additive: list[torch.Tensor | None] | None = None

    def additive_masks(self) -> list[torch.Tensor | None]:
        """The masks as 0 / -inf, for the explicit attention path (built on first use)."""
        if self._additive is None:
            self._additive = [
                None
                if m is None
                else torch.zeros(m.shape, device=m.device).masked_fill_(~m, float("-inf"))
                for m in self.masks
            ]
        return self._additive


def attention_context(layout: BatchLayout) -> AttentionContext:
    """Build the attention masks of a batch once, for all layers."""
    if not layout.buckets:
        return AttentionContext(
            layout,
            [],
            row_slot=torch.from_numpy(layout.row_slot),
            row_len=torch.from_numpy(layout.lengths),
        )
    masks: list[torch.Tensor | None] = []
    visible = None if layout.visible is None else to_grids(layout.visible.unsqueeze(1), layout)
    for b, bucket in enumerate(layout.buckets):
        valid = bucket.key_valid
        mask = None
        if not valid.all() or visible is not None:
            valid = valid.clone()
            # A row without entities would have nothing to attend to (NaN); let its padding
            # slots attend to one padding slot instead. Their outputs are never read.
            if bucket.width:
                valid[:, 0] |= ~valid.any(dim=1)
            mask = valid[:, None, None, :]
            if visible is not None:
                vis = visible[b].squeeze(2)
                # Visible queries do not see hidden keys; hidden queries see every valid key.
                mask = mask & (~vis[:, None, :, None] | vis[:, None, None, :])
        masks.append(mask)
    return AttentionContext(layout, masks)


def to_grids(x: torch.Tensor, layout: BatchLayout) -> list[torch.Tensor]:
    """Flat (slots, c) -> one (rows, width, c) grid per bucket: views, no copies."""
    parts = torch.split(x, [b.rows * b.width for b in layout.buckets])
    return [
        part.view(b.rows, b.width, x.shape[1])
        for part, b in zip(parts, layout.buckets, strict=True)
    ]


def from_grids(ys: list[torch.Tensor]) -> torch.Tensor:
    """Per-bucket outputs (rows * width, c each) -> flat (slots, c)."""
    return ys[0] if len(ys) == 1 else torch.cat(ys)


class RaggedAttention(nn.Module):
    """Multi-head self-attention within each row.

    The projections run in ``dtype``; the attention weights are always computed in float32.
    """

    def __init__(
        self,
        d_model: int,
        n_head: int,
        relpos: RelativePositions | None,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        if d_model % n_head:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_head ({n_head})")
        self.n_head = n_head
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.relpos = relpos
        self.dtype = dtype

    def forward(self, x: torch.Tensor, ctx: AttentionContext) -> torch.Tensor:
        d = x.shape[1]
        if ctx.row_slot is not None and ctx.row_len is not None:
            qkv = linear_in(self.dtype, self.qkv, x)
            if ctx.layout.slot_per_row:
                # Each entity is alone in its row: it attends to itself, its value.
                return linear_in(self.dtype, self.proj, qkv[:, 2 * d :])
            y = ragged_attention(qkv, ctx.row_slot, ctx.row_len, self.n_head, ctx.layout.visible)
            return linear_in(self.dtype, self.proj, y)
        if ctx.layout.num_slots == 0:
            return linear_in(self.dtype, self.proj, x)
        # Fused attention in bfloat16 is far slower than in float32 on CPUs (its backward
        # above all), so queries, keys and values are widened once here; GPUs attend in the
        # compute dtype (flash attention takes bfloat16).
        qkv = linear_in(self.dtype, self.qkv, x)
        if qkv.is_cpu or self.relpos is not None:
            qkv = qkv.float()
        outputs = []
        for b, grid in enumerate(to_grids(qkv, ctx.layout)):
            rows, width = grid.shape[:2]
            q, k, v = grid.view(rows, width, 3, self.n_head, d // self.n_head).permute(
                2, 0, 3, 1, 4
            )
            if self.relpos is None:
                y = functional.scaled_dot_product_attention(q, k, v, attn_mask=ctx.masks[b])
            else:
                y = self._explicit(q, k, v, ctx, b)
            outputs.append(y.transpose(1, 2).reshape(rows * width, d))
        return linear_in(self.dtype, self.proj, from_grids(outputs))

    def _explicit(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, ctx: AttentionContext, b: int
    ) -> torch.Tensor:
        """Attention with relative-position terms (which the fused kernel cannot take)."""
        assert self.relpos is not None and ctx.relpos is not None
        index, key_types = ctx.relpos[b]
        scale = q.shape[-1] ** -0.5
        logits = (q @ k.transpose(-2, -1) + self.relpos.logits(q, index)) * scale
        additive = ctx.additive_masks()[b]
        if additive is not None:
            logits = logits + additive
        att = torch.softmax(logits, dim=-1)
        return att @ v + self.relpos.attend(att, index, key_types)


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
            # Padding slots reduce into an extra row that is dropped.
            pooled = h.new_zeros(layout.num_rows + 1, h.shape[1])
            idx = layout.slot_row.unsqueeze(1).expand_as(h)
            parts.append(pooled.scatter_reduce(0, idx, h, "amax", include_self=False)[:-1])
        pooled_rows = self.proj(torch.cat(parts, dim=1))
        # Padding slots read the (dropped) extra row: zeros.
        return torch.cat([pooled_rows, pooled_rows.new_zeros(1, pooled_rows.shape[1])])[
            layout.slot_row
        ]


def row_mean(x: torch.Tensor, layout: BatchLayout) -> torch.Tensor:
    """Mean of each row's entities (zeros for a row without entities); padding is ignored."""
    if layout.slot_per_row:
        return x
    total = x.new_zeros(layout.num_rows + 1, x.shape[1]).index_add_(0, layout.slot_row, x)
    return total[:-1] * layout.inverse_lengths.to(x.dtype)


class Block(nn.Module):
    """Pre-norm transformer block: x + attention(LN(x)), then x + MLP(LN(x)) with 4x width.

    The residual stream and layer norms are float32; attention projections and the MLP run in
    ``dtype`` (see :mod:`entityrl.nn.precision`). The layer norms and the GELU run the
    pointwise kernels (:mod:`entityrl.nn.kernels.pointwise`), the layer norms writing their
    output directly in the dtype of the layers that read it; the ``nn.LayerNorm`` modules
    hold the parameters (so state dict keys and checkpoints stay as they were). In bfloat16,
    the MLP and its residual sum are one call of the fused kernel (:mod:`entityrl.nn.kernels.mlp`)
    where it runs.
    """

    def __init__(
        self,
        d_model: int,
        n_head: int,
        pooling: Pooling | None,
        relpos: RelativePositions | None,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.mix: nn.Module = (
            RowPooling(d_model, pooling)
            if pooling is not None
            else RaggedAttention(d_model, n_head, relpos, dtype)
        )
        self.mlp = nn.Sequential(
            nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model)
        )
        self.dtype = dtype
        # Row pooling's layers take float32.
        self.mix_dtype = dtype if pooling is None else torch.float32

    def forward(self, x: torch.Tensor, ctx: AttentionContext) -> torch.Tensor:
        ln1, ln2 = self.ln1, self.ln2
        mix = self.mix
        if (
            self.dtype == torch.bfloat16
            and isinstance(mix, RaggedAttention)
            and mix.relpos is None
            and ctx.row_slot is not None
            and ctx.row_len is not None
        ):
            layers = (mix.qkv, mix.proj, ln2, self.mlp[0], self.mlp[2], mix.n_head)
            visible = ctx.layout.visible
            out = fused_block(
                x, ln1, *layers, ctx.row_slot, ctx.row_len, visible, ctx.layout.slot_per_row
            )
            if out is not None:
                return out
        mixed = self.mix(layer_norm(x, ln1.weight, ln1.bias, ln1.eps, self.mix_dtype), ctx)
        x, normed = add_layer_norm(x, mixed, ln2.weight, ln2.bias, ln2.eps, self.dtype)
        up, down = self.mlp[0], self.mlp[2]
        out = fused_mlp(up, down, normed, x)  # None where the kernel does not serve
        if out is None:
            out = x + linear_in(self.dtype, down, gelu(linear_in(self.dtype, up, normed)))
        return out
