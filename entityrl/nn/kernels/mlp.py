"""The transformer block's MLP (linear, GELU, linear) and its residual sum in one kernel call
(AVX512-BF16 only).

Why: at tens of thousands of entity slots, the separate bfloat16 products and GELU of the MLP
spend most of their time moving ``(slots, 4 * d_model)`` activations through memory: written by
one call and read by the next, forward and backward. The fused kernel (in ``linear.cpp``,
beside the linear kernel whose products and weight packing it uses) works through chunks of
rows whose hidden activations stay in the cache, and its backward recomputes them instead of
keeping them from the forward. The residual sum happens as the output is stored, instead of
in a separate pass over the (float32) residual stream.

The forward rounds where torch's bfloat16 path does (each product's output and the GELU's),
so its output equals ``res + linear_in(bfloat16, down, gelu(linear_in(bfloat16, up, x)))`` to
the bit. The backward's input gradient follows torch's roundings too; the weight and bias gradients
are float32 sums (torch's path rounds the weight gradients to bfloat16 first).

Where the kernel cannot serve (no AVX512-BF16 or compiler, ``ENTITYRL_NO_KERNELS=1``, widths
that are not multiples of 16, other dtypes or devices), :func:`fused_mlp` returns None and the
caller runs the layers one by one.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.autograd.function import once_differentiable

from entityrl.nn.kernels import linear

__all__ = ["fused_mlp"]


def fused_mlp(
    up: nn.Linear, down: nn.Linear, x: torch.Tensor, residual: torch.Tensor
) -> torch.Tensor | None:
    """``residual + down(gelu(up(x)))``, the MLP computed in bfloat16 by the kernel and added
    to the float32 residual stream in the same pass; differentiable with respect to ``x``,
    ``residual`` and the layers' parameters. None where the caller should compute it with
    torch.

    ``x``: ``(rows, D)`` bfloat16 on the CPU; ``residual``: ``(rows, D)`` float32 on the CPU;
    ``up``: ``D -> F`` and ``down``: ``F -> D`` linear layers with biases and float32 CPU
    parameters, D and F multiples of 16. Returns ``(rows, D)`` float32.
    """
    if x.dtype != torch.bfloat16 or not x.is_cpu or x.dim() != 2:
        return None
    if residual.dtype != torch.float32 or not residual.is_cpu or residual.shape != x.shape:
        return None
    params = (
        up._parameters.get("weight"),
        up._parameters.get("bias"),
        down._parameters.get("weight"),
        down._parameters.get("bias"),
    )
    if any(p is None or p.dtype != torch.float32 or not p.is_cpu for p in params):
        return None
    w1, b1, w2, b2 = params  # type: ignore[misc]
    f, d = w1.shape
    if x.shape[1] != d or w2.shape != (d, f) or d % 16 or f % 16 or d == 0 or f == 0:
        return None
    kernel = linear._get_kernel()
    if kernel is None:
        return None
    w1, b1, w2, b2 = (p.contiguous() for p in (w1, b1, w2, b2))
    states = (linear.layer_state(kernel, up, w1), linear.layer_state(kernel, down, w2))
    x, residual = x.contiguous(), residual.contiguous()
    if torch.is_grad_enabled() and any(t.requires_grad for t in (x, w1, b1, w2, b2, residual)):
        return _FusedMlp.apply(x, w1, b1, w2, b2, residual, kernel, states)
    return _forward(kernel, x, w1, b1, w2, b2, residual, states)


def _forward(
    kernel: Any,
    x: torch.Tensor,
    w1: torch.Tensor,
    b1: torch.Tensor,
    w2: torch.Tensor,
    b2: torch.Tensor,
    residual: torch.Tensor,
    states: tuple[torch.Tensor, torch.Tensor],
) -> torch.Tensor:
    f, d = w1.shape
    y = torch.empty_like(residual)
    err = kernel.mlp_forward(
        x.data_ptr(),
        w1.data_ptr(),
        b1.data_ptr(),
        states[0].data_ptr(),
        w2.data_ptr(),
        b2.data_ptr(),
        states[1].data_ptr(),
        residual.data_ptr(),
        y.data_ptr(),
        x.shape[0],
        d,
        f,
        torch.get_num_threads(),
    )
    linear._check(err, "fused MLP")
    return y


class _FusedMlp(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any,
        x: torch.Tensor,
        w1: torch.Tensor,
        b1: torch.Tensor,
        w2: torch.Tensor,
        b2: torch.Tensor,
        residual: torch.Tensor,
        kernel: Any,
        states: tuple[torch.Tensor, torch.Tensor],
    ) -> torch.Tensor:
        ctx.save_for_backward(x, w1, b1, w2)
        ctx.kernel, ctx.state = kernel, states[0]
        return _forward(kernel, x, w1, b1, w2, b2, residual, states)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, w1, b1, w2 = ctx.saved_tensors
        # The residual passes its gradient through unchanged.
        return (*_backward(ctx.kernel, ctx.state, x, grad, w1, b1, w2), grad, None, None)


def _backward(
    kernel: Any,
    state: torch.Tensor,
    x: torch.Tensor,
    grad: torch.Tensor,
    w1: torch.Tensor,
    b1: torch.Tensor,
    w2: torch.Tensor,
) -> tuple[torch.Tensor, ...]:
    """(dx, dw1, db1, dw2, db2) of the MLP of the contiguous bfloat16 ``x``, from the gradient
    of its output; ``state``: ``w1``'s packing."""
    f, d = w1.shape
    grad = grad.to(torch.bfloat16).contiguous()
    dx = torch.empty_like(x)
    dw1, db1 = torch.empty_like(w1), torch.empty_like(b1)
    dw2, db2 = torch.empty_like(w2), torch.empty(d, dtype=torch.float32)
    err = kernel.mlp_backward(
        x.data_ptr(),
        grad.data_ptr(),
        w1.data_ptr(),
        b1.data_ptr(),
        state.data_ptr(),
        w2.data_ptr(),
        dx.data_ptr(),
        dw1.data_ptr(),
        db1.data_ptr(),
        dw2.data_ptr(),
        db2.data_ptr(),
        x.shape[0],
        d,
        f,
        torch.get_num_threads(),
    )
    linear._check(err, "fused MLP backward")
    return dx, dw1, db1, dw2, db2
