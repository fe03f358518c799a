"""RogueNet for one observation, as plain tensor operations that trace to ONNX.

:class:`RogueNet` takes ragged batches whose index bookkeeping is computed in numpy
(:mod:`entityrl.nn.layout`), which no exporter can trace. With a single observation that
bookkeeping collapses: the entities are the types' rows concatenated (then the global token),
attention runs over all of them, and actors and candidates are plain indices. This module
computes that case with the network's own modules and parameters, in float32, taking the
inputs of :mod:`entityrl.inference.signature`.

Build the network inside :func:`entityrl.nn.kernels.build.torch_path` so that its modules run
plain torch while traced.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional

from entityrl.env.spaces import GlobalCategoricalActionSpace, SelectEntityActionSpace
from entityrl.inference import signature
from entityrl.nn.embedding import EntityEmbedding, Translation, _Constant, _module_key
from entityrl.nn.heads import CategoricalHead, SelectEntityHead
from entityrl.nn.rogue_net import Encoder, RogueNet, _key
from entityrl.nn.transformer import Block, RaggedAttention, RowPooling


class ExportError(ValueError):
    """The network cannot be exported as configured."""


class OneObservationPolicy(nn.Module):
    """Action probabilities and value of one observation (see
    :mod:`entityrl.inference.signature` for the inputs and outputs, in :attr:`input_names`
    order)."""

    def __init__(self, net: RogueNet) -> None:
        super().__init__()
        if net.config.relpos is not None:
            raise ExportError(
                "net.relpos: relative-position attention cannot be exported yet; train with "
                "net.relpos=null (translation, net.translation, is supported)"
            )
        if next(net.parameters()).dtype != torch.float32:
            raise ExportError("the network must have float32 parameters to be exported")
        self.net = net.eval()
        self.input_names = [
            spec.name for spec in signature.input_specs(net.obs_space, net.action_space)
        ]
        self.output_names = [spec.name for spec in signature.output_specs(net.action_space)]

    def forward(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        inputs = dict(zip(self.input_names, tensors, strict=True))
        net = self.net
        x = _encode(net.encoder, inputs)
        outputs = []
        for name, space in net.action_space.items():
            head = net.heads[_key(name)]
            mask = inputs[signature.mask_input(name)]
            if isinstance(space, GlobalCategoricalActionSpace):
                assert isinstance(head, CategoricalHead)
                logits = head.proj(x[-1:])  # the global token, last entity
            elif isinstance(space, SelectEntityActionSpace):
                assert isinstance(head, SelectEntityHead)
                actors = x.index_select(0, inputs[signature.actors_input(name)])
                candidates = x.index_select(0, inputs[signature.actees_input(name)])
                # As SelectEntityHead: the key bias shifts all of an actor's logits alike.
                logits = (head.query(actors) @ head.key.weight) @ candidates.t()
                logits = logits * head.d_qk**-0.5
            else:
                assert isinstance(head, CategoricalHead)
                logits = head.proj(x.index_select(0, inputs[signature.actors_input(name)]))
            outputs.append(_softmax(logits.masked_fill(~mask, float("-inf"))))
        value_x = x if net.value_encoder is None else _encode(net.value_encoder, inputs)
        outputs.append(net.value_head.proj(_mean(value_x)).reshape(1))
        return tuple(outputs)


def _encode(encoder: Encoder, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """The ``(entities, d_model)`` embeddings after the transformer blocks."""
    x = _embed(encoder.embedding, inputs)
    visible = inputs[signature.VISIBLE]
    if encoder.embedding.global_token:
        visible = torch.cat([visible, visible.new_ones(1)])
    # Attention runs with one padding entity appended (see _attention), which attends to itself
    # alone and which no other entity sees.
    real = torch.cat([torch.ones_like(visible), visible.new_zeros(1)])
    visible = torch.cat([visible, visible.new_ones(1)])
    # Visible queries do not see hidden keys; hidden queries see every key.
    allowed = (~visible[:, None] | visible[None, :]) & real[:, None] & real[None, :]
    allowed = allowed | (~real[:, None] & ~real[None, :])
    bias = torch.zeros_like(allowed, dtype=x.dtype).masked_fill(~allowed, float("-inf"))
    for block in encoder.blocks:
        assert isinstance(block, Block)
        x = _block(block, x, bias)
    if isinstance(encoder.ln_out, nn.LayerNorm):
        x = _layer_norm(encoder.ln_out, x)
    return x


def _embed(embedding: EntityEmbedding, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    feats = {name: inputs[signature.features_input(name)] for name in embedding.entity_names}
    if embedding.translation is not None:
        feats = _translate(embedding.translation, feats)
    globals_ = inputs.get(signature.GLOBAL_FEATURES)
    if globals_ is not None:
        feats = {
            name: torch.cat([f, globals_.expand(f.shape[0], -1)], dim=1)
            for name, f in feats.items()
        }
    if embedding.global_token:
        feats["__global__"] = globals_.reshape(1, -1) if globals_ is not None else torch.zeros(1, 0)
    parts = []
    for name, f in feats.items():
        key = _module_key(name)
        projection = embedding.projections[key]
        if isinstance(projection, _Constant):
            parts.append(projection.embedding.expand(f.shape[0], -1))
            continue
        linear, _, norm = projection
        parts.append(_layer_norm(norm, torch.relu(linear(embedding.norms[key](f)))))
    return torch.cat(parts)


def _translate(translation: Translation, feats: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Positions relative to the first reference entity (the origin when there is none), as
    :class:`~entityrl.nn.embedding.Translation` computes them."""
    reference = feats[translation.reference]
    columns = translation.ref_columns
    # Row 0 of the reference entities with a zero row appended: the first one, or zeros.
    origin = torch.cat([reference[:, columns], reference.new_zeros(1, len(columns))])[0]
    if translation.angle_column is not None:
        angle = torch.cat([reference[:, translation.angle_column], reference.new_zeros(1)])[0]
        cos, sin = torch.cos(angle), torch.sin(angle)
    out = dict(feats)
    for name, cols in translation.columns.items():
        f = feats[name]
        rel = f[:, cols] - origin
        if translation.angle_column is not None:
            x, y = rel[:, 0], rel[:, 1]
            rel = torch.stack([x * cos + y * sin, -x * sin + y * cos], dim=1)
        # Rebuilt column by column: exporters trace concatenation more simply than assignment.
        replaced = dict(zip(cols, range(len(cols)), strict=True))
        out[name] = torch.cat(
            [
                rel[:, replaced[j] : replaced[j] + 1] if j in replaced else f[:, j : j + 1]
                for j in range(f.shape[1])
            ],
            dim=1,
        )
    return out


