"""RogueNet for a batch of observations, as plain tensor operations that trace to ONNX.

The companion of :mod:`entityrl.export.one_observation` for many observations in one call
(the inputs and outputs are :func:`entityrl.inference.signature.batched_input_specs`). The
caller does the index bookkeeping in numpy (:func:`entityrl.inference.runtime.batched_inputs`):
each entity type's entities of every observation come concatenated, as in a
:class:`~entityrl.env.VecObs`, and ``slots`` places them in one padded grid, a row per
observation. Per-entity layers, attention and pooling run on that grid, with every row's
global token and one padding entity appended (columns ``-2`` and ``-1``); actors and
candidates are positions in the flattened grid. This module computes that with the network's
own modules and parameters, in float32. Each observation's image tokens (``image/<name>``
inputs) follow as further columns of its grid row, after the padding entity: actor and
candidate positions, which count the first ``width + 2`` columns, stay as they are.

Build the network inside :func:`entityrl.nn.kernels.build.torch_path` so that its modules run
plain torch while traced.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from entityrl.export.one_observation import (
    ExportedGraph,
    attention_bias,
    condition,
    embed_types,
    gaussian,
    goal_context,
    image_tokens,
    layer_norm,
    mlp,
    one_hot,
    plain_globals,
    replace_columns,
    rotate,
)
from entityrl.inference import signature
from entityrl.nn.embedding import EntityEmbedding, Translation
from entityrl.nn.gaussian import GaussianHead
from entityrl.nn.heads import CategoricalHead, SelectEntityHead
from entityrl.nn.relpos import RelativePositions
from entityrl.nn.rogue_net import Encoder, RogueNet, _key
from entityrl.nn.transformer import Block, RaggedAttention, RowPooling

GLOBAL_COLUMN = -2
"""The grid column of each row's global token (a padding entity without one)."""


