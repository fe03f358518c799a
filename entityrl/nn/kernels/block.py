"""A whole transformer block (bfloat16, packed rows) as one chain of kernel calls: one
autograd node instead of one per layer.

Why: at a few thousand slots or fewer (every rollout step, and training on environments with
one or a few entities per row) each of a block's kernels takes a few tens of microseconds, and
the Python around each one (its wrapper's checks, its own autograd node, casts) cost about as
much again. Here the block calls the same kernels, with the same inputs, one after another,
forward and backward, under a single node: the values and gradients are those of the layer by
layer path to the bit, including the residual sums (which the layer norm backward and the
fused MLP already fold into their passes).

Where every row holds one slot (environments with a single entity per observation), each
entity attends only to itself: the attention's output is its value, and its queries and keys
get no gradient (the softmax of one score is 1 whatever the score). The block then computes
only the value rows of the ``qkv`` product, forward and backward, and calls no attention
kernel; the query and key parameters get zero gradients, as they would have.

The block is ``x2 = x + proj(attention(qkv(ln1(x))))``, ``out = x2 + mlp(ln2(x2))``, as
:class:`entityrl.nn.transformer.Block` computes it with the ragged attention kernel;
:func:`fused_block` returns None where that path would not run its kernels (another dtype or
layout, widths that are not multiples of 16, heads wider than the attention kernel takes, a
missing kernel), and the caller goes layer by layer.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
from torch import nn
from torch.autograd.function import once_differentiable

from entityrl.nn import kernels as attention
from entityrl.nn.kernels import linear, mlp, pointwise

__all__ = ["fused_block"]

_BF16 = torch.bfloat16


class _Plan(NamedTuple):
    """Everything but the tensors: kernels, the attention's arguments, the layers."""

    norm_kernel: Any
    linear_kernel: Any
    attention_kernel: Any
    attention_args: Any  # None: every row is one slot, which attends only to itself
    keep: tuple  # what the attention arguments point into
    qkv: nn.Linear
    proj: nn.Linear
    up_state: torch.Tensor  # the MLP's first weight, packed
    down_state: torch.Tensor
    eps1: float
    eps2: float


