"""The entity embedding in one kernel call per entity type, forward and backward.

Per entity type, :class:`entityrl.nn.embedding.EntityEmbedding` normalizes the raw features
by running statistics (``clamp((x - mean) * scale, -clip, clip)``), projects them (linear,
ReLU, layer norm) and places each entity's embedding in its slot of the flat
``(slots, d_model)`` tensor. In torch that is about six passes over ``(entities, d_model)``
float32 tensors each way, and at tens of thousands of entities their memory traffic is most of
the embedding's time. The kernel (``pw_embed_forward`` and ``pw_embed_backward`` in
``pointwise.cpp``, beside the layer norm whose row code it runs) works through blocks of rows
whose intermediate values stay in the cache: the forward reads the raw features (a few floats
per entity) and writes each embedding straight to its slot; the backward reads the slots'
gradients, recomputes each block's intermediate values, and sums the gradients of the
projection's and the layer norm's parameters per thread, adding the threads' sums in a fixed
order. Nothing is kept from the forward but its inputs.

The raw features are data (no gradient) and the statistics are buffers (no gradient either),
so the parameters' gradients are all the backward computes. The projection's sums run in
another order than torch's ``addmm``: results agree with the torch path to float32 rounding,
not to the bit.

:func:`embed` returns None where the kernel cannot serve (no kernel, ``ENTITYRL_NO_KERNELS=1``,
tensors that are not float32 on the CPU, features that need a gradient) and the caller runs
the torch path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import torch
from torch.autograd.function import once_differentiable

from entityrl.nn.kernels import pointwise

__all__ = ["Placed", "Projected", "embed"]


class Projected(NamedTuple):
    """The entities of one type, embedded by the kernel."""

    features: torch.Tensor  # (n, K) raw features, K >= 1
    positions: torch.Tensor  # (n,) int64: each entity's slot
    mean: torch.Tensor  # (K,) the normalization's mean
    scale: torch.Tensor  # (K,) and inverse standard deviation
    clip: float
    weight: torch.Tensor  # (d_model, K): the projection's
    bias: torch.Tensor  # (d_model,)
    norm_weight: torch.Tensor  # (d_model,): the layer norm's
    norm_bias: torch.Tensor  # (d_model,)
    eps: float


class Placed(NamedTuple):
    """The entities of one type whose embeddings torch computed: only placed in their slots."""

    embedding: torch.Tensor  # (n, d_model)
    positions: torch.Tensor  # (n,) int64


_PARAMS = 4  # a Projected's differentiable tensors: weight, bias, norm_weight, norm_bias


def embed(
    types: Sequence[Projected | Placed], num_slots: int, d_model: int, zero: bool
) -> torch.Tensor | None:
    """The ``(num_slots, d_model)`` float32 tensor holding every type's embeddings in their
    slots; the other slots are 0 when ``zero``, else left uninitialized (the types fill every
    slot). Differentiable with respect to the projections' and layer norms' parameters and
    the placed embeddings; None where the caller should compute it with torch.
    """
    # The tensors first: asking for the kernel starts its build, useless off the CPU.
    if (
        not all(_supported(t, d_model) for t in types)
        or (kernel := pointwise._get_kernel()) is None
    ):
        return None
    inputs: list[torch.Tensor] = []
    for t in types:
        if isinstance(t, Projected):
            inputs += (t.features.contiguous(), t.mean.contiguous(), t.scale.contiguous())
            inputs += (p.contiguous() for p in (t.weight, t.bias, t.norm_weight, t.norm_bias))
        else:
            inputs.append(t.embedding)
        inputs.append(t.positions.contiguous())
    specs = tuple((t.clip, t.eps) if isinstance(t, Projected) else None for t in types)
    plan = _Plan(kernel, specs, num_slots, d_model, zero)
    if torch.is_grad_enabled() and any(t.requires_grad for t in inputs):
        return _Embedding.apply(plan, *inputs)
    return _forward(plan, inputs)


def _supported(t: Projected | Placed, d_model: int) -> bool:
    if t.positions.dtype != torch.int64 or t.positions.dim() != 1 or not t.positions.is_cpu:
        return False
    n = t.positions.shape[0]
    if isinstance(t, Placed):
        e = t.embedding
        return e.dtype == torch.float32 and e.is_cpu and e.shape == (n, d_model)
    k = t.features.shape[-1] if t.features.dim() == 2 else 0
    shapes = [(n, k), (k,), (k,), (d_model, k), (d_model,), (d_model,), (d_model,)]
    tensors = t.features, t.mean, t.scale, t.weight, t.bias, t.norm_weight, t.norm_bias
    return (
        k >= 1
        and d_model >= 1
        and not t.features.requires_grad
        and not t.mean.requires_grad
        and not t.scale.requires_grad
        and all(
            x.dtype == torch.float32 and x.is_cpu and x.shape == shape
            for x, shape in zip(tensors, shapes, strict=True)
        )
    )


class _Plan(NamedTuple):
    kernel: pointwise._Kernel
    specs: tuple[tuple[float, float] | None, ...]  # per type: a Projected's (clip, eps), or None
    num_slots: int
    d_model: int
    zero: bool


def _split(plan: _Plan, inputs: Sequence[torch.Tensor]) -> list[tuple[int, Sequence[torch.Tensor]]]:
    """Each type's (index of its first input, its inputs) in ``inputs``."""
    parts, i = [], 0
    for spec in plan.specs:
        count = 2 if spec is None else 8
        parts.append((i, inputs[i : i + count]))
        i += count
    return parts