class BatchedPolicy(ExportedGraph):
    """Action probabilities (Gaussians for continuous actions), values and, with
    ``net.memory``, next states of a batch of observations; inputs and outputs in
    :attr:`input_names` and :attr:`output_names` order."""

    def __init__(self, net: RogueNet) -> None:
        super().__init__(net, signature.batched_input_specs, signature.batched_output_specs)
        images = net.encoder.images
        self.cells = 0 if images is None else sum(images.cells.values())
        """Image tokens per observation, in the columns after the padding entity."""

    def forward(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        inputs = dict(zip(self.input_names, tensors, strict=True))
        net = self.net
        grid = _grid(net.encoder.embedding, inputs, self.cells)
        x = _encode(net.encoder, inputs, grid)
        next_state = None
        if net.memory is not None:
            next_state = net.memory.step(_mean(x, grid.real), inputs[signature.STATE])
            x = x + net.memory.proj(next_state)[:, None]
        # Image tokens never act: the actors' positions count the columns before them.
        slots = x[:, : -self.cells] if self.cells else x
        flat = slots.reshape(-1, x.shape[-1])
        outputs = []
        for name, layout in self.layouts.items():
            head = net.heads[_key(name)]
            if layout in (signature.Layout.GLOBAL, signature.Layout.GLOBAL_VALUES):
                acting = slots[:, GLOBAL_COLUMN]
            else:
                acting = flat.index_select(0, inputs[signature.actors_input(name)])
            if layout.gaussian:
                assert isinstance(head, GaussianHead)
                outputs.extend(gaussian(head, acting))
                continue
            mask = inputs[signature.mask_input(name)]
            if layout is signature.Layout.CANDIDATES:
                assert isinstance(head, SelectEntityHead)
                # Each actor's candidates (actors, candidates, d_model). As SelectEntityHead:
                # the key bias shifts all of an actor's logits alike. A MatMul, not a sum of
                # products: onnxruntime's ReduceSum returns an empty input unreduced.
                candidates = flat[inputs[signature.actees_input(name)]]
                query = head.query(acting) @ head.key.weight
                logits = (candidates @ query[:, :, None])[..., 0] * head.d_qk**-0.5
            else:
                assert isinstance(head, CategoricalHead)
                logits = head.proj(acting)
            probs = torch.softmax(logits.masked_fill(~mask, float("-inf")), dim=-1)
            # Exactly 0 where illegal, padding included (an actor without candidates: all 0).
            outputs.append(probs.masked_fill(~mask, 0.0))
        value_x = x if net.value_encoder is None else _encode(net.value_encoder, inputs, grid)
        outputs.append(net.value_head.proj(_mean(value_x, grid.real)).reshape(-1))
        if next_state is not None:
            outputs.append(next_state)
        return tuple(outputs)


@dataclass
class _Grid:
    """Where every entity goes, shared by every pass over the batch.

    Entities are numbered in a table: every type's entities (the inputs' rows, type after
    type), the padding entity, then with a global token one per observation. The ``cells``
    image tokens of each row follow its slots (they are in no table)."""

    index: torch.Tensor  # (rows, slots): each slot's entity in the table
    real: torch.Tensor  # (rows, slots + cells): the slot holds an entity, global or image token
    cells: int

    def gather(self, table: torch.Tensor, ones: bool) -> torch.Tensor:
        """``(rows, slots + cells, ...)``: each slot's entry of ``table``, ones (True) in the
        image tokens' columns if ``ones``, else zeros (False)."""
        found = table[self.index]
        if not self.cells:
            return found
        # (new_full does not trace for every dtype; ones_like and zeros_like do.)
        tail = (torch.ones_like if ones else torch.zeros_like)(found[:, :1])
        expanded = tail.expand(-1, self.cells, *found.shape[2:])
        return torch.cat([found, expanded], dim=1)


def _grid(embedding: EntityEmbedding, inputs: dict[str, torch.Tensor], cells: int) -> _Grid:
    """``slots`` with each row's global token and padding entity appended, and ``cells`` image
    tokens after them."""
    slots = inputs[signature.SLOTS]
    feats = [inputs[signature.features_input(name)] for name in embedding.entity_names]
    # The padding entity's number, the count of entities: summed from ones so that it traces
    # as an operation on the inputs' sizes, not as the example's constant.
    ones = torch.cat([torch.zeros(0), *(f.new_ones(f.shape[0]) for f in feats)])
    padding = ones.sum().to(torch.int64)
    rows = torch.arange(slots.shape[0])[:, None]
    column = rows * 0 + padding
    global_ = column + 1 + rows if embedding.global_token else column
    index = torch.cat([slots, global_, column], dim=1)
    real = index != padding
    if cells:
        real = torch.cat([real, torch.ones_like(real[:, :1]).expand(-1, cells)], dim=1)
    return _Grid(index, real, cells)


def _table(parts: list[torch.Tensor], padding: torch.Tensor, has_global: bool) -> torch.Tensor:
    """The entities' entries (``parts`` per type, then the global tokens' if ``has_global``)
    with the padding entity's between them, in the table's order (see :class:`_Grid`)."""
    if has_global:
        return torch.cat([*parts[:-1], padding, parts[-1]])
    return torch.cat([*parts, padding])


@dataclass
class _AttentionInputs:
    """What every attention layer of one pass shares."""

    bias: torch.Tensor  # (rows, 1, slots, slots): 0 where the query may see the key, else -inf
    # Relative positions: per (query, key) pair, its offset one-hot (rows, slots, slots,
    # offsets), and the one-hot of its value vector (offset, or offset and key type).
    offset_keys: torch.Tensor | None = None
    offset_values: torch.Tensor | None = None


def _encode(encoder: Encoder, inputs: dict[str, torch.Tensor], grid: _Grid) -> torch.Tensor:
    """The ``(rows, slots, d_model)`` embeddings after the transformer blocks.

    The padding entity attends to padding alone, and no other entity sees it (nor pools it):
    every row keeps one (an observation without entities still has a non-empty product,
    which onnxruntime's batched MatMul needs)."""
    embedding = encoder.embedding
    raw = _raw_features(embedding, inputs, grid)
    has_global = embedding.global_token
    table = _table(embed_types(embedding, raw), torch.zeros(1, embedding.d_model), has_global)
    rows, slots = grid.real.shape
    # One row per slot: the linear layers see a matrix (a Gemm with its bias, in onnxruntime).
    x = table[grid.index.reshape(-1)]
    tokens = image_tokens(encoder, inputs)
    if tokens:  # (rows * cells, d_model) each: every row's after its slots
        x = torch.cat(
            [x.reshape(rows, -1, embedding.d_model)]
            + [t.reshape(rows, -1, embedding.d_model) for t in tokens],
            dim=1,
        ).reshape(rows * slots, -1)
    goal = goal_context(encoder, inputs)
    if goal is not None:  # each slot its observation's context
        goal = goal[:, None].expand(rows, slots, -1).reshape(rows * slots, -1)
        x = condition(encoder, x, goal, 0)
    flags = [inputs[signature.VISIBLE]]
    if has_global:
        flags.append(torch.ones(grid.index.shape[0], dtype=torch.bool))
    visible = grid.gather(_table(flags, torch.ones(1, dtype=torch.bool), has_global), ones=True)
    real = grid.real
    bias = attention_bias(visible[:, :, None], visible[:, None, :], real)
    context = _AttentionInputs(bias[:, None])
    if encoder.relpos is not None:
        context.offset_keys, context.offset_values = _offsets(encoder.relpos, raw, grid)
    for site, block in enumerate(encoder.blocks, 1):
        assert isinstance(block, Block)
        normed = layer_norm(block.ln1, x)
        if isinstance(block.mix, RaggedAttention):
            x = x + _attention(block.mix, normed.reshape(rows, slots, -1), context)
        else:
            assert isinstance(block.mix, RowPooling)
            pooled = _pool(block.mix, normed.reshape(rows, slots, -1), real)
            x = (x.reshape(rows, slots, -1) + pooled[:, None]).reshape(rows * slots, -1)
        x = condition(encoder, x + mlp(block, x), goal, site)
    if isinstance(encoder.ln_out, nn.LayerNorm):
        x = layer_norm(encoder.ln_out, x)
    return x.reshape(rows, slots, -1)


def _raw_features(
    embedding: EntityEmbedding, inputs: dict[str, torch.Tensor], grid: _Grid
) -> dict[str, torch.Tensor]:
    """Per type (and the global tokens), the features before normalization: translated, with
    their observation's global features appended, as :meth:`EntityEmbedding.raw_features`
    gives them."""
    feats = {name: inputs[signature.features_input(name)] for name in embedding.entity_names}
    observations = grid.index.shape[0]
    if embedding.translation is not None:
        rows = _entity_rows(embedding, inputs)
        feats = _translate(embedding.translation, feats, rows, observations)
    globals_ = plain_globals(embedding, inputs.get(signature.GLOBAL_FEATURES))
    if globals_ is not None:
        rows = _entity_rows(embedding, inputs)
        feats = {
            name: torch.cat([f, globals_.index_select(0, rows[name])], dim=1)
            for name, f in feats.items()
        }
    if embedding.global_token:
        feats["__global__"] = globals_ if globals_ is not None else torch.zeros(observations, 0)
    return feats


def _entity_rows(
    embedding: EntityEmbedding, inputs: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """Per type, the observation of each of its entities (cut from ``entity_rows``)."""
    entity_rows = inputs[signature.ENTITY_ROWS]
    rows, start = {}, 0
    for name in embedding.entity_names:
        count = inputs[signature.features_input(name)].shape[0]
        rows[name] = entity_rows[start : start + count]
        start = start + count
    return rows


def _translate(
    translation: Translation,
    feats: dict[str, torch.Tensor],
    rows: dict[str, torch.Tensor],
    observations: int,
) -> dict[str, torch.Tensor]:
    """Positions relative to each observation's first reference entity (the origin when it
    has none), as :class:`~entityrl.nn.embedding.Translation` computes them."""
    reference = feats[translation.reference]
    columns = list(translation.ref_columns)
    if translation.angle_column is not None:
        columns.append(translation.angle_column)
    # The reference entities come observation after observation: an observation's first one
    # follows those of the observations before it (ArgMax, the other way, fails in
    # onnxruntime on some empty axes). One more, of no observation, keeps the sums below
    # non-empty: onnxruntime's ReduceSum returns an empty input unreduced.
    ref_rows = rows[translation.reference]
    ref_rows = torch.cat([ref_rows, ref_rows.new_full((1,), 2**62)])[None, :]
    observation = torch.arange(observations)[:, None]
    first = (ref_rows < observation).sum(dim=1)
    has = (ref_rows == observation).sum(dim=1) > 0
    table = torch.cat([reference[:, columns], reference.new_zeros(1, len(columns))])
    origins = torch.where(has[:, None], table.index_select(0, first), 0.0)
    out = dict(feats)
    for name, cols in translation.columns.items():
        f = feats[name]
        origin = origins.index_select(0, rows[name])
        rel = f[:, cols] - origin[:, : len(translation.ref_columns)]
        if translation.angle_column is not None:
            angle = origin[:, -1]
            rel = rotate(rel, torch.cos(angle), torch.sin(angle))
        out[name] = replace_columns(f, cols, rel)
    return out


def _attention(mix: RaggedAttention, x: torch.Tensor, context: _AttentionInputs) -> torch.Tensor:
    """Self-attention within each row of the grid ``x`` (rows, slots, d_model), as a matrix
    of a row per slot. With relative positions, as :meth:`RaggedAttention._explicit`: each
    pair's offset adds query . key vector to the logits, and the attention mass per offset
    times its value vector to the output."""
    d, heads = mix.proj.in_features, mix.n_head
    rows, slots = x.shape[:2]
    qkv = mix.qkv(x.reshape(rows * slots, d)).reshape(rows, slots, 3, heads, d // heads)
    qkv = qkv.permute(2, 0, 3, 1, 4)
    q, k, v = qkv.unbind(0)  # (rows, heads, slots, d_head)
    logits = q @ k.transpose(2, 3)
    relpos = mix.relpos
    if relpos is not None:
        assert context.offset_keys is not None
        per_offset = (q @ relpos.keys.t()).transpose(1, 2)  # (rows, slots, heads, offsets)
        logits = logits + (per_offset @ context.offset_keys.transpose(2, 3)).transpose(1, 2)
    weights = torch.softmax(logits * (d // heads) ** -0.5 + context.bias, dim=-1)
    y = weights @ v
    if relpos is not None:
        assert context.offset_values is not None
        mass = (weights.transpose(1, 2) @ context.offset_values).transpose(1, 2)
        y = y + mass @ relpos.values
    return mix.proj(y.transpose(1, 2).reshape(rows * slots, d))


def _offsets(
    relpos: RelativePositions, raw: dict[str, torch.Tensor], grid: _Grid
) -> tuple[torch.Tensor, torch.Tensor]:
    """The offset one-hots of every (query, key) pair of each row (the padding entity has no
    position), as :meth:`RelativePositions.offset_index` computes the offsets: the key's
    position minus the query's, rounded, clipped to the extent; "no position" unless both
    have one."""
    config = relpos.config
    dims = len(config.position_features)
    positions, present, kinds = [], [], []
    for t, name in enumerate(relpos.type_names):
        f = raw[name]
        count = f.new_ones(f.shape[0])
        if name in relpos.columns:
            positions.append(f[:, relpos.columns[name]])
            present.append(count)
        else:
            positions.append(f.new_zeros(f.shape[0], dims))
            present.append(count * 0)
        kinds.append(count * t)
    has_global = "__global__" in raw
    # Image tokens have no position and count as type 0, as in the network.
    p = grid.gather(_table(positions, torch.zeros(1, dims), has_global), ones=False)
    has = grid.gather(_table(present, torch.zeros(1), has_global), ones=False) > 0
    kind = grid.gather(_table(kinds, torch.zeros(1), has_global), ones=False)
    rel = torch.round((p[:, None, :, :] - p[:, :, None, :]) / config.scale)
    extent = relpos.extent.to(p.dtype)
    rel = torch.maximum(torch.minimum(rel, extent), -extent) + extent
    index = (rel * relpos.strides.to(p.dtype)).sum(-1)
    index = torch.where(has[:, :, None] & has[:, None, :], index, float(relpos.offsets - 1))
    values = index
    if config.per_entity_values:
        values = index + kind[:, None, :] * relpos.offsets
    return one_hot(index, relpos.offsets), one_hot(values, relpos.values.shape[0])


def _pool(mix: RowPooling, x: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """The projection of each row's pooled entities (rows, d_model), which every slot of the
    row receives."""
    h = mix.prepool(x)
    parts = []
    if mix.pooling in ("mean", "meanmax"):
        parts.append(_mean(h, real))
    if mix.pooling in ("max", "meanmax"):
        # Zeros without entities, as the batched pooling leaves an empty row.
        top = h.masked_fill(~real[:, :, None], float("-inf")).amax(dim=1)
        parts.append(torch.where(torch.isinf(top), torch.zeros_like(top), top))
    return mix.proj(torch.cat(parts, dim=-1))


def _mean(x: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """Each row's mean over its ``real`` slots (zeros without any)."""
    weights = real.to(x.dtype)[:, :, None]
    return (x * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)
