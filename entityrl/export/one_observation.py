"""RogueNet for one observation, as plain tensor operations that trace to ONNX.

:class:`RogueNet` takes ragged batches whose index bookkeeping is computed in numpy
(:mod:`entityrl.nn.layout`), which no exporter can trace. With a single observation that
bookkeeping collapses: the entities are the types' rows concatenated (then the global token),
attention runs over all of them, and actors and candidates are plain indices. This module
computes that case with the network's own modules and parameters, in float32, taking the
inputs of :mod:`entityrl.inference.signature`. Each image input becomes its tokens by the
network's own encoder; they sit between the entities and the global token.

Build the network inside :func:`entityrl.nn.kernels.build.torch_path` so that its modules run
plain torch while traced.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional

from entityrl.inference import signature
from entityrl.nn.embedding import EntityEmbedding, Translation, _Constant, _module_key
from entityrl.nn.gaussian import GaussianHead
from entityrl.nn.heads import CategoricalHead, SelectEntityHead
from entityrl.nn.recurrent import RowMemory
from entityrl.nn.relpos import RelativePositions
from entityrl.nn.rogue_net import Encoder, RogueNet, _key
from entityrl.nn.transformer import Block, RaggedAttention, RowPooling


class ExportError(ValueError):
    """The network cannot be exported as configured."""


class ExportedGraph(nn.Module):
    """What every exported graph of ``net`` shares: a float32 network, one layout per action,
    and its inputs and outputs named by ``input_specs`` and ``output_specs`` (functions of
    :mod:`entityrl.inference.signature`), in :attr:`input_names` / :attr:`output_names`
    order."""

    def __init__(
        self,
        net: RogueNet,
        input_specs: Callable[..., list[signature.TensorSpec]],
        output_specs: Callable[..., list[signature.TensorSpec]],
    ) -> None:
        super().__init__()
        if next(net.parameters()).dtype != torch.float32:
            raise ExportError("the network must have float32 parameters to be exported")
        try:
            self.layouts = {
                name: signature.action_layout(name, space)
                for name, space in net.action_space.items()
            }
        except signature.UnsupportedActionError as err:
            raise ExportError(str(err)) from None
        self.net = net.eval()
        self.state_size = None if net.memory is None else net.memory.size
        self.input_names = [
            spec.name for spec in input_specs(net.obs_space, net.action_space, self.state_size)
        ]
        self.output_names = [spec.name for spec in output_specs(net.action_space, self.state_size)]


class OneObservationPolicy(ExportedGraph):
    """Action probabilities (Gaussians for continuous actions) and value of one observation (see
    :mod:`entityrl.inference.signature` for the inputs and outputs, in :attr:`input_names`
    order). With ``net.memory`` the state before the observation is the last input and the
    state after it the last output.

    Without ``padded``, the graph for the common observation only
    (:data:`signature.UNPADDED_KEY`): every entity visible (it has no ``visible`` input), at
    least one entity, and candidates for every select-entity action. It needs no padding
    entity, no attention bias and no guard against an empty softmax: 49 nodes where the padded
    graph has 63 (CherryPick, two attention layers, after onnxruntime's optimizations), and
    onnxruntime spends about a microsecond per node at one observation."""

    def __init__(self, net: RogueNet, padded: bool = True) -> None:
        super().__init__(
            net,
            signature.input_specs if padded else signature.unpadded_input_specs,
            signature.output_specs,
        )
        self.padded = padded

    def forward(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        inputs = dict(zip(self.input_names, tensors, strict=True))
        net = self.net
        padded = self.padded
        x = _encode(net.encoder, inputs, padded)
        next_state = None
        if net.memory is not None:
            x, next_state = _remember(net.memory, x, inputs[signature.STATE])
        outputs = []
        for name, layout in self.layouts.items():
            head = net.heads[_key(name)]
            if layout.gaussian:
                assert isinstance(head, GaussianHead)
                outputs.extend(gaussian(head, _acting(x, layout, inputs, name)))
                continue
            mask = inputs[signature.mask_input(name)]
            if layout is signature.Layout.CANDIDATES:
                assert isinstance(head, SelectEntityHead)
                actors = _acting(x, layout, inputs, name)
                candidates = x.index_select(0, inputs[signature.actees_input(name)])
                # As SelectEntityHead: the key bias shifts all of an actor's logits alike.
                logits = (head.query(actors) @ head.key.weight) @ candidates.t()
                logits = logits * head.d_qk**-0.5
            else:
                assert isinstance(head, CategoricalHead)
                logits = head.proj(_acting(x, layout, inputs, name))
            logits = logits.masked_fill(~mask, float("-inf"))
            if layout is signature.Layout.CANDIDATES and padded:  # may have no candidates
                outputs.append(softmax_of_any_width(logits))
            else:
                outputs.append(torch.softmax(logits, dim=-1))
        value_x = x if net.value_encoder is None else _encode(net.value_encoder, inputs, padded)
        outputs.append(net.value_head.proj(_mean(value_x)).reshape(1))
        if next_state is not None:
            outputs.append(next_state)
        return tuple(outputs)


def _acting(
    x: torch.Tensor, layout: signature.Layout, inputs: dict[str, torch.Tensor], name: str
) -> torch.Tensor:
    """The embeddings of action ``name``'s actors: the global token (the last entity) for a
    global action, else the entities ``actors/<name>`` lists."""
    if layout in (signature.Layout.GLOBAL, signature.Layout.GLOBAL_VALUES):
        return x[-1:]
    return x.index_select(0, inputs[signature.actors_input(name)])


def gaussian(head: GaussianHead, acting: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """As :meth:`GaussianHead.forward`: each actor's mean ``(actors, components)``, and the
    standard deviation ``(components,)`` that every actor shares."""
    mean, log_std = head.distribution(acting)
    return mean, log_std.exp()


def _remember(
    memory: RowMemory, x: torch.Tensor, state: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """As :meth:`RogueNet._remember` for one row: the row's GRU cell advances ``state``
    (size,) from the mean embedding, and the new state, projected, joins every entity's
    embedding. Returns the embeddings and the new state."""
    new_state = memory.step(_mean(x)[None], state[None])[0]
    return x + memory.proj(new_state), new_state


@dataclass
class _AttentionInputs:
    """What every attention layer of one pass shares (over the entities and, if padded, the
    padding entity, see :func:`_attention`)."""

    # (N + 1, N + 1): 0 where the query may see the key, else -inf; None: every query sees
    # every key (no padding entity, every entity visible).
    bias: torch.Tensor | None
    # Relative positions: per (query, key) pair, its offset one-hot (N + 1, N + 1, offsets), and
    # the one-hot of its value vector (offset, or offset and key type).
    offset_keys: torch.Tensor | None = None
    offset_values: torch.Tensor | None = None


def _encode(encoder: Encoder, inputs: dict[str, torch.Tensor], padded: bool) -> torch.Tensor:
    """The ``(entities, d_model)`` embeddings after the transformer blocks.

    ``padded``: the blocks run with one padding entity appended, which attends to itself alone
    and which no other entity sees (nor pools): it keeps every product non-empty
    (onnxruntime's batched MatMul fails on empty ones: observations without entities) and
    every reshape's entity count inferable, and it is dropped at the end. Else every entity
    is visible and there is at least one (see :class:`OneObservationPolicy`)."""
    raw = _raw_features(encoder.embedding, inputs)
    has_global = encoder.embedding.global_token
    tokens = image_tokens(encoder, inputs)
    cells = sum(t.shape[0] for t in tokens)  # fixed by the image shapes: one observation
    # One concatenation of the types, the image tokens and the padding entity (one node).
    parts = before_global(embed_types(encoder.embedding, raw), tokens, has_global)
    x = torch.cat([*parts, *_padding(padded, 1, encoder.embedding.d_model)])
    goal = goal_context(encoder, inputs)
    if goal is not None:  # every entity (the padding one too: nothing sees it) gets it
        goal = goal.expand(x.shape[0], -1)
        x = condition(encoder, x, goal, 0)
    bias = _padded_bias(inputs[signature.VISIBLE], has_global, cells) if padded else None
    context = _AttentionInputs(bias)
    if encoder.relpos is not None:
        context.offset_keys, context.offset_values = _offsets(encoder.relpos, raw, cells, padded)
    for site, block in enumerate(encoder.blocks, 1):
        assert isinstance(block, Block)
        x = condition(encoder, _block(block, x, context, padded), goal, site)
    if isinstance(encoder.ln_out, nn.LayerNorm):
        x = layer_norm(encoder.ln_out, x)
    return x[:-1] if padded else x


def _padding(padded: bool, *shape: int) -> list[torch.Tensor]:
    """The padding entity's entry of ``shape`` (zeros) to append, if ``padded``."""
    return [torch.zeros(shape)] if padded else []


def _padded_bias(visible: torch.Tensor, global_token: bool, cells: int) -> torch.Tensor:
    """The attention bias of the entities, the ``cells`` image tokens and the global token (if
    any), all visible but the hidden entities, and the padding entity: :func:`attention_bias`
    of their flags, in fewer nodes.

    Each entity gets a level: 0 hidden, 1 visible, 3 the padding entity. A query may see a
    key exactly where the key's level minus the query's is 0 or 1: a visible query sees
    visible keys, a hidden one hidden and visible keys, the padding entity itself alone (and
    no other sees it: 3 - 1 and 3 - 0 are above 1)."""
    tail = [1.0] * (cells + global_token) + [3.0]
    level = torch.cat([visible.to(torch.float32), torch.tensor(tail)])
    offset = level[None, :] - level[:, None]
    return torch.where(torch.abs(offset - 0.5) <= 0.5, 0.0, float("-inf"))


def image_tokens(encoder: Encoder, inputs: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    """Per image of the space, its tokens ``(rows * cells, d_model)`` from its input
    ``(rows, height, width, channels)`` (uint8 scaled to [0, 1] as in training), by the
    network's own :class:`~entityrl.nn.images.ImageTokens`; none for a space without
    images."""
    images = encoder.images
    if images is None:
        return []
    tokens = []
    for name in images.names:
        tokenizer = images.tokenizers[_module_key(name)]
        pixels = inputs[signature.image_input(name)]
        tokens.append(layer_norm(tokenizer.norm, tokenizer.unnormalized(pixels)))
    return tokens


def before_global(
    parts: list[torch.Tensor], extra: list[torch.Tensor], has_global: bool
) -> list[torch.Tensor]:
    """The per-type ``parts`` (the global token's last, if ``has_global``) with ``extra`` (the
    image tokens' entries) between the types and the global token: the global token stays the
    last entity, where :func:`_acting` finds it, and actor indices, which count entities, stay
    as they are (attention and means do not depend on the order)."""
    if has_global:
        return [*parts[:-1], *extra, parts[-1]]
    return [*parts, *extra]


def goal_context(encoder: Encoder, inputs: dict[str, torch.Tensor]) -> torch.Tensor | None:
    """With goal conditioning, the conditioning's context of each observation ``(rows,
    width)`` from the goal columns of the global features (see
    :class:`~entityrl.nn.conditioning.GoalConditioning`); else None."""
    if encoder.conditioning is None:
        return None
    globals_ = inputs[signature.GLOBAL_FEATURES]
    goal = globals_.index_select(-1, torch.tensor(encoder.embedding.goal_columns))
    return encoder.conditioning.row_context(goal.reshape(-1, goal.shape[-1]))


def condition(
    encoder: Encoder, x: torch.Tensor, goal: torch.Tensor | None, site: int
) -> torch.Tensor:
    """``x`` conditioned at ``site`` by each entity's ``goal`` context (as
    :meth:`Encoder.forward`); ``x`` itself without conditioning."""
    if goal is None or encoder.conditioning is None:
        return x
    return encoder.conditioning(x, goal, site)


def plain_globals(embedding: EntityEmbedding, globals_: torch.Tensor | None) -> torch.Tensor | None:
    """The global features the embedding appends to entities: those not split off as the goal
    (None where none are left)."""
    if globals_ is None or not embedding.goal_columns:
        return globals_
    if not embedding.num_global:
        return None
    goal = embedding.goal_columns
    plain = [i for i in range(embedding.num_global + len(goal)) if i not in goal]
    return globals_.index_select(-1, torch.tensor(plain))


def attention_bias(
    visible_query: torch.Tensor, visible_key: torch.Tensor, real: torch.Tensor
) -> torch.Tensor:
    """0 where a query may see a key, else -inf, from the entities' flags broadcast against
    each other (queries on the second-to-last axis, keys on the last) and ``real`` (not
    padding; queries and keys alike on the last axis): visible queries do not see hidden
    keys, hidden queries see every key, padding sees padding alone and nothing sees it."""
    same = real.unsqueeze(-1) == real.unsqueeze(-2)
    return torch.where((visible_key | ~visible_query) & same, 0.0, float("-inf"))


def _raw_features(
    embedding: EntityEmbedding, inputs: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """Per type (and the global token), the features before normalization: translated, with
    the global features appended, as :meth:`EntityEmbedding.raw_features` gives them."""
    feats = {name: inputs[signature.features_input(name)] for name in embedding.entity_names}
    if embedding.translation is not None:
        feats = _translate(embedding.translation, feats)
    globals_ = plain_globals(embedding, inputs.get(signature.GLOBAL_FEATURES))
    if globals_ is not None:
        feats = {
            name: torch.cat([f, globals_.expand(f.shape[0], -1)], dim=1)
            for name, f in feats.items()
        }
    if embedding.global_token:
        feats["__global__"] = globals_.reshape(1, -1) if globals_ is not None else torch.zeros(1, 0)
    return feats


def embed_types(embedding: EntityEmbedding, raw: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    """Per type (and the global token), its entities' embeddings ``(n, d_model)``."""
    parts = []
    for name, f in raw.items():
        key = _module_key(name)
        projection = embedding.projections[key]
        if isinstance(projection, _Constant):
            # A product over no features plus the constant: one node, for any entity count.
            width = projection.embedding.shape[0]
            parts.append(functional.linear(f, f.new_zeros(width, 0), projection.embedding))
            continue
        linear, _, norm = projection
        parts.append(layer_norm(norm, torch.relu(linear(embedding.norms[key](f)))))
    return parts


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
            rel = rotate(rel, cos, sin)
        out[name] = replace_columns(f, cols, rel)
    return out


def rotate(rel: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Offsets ``(n, 2)`` in the frame of a reference turned by the angle of ``cos``, ``sin``
    (scalars, or one per offset)."""
    x, y = rel[:, 0], rel[:, 1]
    return torch.stack([x * cos + y * sin, -x * sin + y * cos], dim=1)


def replace_columns(f: torch.Tensor, columns: list[int], new: torch.Tensor) -> torch.Tensor:
    """``f`` with its ``columns`` replaced by those of ``new``, in order. Rebuilt column by
    column: exporters trace concatenation more simply than assignment."""
    replaced = dict(zip(columns, range(len(columns)), strict=True))
    return torch.cat(
        [
            new[:, replaced[j] : replaced[j] + 1] if j in replaced else f[:, j : j + 1]
            for j in range(f.shape[1])
        ],
        dim=1,
    )


def _block(block: Block, x: torch.Tensor, context: _AttentionInputs, padded: bool) -> torch.Tensor:
    normed = layer_norm(block.ln1, x)
    mix = block.mix
    if isinstance(mix, RaggedAttention):
        x = x + _attention(mix, normed, context)
    else:
        assert isinstance(mix, RowPooling)
        x = x + _pool(mix, normed, padded)
    return x + mlp(block, x)


def mlp(block: Block, x: torch.Tensor) -> torch.Tensor:
    """The block's feed-forward part, on its second layer norm of ``x``."""
    up, down = block.mlp[0], block.mlp[2]
    return down(functional.gelu(up(layer_norm(block.ln2, x))))


def _attention(mix: RaggedAttention, x: torch.Tensor, context: _AttentionInputs) -> torch.Tensor:
    """Self-attention of the entities (and the padding entity). With relative positions, as
    :meth:`RaggedAttention._explicit`: each pair's offset adds query . key vector to the
    logits, and the attention mass per offset times its value vector to the output."""
    d, heads = mix.proj.in_features, mix.n_head
    q, k, v = _heads(mix, x)
    logits = q @ k.transpose(1, 2)  # (heads, N, N)
    relpos = mix.relpos
    if relpos is not None:
        assert context.offset_keys is not None
        per_offset = (q @ relpos.keys.t()).transpose(0, 1)  # (N, heads, offsets)
        logits = logits + (per_offset @ context.offset_keys.transpose(1, 2)).transpose(0, 1)
    logits = logits * (d // heads) ** -0.5
    if context.bias is not None:
        logits = logits + context.bias
    weights = torch.softmax(logits, dim=-1)
    y = weights @ v
    if relpos is not None:
        assert context.offset_values is not None
        mass = (weights.transpose(0, 1) @ context.offset_values).transpose(0, 1)
        y = y + mass @ relpos.values
    return mix.proj(y.transpose(0, 1).reshape(-1, d))


def _heads(
    mix: RaggedAttention, x: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The queries, keys and values of ``x`` ``(N, d)``, each ``(heads, N, d / heads)``: the
    projection's heads of all three moved to the front in one reshape and one transpose, then
    split: three nodes once onnxruntime folds the transpose into the products (splitting the
    three first took eight)."""
    d, heads = mix.proj.in_features, mix.n_head
    # Column (which * d + head * per_head + j) of the projection is component j of head `head`
    # of the queries (which 0), keys (1) or values (2), as in RaggedAttention.
    q, k, v = mix.qkv(x).reshape(-1, 3 * heads, d // heads).transpose(0, 1).split(heads, dim=0)
    return q, k, v


def _offsets(
    relpos: RelativePositions, raw: dict[str, torch.Tensor], cells: int, padded: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """The offset one-hots of every (query, key) pair of the entities, the ``cells`` image
    tokens and, if ``padded``, the padding entity (neither has a position; both count as type
    0, as in :meth:`RelativePositions.offset_index`), as that method computes the offsets: the
    key's position minus the query's, rounded, clipped to the extent; "no position" unless both
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
    tokens = [torch.zeros(cells, dims)] if cells else []  # no nodes for a space without images
    p = torch.cat([*before_global(positions, tokens, has_global), *_padding(padded, 1, dims)])
    zeros = [t[:, 0] for t in tokens]
    has = torch.cat([*before_global(present, zeros, has_global), *_padding(padded, 1)]) > 0
    kind = torch.cat([*before_global(kinds, zeros, has_global), *_padding(padded, 1)])
    rel = torch.round((p[None, :, :] - p[:, None, :]) / config.scale)
    extent = relpos.extent.to(p.dtype)
    rel = torch.maximum(torch.minimum(rel, extent), -extent) + extent
    index = (rel * relpos.strides.to(p.dtype)).sum(-1)
    index = torch.where(has[:, None] & has[None, :], index, float(relpos.offsets - 1))
    values = index
    if config.per_entity_values:
        values = index + kind[None, :] * relpos.offsets
    return one_hot(index, relpos.offsets), one_hot(values, relpos.values.shape[0])


def one_hot(index: torch.Tensor, classes: int) -> torch.Tensor:
    """``(..., classes)`` float: 1 at each entry's (integer-valued) index."""
    return (index[..., None] == torch.arange(classes, dtype=index.dtype)).to(torch.float32)


def _pool(mix: RowPooling, x: torch.Tensor, padded: bool) -> torch.Tensor:
    """Each entity (and the padding entity, if ``padded``) receives the projection of the
    pooled entities."""
    h = mix.prepool(x[:-1] if padded else x)
    parts = []
    if mix.pooling in ("mean", "meanmax"):
        parts.append(_mean(h))
    if mix.pooling in ("max", "meanmax"):
        # Zeros without entities, as the batched pooling leaves an empty row.
        top = torch.cat([h, torch.full_like(h[:1], float("-inf"))]).amax(dim=0)
        parts.append(torch.where(torch.isinf(top), torch.zeros_like(top), top))
    return mix.proj(torch.cat(parts)).expand_as(x)


def softmax_of_any_width(logits: torch.Tensor) -> torch.Tensor:
    """Softmax over the last axis, which may be empty (no candidates).

    onnxruntime's Softmax divides by the axis length and fails on an empty one, so the axis
    gets one more entry at -inf (probability 0), dropped again afterwards.
    """
    return torch.softmax(functional.pad(logits, (0, 1), value=float("-inf")), dim=-1)[..., :-1]


def _mean(x: torch.Tensor) -> torch.Tensor:
    """The mean over entities (zeros without entities)."""
    if torch.jit.is_tracing():
        # One ReduceMean node (the count below takes seven). onnxruntime's ReduceMean gives
        # zeros over no entities, where torch's mean gives NaN: the parity tests decide
        # observations without entities (the browser's WASM build compiles the same CPU
        # kernels).
        return x.mean(dim=0)
    count = torch.ones_like(x[:, 0]).sum().clamp(min=1.0)
    return x.sum(dim=0) / count


def layer_norm(norm: nn.Module, x: torch.Tensor) -> torch.Tensor:
    assert isinstance(norm, nn.LayerNorm)
    return functional.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps)