def _forward(plan: _Plan, inputs: Sequence[torch.Tensor]) -> torch.Tensor:
    make = torch.zeros if plan.zero else torch.empty
    out = make(plan.num_slots, plan.d_model, dtype=torch.float32)
    for spec, (_, (*tensors, positions)) in zip(plan.specs, _split(plan, inputs), strict=True):
        if spec is None:
            out.index_copy_(0, positions, tensors[0])
            continue
        clip, eps = spec
        features, mean, scale, weight, bias, norm_weight, norm_bias = tensors
        err = plan.kernel.embed_forward(
            features.data_ptr(),
            mean.data_ptr(),
            scale.data_ptr(),
            clip,
            weight.data_ptr(),
            bias.data_ptr(),
            norm_weight.data_ptr(),
            norm_bias.data_ptr(),
            eps,
            positions.data_ptr(),
            out.data_ptr(),
            plan.num_slots,
            features.shape[0],
            features.shape[1],
            plan.d_model,
            torch.get_num_threads(),
        )
        pointwise._check(err, "entity embedding")
    return out


class _Embedding(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, plan: _Plan, *inputs: torch.Tensor) -> torch.Tensor:
        ctx.plan = plan
        ctx.save_for_backward(*inputs)
        return _forward(plan, inputs)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        plan: _Plan = ctx.plan
        inputs = ctx.saved_tensors
        needs = ctx.needs_input_grad[1:]
        grads: list[torch.Tensor | None] = [None] * len(inputs)
        grad = grad.to(torch.float32).contiguous()
        for spec, (i, (*tensors, positions)) in zip(plan.specs, _split(plan, inputs), strict=True):
            if spec is None:
                if needs[i]:
                    grads[i] = grad.index_select(0, positions)
                continue
            if not any(needs[i + 3 : i + 3 + _PARAMS]):
                continue
            clip, eps = spec
            features, mean, scale, weight, bias, norm_weight, norm_bias = tensors
            params = weight, bias, norm_weight, norm_bias
            dparams = [torch.empty_like(p) for p in params]
            err = plan.kernel.embed_backward(
                features.data_ptr(),
                mean.data_ptr(),
                scale.data_ptr(),
                clip,
                weight.data_ptr(),
                bias.data_ptr(),
                norm_weight.data_ptr(),
                norm_bias.data_ptr(),
                eps,
                positions.data_ptr(),
                grad.data_ptr(),
                *(d.data_ptr() for d in dparams),
                plan.num_slots,
                features.shape[0],
                features.shape[1],
                plan.d_model,
                torch.get_num_threads(),
            )
            pointwise._check(err, "entity embedding backward")
            for j, d in enumerate(dparams):
                if needs[i + 3 + j]:
                    grads[i + 3 + j] = d
        return None, *grads