def _block(block: Block, x: torch.Tensor, attention_bias: torch.Tensor) -> torch.Tensor:
    normed = _layer_norm(block.ln1, x)
    mix = block.mix
    if isinstance(mix, RaggedAttention):
        x = x + _attention(mix, normed, attention_bias)
    else:
        assert isinstance(mix, RowPooling)
        x = x + _pool(mix, normed)
    up, down = block.mlp[0], block.mlp[2]
    return x + down(functional.gelu(up(_layer_norm(block.ln2, x))))


def _attention(mix: RaggedAttention, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """Self-attention over the entities and a padding entity, which keeps every product
    non-empty (onnxruntime's batched MatMul fails on empty ones: observations without
    entities) and is dropped from the result."""
    d, heads = mix.proj.in_features, mix.n_head
    x = torch.cat([x, x.new_zeros(1, d)])
    n = x.shape[0]
    q, k, v = mix.qkv(x).reshape(n, 3, heads, d // heads).permute(1, 2, 0, 3).unbind(0)
    weights = torch.softmax(q @ k.transpose(1, 2) * (d // heads) ** -0.5 + bias, dim=-1)
    return mix.proj((weights @ v).transpose(0, 1).reshape(n, d)[:-1])


def _pool(mix: RowPooling, x: torch.Tensor) -> torch.Tensor:
    h = mix.prepool(x)
    parts = []
    if mix.pooling in ("mean", "meanmax"):
        parts.append(_mean(h))
    if mix.pooling in ("max", "meanmax"):
        # Zeros without entities, as the batched pooling leaves an empty row.
        top = torch.cat([h, torch.full_like(h[:1], float("-inf"))]).amax(dim=0)
        parts.append(torch.where(torch.isinf(top), torch.zeros_like(top), top))
    pooled = mix.proj(torch.cat(parts))
    return pooled.expand(x.shape[0], -1)


def _softmax(logits: torch.Tensor) -> torch.Tensor:
    """Softmax over the last axis, which may be empty (no candidates).

    onnxruntime's Softmax divides by the axis length and fails on an empty one, so the axis
    gets one more entry at -inf (probability 0), dropped again afterwards.
    """
    padding = torch.full((1,), float("-inf")).expand(*logits.shape[:-1], 1)
    return torch.softmax(torch.cat([logits, padding], dim=-1), dim=-1)[..., :-1]


def _mean(x: torch.Tensor) -> torch.Tensor:
    """The mean over entities (zeros without entities)."""
    count = torch.ones_like(x[:, 0]).sum().clamp(min=1.0)
    return x.sum(dim=0) / count


def _layer_norm(norm: nn.Module, x: torch.Tensor) -> torch.Tensor:
    assert isinstance(norm, nn.LayerNorm)
    return functional.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps)
