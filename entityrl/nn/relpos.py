"""Relative-position encoding for attention over entities on a grid.

Each (query, key) pair gets the key's position relative to the query, rounded and clipped to
``[-extent, extent]`` per position feature; each such offset has a learned key vector (added to
the attention logits through the query) and a learned value vector (added to the attention
output, weighted by the attention). Entities without the position features share one extra
"no position" offset.

Both terms are computed without materializing a (rows, W, W, head) tensor: the logit term is
``(q @ offset_keys.T)`` gathered per pair, the value term is the attention mass per offset
(a scatter-add) times ``offset_values``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from entityrl.env.spaces import ObsSpace
from entityrl.nn.layout import BatchLayout


@dataclass
class RelposConfig:
    """Settings of the relative-position encoding."""

    position_features: list[str]
    """Names of the position features, e.g. ["x", "y"]."""
    extent: list[int]
    """Per position feature, the largest offset told apart; larger offsets are clipped."""
    scale: float = 1.0
    """Offsets are divided by this before rounding (grid cell size)."""
    per_entity_values: bool = False
    """Learn separate value vectors per entity type of the key."""


class RelativePositions(nn.Module):
    """Learned key/value vectors per relative offset (see module docstring)."""

    def __init__(
        self, config: RelposConfig, obs_space: ObsSpace, d_head: int, global_token: bool
    ) -> None:
        super().__init__()
        if len(config.extent) != len(config.position_features):
            raise ValueError(
                f"relpos.extent: expected one extent per position feature "
                f"({len(config.position_features)}), got {len(config.extent)}"
            )
        if any(e < 0 for e in config.extent):
            raise ValueError(f"relpos.extent: expected values >= 0, got {config.extent}")
        self.config = config
        self.columns = {
            name: [entity.features.index(f) for f in config.position_features]
            for name, entity in obs_space.entities.items()
            if all(f in entity.features for f in config.position_features)
        }
        if not self.columns:
            raise ValueError(
                f"relpos.position_features: no entity type has all of {config.position_features}"
            )
        extent = np.asarray(config.extent, dtype=np.int64)
        sizes = 2 * extent + 1
        self.register_buffer("extent", torch.from_numpy(extent), persistent=False)
        strides = np.concatenate([[1], np.cumprod(sizes)[:-1]])
        self.register_buffer("strides", torch.from_numpy(strides), persistent=False)
        self.offsets = int(np.prod(sizes)) + 1  # the last one: "no position"
        self.type_names = list(obs_space.entities) + (["__global__"] if global_token else [])
        n_types = len(self.type_names) if config.per_entity_values else 1
        self.keys = nn.Parameter(torch.randn(self.offsets, d_head) * 0.05)
        self.values = nn.Parameter(torch.randn(n_types * self.offsets, d_head) * 0.2)

    def offset_index(
        self, raw: dict[str, torch.Tensor], layout: BatchLayout
    ) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
        """Per attention bucket: the (rows, w, w) offset index of every (query, key) pair, and
        the key's entity type per slot (for per-entity values)."""
        dims = len(self.config.position_features)
        # Position, has position, type.
        slots = torch.zeros(layout.num_slots, dims + 2, device=layout.slot_row.device)
        for t, name in enumerate(self.type_names):
            where = layout.type_positions[name]
            slots[where, dims + 1] = float(t)
            if name in self.columns:
                slots[where, :dims] = raw[name][:, self.columns[name]]
                slots[where, dims] = 1.0
        result = []
        offset = 0
        for bucket in layout.buckets:
            r, w = bucket.rows, bucket.width
            grid = slots[offset : offset + r * w].view(r, w, dims + 2)
            offset += r * w
            p, present, kind = grid[..., :dims], grid[..., dims] > 0, grid[..., dims + 1].long()
            rel = torch.round((p[:, None, :, :] - p[:, :, None, :]) / self.config.scale)
            rel = torch.maximum(torch.minimum(rel, self.extent), -self.extent).long() + self.extent
            index = (rel * self.strides).sum(-1)
            index = torch.where(present[:, :, None] & present[:, None, :], index, self.offsets - 1)
            key_types = kind.view(r, 1, w) if self.config.per_entity_values else None
            result.append((index, key_types))
        return result

    def logits(self, q: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """Extra attention logits (rows, heads, W, W): query . key vector of the pair's offset."""
        table = q @ self.keys.T  # (rows, heads, W, offsets)
        return table.gather(3, index.unsqueeze(1).expand(-1, q.shape[1], -1, -1))

    def attend(
        self, att: torch.Tensor, index: torch.Tensor, key_types: torch.Tensor | None
    ) -> torch.Tensor:
        """Value term (rows, heads, W, d_head): attention mass per offset times its vector."""
        if key_types is not None:
            index = index + key_types * self.offsets
        buckets = self.values.shape[0]
        mass = att.new_zeros(*att.shape[:3], buckets)
        mass.scatter_add_(3, index.unsqueeze(1).expand_as(att), att)
        return mass @ self.values