def fused_block(
    x: torch.Tensor,
    ln1: nn.LayerNorm,
    qkv: nn.Linear,
    proj: nn.Linear,
    ln2: nn.LayerNorm,
    up: nn.Linear,
    down: nn.Linear,
    n_head: int,
    row_slot: torch.Tensor,
    row_len: torch.Tensor,
    visible: torch.Tensor | None,
    slot_per_row: bool = False,
) -> torch.Tensor | None:
    """The block's output for the float32 ``(slots, d_model)`` residual stream ``x`` whose rows
    are ``row_slot``, ``row_len`` (and ``visible``, as :func:`entityrl.nn.kernels.
    ragged_attention` takes them), computed in bfloat16 by the kernels; differentiable with
    respect to ``x`` and every layer's parameters. ``slot_per_row``: slot i is row i, the
    whole of it (no padding). None where the kernels cannot compute it."""
    # Read from the parameter dicts: Module.__getattr__ costs ~0.4 us a parameter, and this
    # runs for every block of every inference step. (A parametrized weight is not in the dict:
    # None, and the block goes layer by layer.)
    params = tuple(
        layer._parameters.get(name)
        for layer in (ln1, qkv, proj, ln2, up, down)
        for name in ("weight", "bias")
    )
    if x.dim() != 2 or x.dtype != torch.float32 or not x.is_cpu:
        return None
    if any(p is None or p.dtype != torch.float32 or not p.is_cpu for p in params):
        return None
    qkv_w, proj_w, up_w, down_w = params[2], params[4], params[8], params[10]
    d = x.shape[1]
    f = up_w.shape[0]
    if (
        d == 0
        or d % 16
        or f % 16
        or d % n_head
        or qkv_w.shape != (3 * d, d)
        or proj_w.shape != (d, d)
        or up_w.shape != (f, d)
        or down_w.shape != (d, f)
    ):
        return None
    norm_kernel, linear_kernel = pointwise._get_kernel(), linear._get_kernel()
    attention_kernel = attention._get_kernel()
    if (
        norm_kernel is None
        or linear_kernel is None
        or attention_kernel is None
        or d // n_head > attention_kernel.max_head_dim
    ):
        return None
    args, keep = (
        (None, ())
        if slot_per_row
        else attention._arguments(x.shape[0], row_slot, row_len, n_head, d // n_head, 1, visible)
    )
    params = tuple(p.contiguous() for p in params)
    plan = _Plan(
        norm_kernel,
        linear_kernel,
        attention_kernel,
        args,
        keep,
        qkv,
        proj,
        linear.layer_state(linear_kernel, up, params[8]),
        linear.layer_state(linear_kernel, down, params[10]),
        ln1.eps,
        ln2.eps,
    )
    x = x.contiguous()
    if torch.is_grad_enabled() and (x.requires_grad or any(p.requires_grad for p in params)):
        return _Block.apply(x, plan, *params)
    return _forward(x, plan, params, None)[0]


def _forward(
    x: torch.Tensor, plan: _Plan, params: tuple[torch.Tensor, ...], stats: list | None
) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    """The output, and the intermediate values the backward needs; ``stats``: the two layer
    norms' (mean, rstd) to fill, or None without a backward."""
    ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, w1, b1, w2, b2 = params
    stats1, stats2 = (None, None) if stats is None else stats
    n1 = pointwise._ln_forward(plan.norm_kernel, x, ln1_w, ln1_b, plan.eps1, _BF16, stats1)
    if plan.attention_args is None:  # each slot attends to itself: a is its value
        d = x.shape[1]
        q = saved = None
        a = linear._training_forward(
            plan.linear_kernel, plan.qkv, n1, qkv_w[2 * d :], qkv_b[2 * d :]
        )
    else:
        q = linear._training_forward(plan.linear_kernel, plan.qkv, n1, qkv_w, qkv_b)
        if stats is None:
            a, saved = attention._forward(plan.attention_kernel, q, None, plan.attention_args), None
        else:
            args = plan.attention_args
            a, saved = attention._forward_for_backward(plan.attention_kernel, q, args)
    p = linear._training_forward(plan.linear_kernel, plan.proj, a, proj_w, proj_b)
    x2 = torch.empty_like(x)
    n2 = pointwise._ln_forward(plan.norm_kernel, x, ln2_w, ln2_b, plan.eps2, _BF16, stats2, (p, x2))
    states = (plan.up_state, plan.down_state)
    out = mlp._forward(plan.linear_kernel, n2, w1, b1, w2, b2, x2, states)
    return out, (n1, q, saved, a, x2, n2)


def _statistics(rows: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [tuple(torch.empty(rows, dtype=torch.float32) for _ in range(2)) for _ in range(2)]


class _Block(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, plan: _Plan, *params: torch.Tensor) -> torch.Tensor:
        stats = _statistics(x.shape[0])
        out, (n1, q, saved, a, x2, n2) = _forward(x, plan, params, stats)
        (mean1, rstd1), (mean2, rstd2) = stats
        ctx.save_for_backward(x, n1, q, saved, a, x2, n2, mean1, rstd1, mean2, rstd2, *params)
        ctx.plan = plan
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, n1, q, saved, a, x2, n2, mean1, rstd1, mean2, rstd2, *params = ctx.saved_tensors
        ln1_w, _, qkv_w, _, proj_w, _, ln2_w, _, w1, b1, w2, _ = params
        plan: _Plan = ctx.plan
        grad = grad.to(torch.float32).contiguous()
        dn2, dw1, db1, dw2, db2 = mlp._backward(
            plan.linear_kernel, plan.up_state, n2, grad, w1, b1, w2
        )
        # x2 reaches the output directly (the MLP's residual) and through ln2.
        dx2, dp, dln2_w, dln2_b = pointwise._ln_backward(
            plan.norm_kernel, dn2, _BF16, x2, mean2, rstd2, ln2_w, grad, _BF16
        )
        da, dproj_w, dproj_b = linear._backward(plan.linear_kernel, a, dp, proj_w, True)
        if plan.attention_args is None:  # a is the value rows' product
            d = x.shape[1]
            dn1, dv_w, dv_b = linear._backward(plan.linear_kernel, n1, da, qkv_w[2 * d :], True)
            dqkv_w = torch.cat([dv_w.new_zeros(2 * d, d), dv_w])
            dqkv_b = torch.cat([dv_b.new_zeros(2 * d), dv_b])
        else:
            dq = attention._backward(plan.attention_kernel, q, saved, da, plan.attention_args)
            dn1, dqkv_w, dqkv_b = linear._backward(plan.linear_kernel, n1, dq, qkv_w, True)
        # x reaches x2 directly (the attention's residual) and through ln1.
        dx, _, dln1_w, dln1_b = pointwise._ln_backward(
            plan.norm_kernel, dn1, _BF16, x, mean1, rstd1, ln1_w, dx2
        )
        grads = (dln1_w, dln1_b, dqkv_w, dqkv_b, dproj_w, dproj_b, dln2_w, dln2_b)
        return dx, None, *grads, dw1, db1, dw2, db2
