"""CPU kernels for LayerNorm over the last dimension and the exact (erf) GELU.

Why kernels: a RogueNet training step runs LayerNorm on tens of thousands of short rows
(d_model 32-256) and GELU on ``(entities, 4 * d_model)`` tensors, and ATen's CPU versions of
both are slow at these shapes; the layer norms' outputs were also cast to bfloat16 in a
separate pass before every bfloat16 matrix product. These kernels (``pointwise.cpp``, compiled
on first use like the attention kernel, see :mod:`entityrl.nn.kernels.build`) compute in
float32 with hand-vectorised code and write bfloat16 directly where asked; on one core they
take a fifth to a half of ATen's time (benchmarks/pointwise.py).

The library also holds the entity embedding's kernel (normalization, linear, ReLU and layer
norm of an entity type, written to the entities' slots), which reuses the layer norm's row
code; its Python side is :mod:`entityrl.nn.kernels.embedding`.

:func:`layer_norm` and :func:`gelu` fall back to torch (same results up to float32 rounding)
where the kernel cannot serve: no kernel on this machine (or ``ENTITYRL_NO_KERNELS=1``), other
devices, other dtypes. Both are differentiable (once: no double backward), and save nothing
for the backward when no gradient will be needed (rollouts).
"""

from __future__ import annotations

import ctypes
from typing import Any

import torch
from torch.autograd.function import once_differentiable
from torch.nn import functional

from entityrl.nn.kernels import build

__all__ = ["add_layer_norm", "gelu", "kernel_available", "layer_norm"]

_DTYPE_CODES = {torch.float32: 0, torch.bfloat16: 1}
_ERRORS = {-1: "unsupported dtype", -2: "bad sizes", -5: "out of memory"}


class _Kernel:
    """The library's entry points, with their ctypes signatures set once."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        i64, f64, ptr = ctypes.c_int64, ctypes.c_double, ctypes.c_void_p
        self.ln_forward = lib.pw_layer_norm_forward
        self.ln_forward.argtypes = [ptr, ptr, i64, ptr, ptr, ptr, f64, ptr, i64, ptr, ptr]
        self.ln_forward.argtypes += [i64, i64, i64]
        self.ln_backward = lib.pw_layer_norm_backward
        self.ln_backward.argtypes = [ptr, i64, ptr, ptr, ptr, ptr, ptr, ptr, ptr, i64, ptr, ptr]
        self.ln_backward.argtypes += [i64, i64, i64]
        self.gelu_forward = lib.pw_gelu_forward
        self.gelu_forward.argtypes = [ptr, ptr, i64, i64, i64]
        self.gelu_backward = lib.pw_gelu_backward
        self.gelu_backward.argtypes = [ptr, ptr, ptr, i64, i64, i64]
        # The entity embedding (its Python side: entityrl.nn.kernels.embedding).
        self.embed_forward = lib.pw_embed_forward
        self.embed_forward.argtypes = [ptr, ptr, ptr, f64, ptr, ptr, ptr, ptr, f64, ptr, ptr]
        self.embed_forward.argtypes += [i64, i64, i64, i64, i64]
        self.embed_backward = lib.pw_embed_backward
        self.embed_backward.argtypes = [ptr, ptr, ptr, f64, ptr, ptr, ptr, ptr, f64, ptr, ptr]
        self.embed_backward.argtypes += [ptr, ptr, ptr, ptr, i64, i64, i64, i64, i64]
        for fn in (
            self.ln_forward,
            self.ln_backward,
            self.gelu_forward,
            self.gelu_backward,
            self.embed_forward,
            self.embed_backward,
        ):
            fn.restype = i64


_LIBRARY = build.LazyKernel("pointwise", _Kernel)
_get_kernel = _LIBRARY.get
_reset = _LIBRARY.reset
kernel_available = _LIBRARY.available


def _check(err: int, op: str) -> None:
    if err:
        message = f"{op}: {_ERRORS.get(err, f'error {err}')}"
        raise MemoryError(message) if err == -5 else ValueError(message)


def _needs_graph(*tensors: torch.Tensor) -> bool:
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


# ---------------------------------------------------------------------------------------
# LayerNorm


def layer_norm(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    eps: float = 1e-5,
    out_dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """``functional.layer_norm(x, x.shape[-1:], weight, bias, eps).to(out_dtype)`` in one pass.

    ``x``: ``(..., D)``; ``weight``, ``bias``: ``(D,)``. The kernel takes float32 ``x``,
    ``weight`` and ``bias`` on the CPU and a float32 or bfloat16 ``out_dtype`` (default: ``x``'s
    dtype); anything else runs the torch expression above. Differentiable with respect to
    ``x``, ``weight`` and ``bias``; the per-row mean and inverse deviation are kept for the
    backward only when a gradient will be needed. Raises ValueError for mismatched shapes.
    """
    if x.dim() == 0:
        raise ValueError("layer_norm: x must have at least one dimension")
    d = x.shape[-1]
    if weight.shape != (d,) or bias.shape != (d,):
        raise ValueError(
            f"layer_norm: weight and bias must be ({d},) for x of shape {tuple(x.shape)}, "
            f"got {tuple(weight.shape)} and {tuple(bias.shape)}"
        )
    out_dtype = out_dtype or x.dtype
    # The tensors first: asking for the kernel starts its build, useless off the CPU.
    if (
        out_dtype not in _DTYPE_CODES
        or d == 0
        or any(t.dtype != torch.float32 or not t.is_cpu for t in (x, weight, bias))
        or (kernel := _get_kernel()) is None
    ):
        return functional.layer_norm(x, (d,), weight, bias, eps).to(out_dtype)
    x, weight, bias = x.contiguous(), weight.contiguous(), bias.contiguous()
    if _needs_graph(x, weight, bias):
        return _LayerNorm.apply(x, weight, bias, eps, out_dtype, kernel)
    return _ln_forward(kernel, x, weight, bias, eps, out_dtype, None)


def _ln_forward(
    kernel: _Kernel,
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    eps: float,
    out_dtype: torch.dtype,
    stats: tuple[torch.Tensor, torch.Tensor] | None,
    residual: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> torch.Tensor:
    """The kernel's forward into a new tensor; ``stats``: (mean, rstd) to fill, or None;
    ``residual``: (res, sum): normalize ``x + res``, written to ``sum``."""
    d = x.shape[-1]
    out = torch.empty(x.shape, dtype=out_dtype)
    mean, rstd = (None, None) if stats is None else (stats[0].data_ptr(), stats[1].data_ptr())
    res, total = (None, None) if residual is None else residual
    err = kernel.ln_forward(
        x.data_ptr(),
        None if res is None else res.data_ptr(),
        0 if res is None else _DTYPE_CODES[res.dtype],
        None if total is None else total.data_ptr(),
        weight.data_ptr(),
        bias.data_ptr(),
        eps,
        out.data_ptr(),
        _DTYPE_CODES[out_dtype],
        mean,
        rstd,
        x.numel() // d,
        d,
        torch.get_num_threads(),
    )
    _check(err, "layer_norm")
    return out


class _LayerNorm(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any,
        x: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor,
        eps: float,
        out_dtype: torch.dtype,
        kernel: _Kernel,
    ) -> torch.Tensor:
        rows = x.numel() // x.shape[-1]
        mean, rstd = torch.empty(rows, dtype=torch.float32), torch.empty(rows, dtype=torch.float32)
        out = _ln_forward(kernel, x, weight, bias, eps, out_dtype, (mean, rstd))
        ctx.save_for_backward(x, weight, mean, rstd)
        ctx.kernel, ctx.out_dtype = kernel, out_dtype
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, weight, mean, rstd = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        dx, _, dw, db = _ln_backward(
            ctx.kernel,
            grad,
            ctx.out_dtype,
            x,
            mean,
            rstd,
            weight,
            need_x=need_x,
            need_params=need_w or need_b,
        )
        return dx, dw if need_w else None, db if need_b else None, None, None, None


def _ln_backward(
    kernel: _Kernel,
    grad: torch.Tensor,
    out_dtype: torch.dtype,
    x: torch.Tensor,
    mean: torch.Tensor,
    rstd: torch.Tensor,
    weight: torch.Tensor,
    grad_x: torch.Tensor | None = None,
    res_dtype: torch.dtype | None = None,
    need_x: bool = True,
    need_params: bool = True,
) -> tuple[torch.Tensor | None, ...]:
    """The kernel's backward of the layer norm of ``x`` (float32; ``mean``, ``rstd``: its
    forward's statistics) from ``grad``, the gradient of its output (cast to ``out_dtype``).
    ``grad_x``: a float32 gradient reaching ``x`` by another path, added to its gradient;
    ``res_dtype``: also return that gradient in this dtype (for the residual of
    add_layer_norm). Returns (dx, dres, dweight, dbias), None for what was not asked."""
    grad = grad.to(out_dtype).contiguous()
    if grad_x is not None:
        grad_x = grad_x.to(torch.float32).contiguous()
    dx = torch.empty_like(x) if need_x else None
    dres = None if res_dtype is None else torch.empty(x.shape, dtype=res_dtype)
    dw, db = (torch.empty_like(weight), torch.empty_like(weight)) if need_params else (None, None)
    d = x.shape[-1]
    err = kernel.ln_backward(
        grad.data_ptr(),
        _DTYPE_CODES[out_dtype],
        None if grad_x is None else grad_x.data_ptr(),
        x.data_ptr(),
        mean.data_ptr(),
        rstd.data_ptr(),
        weight.data_ptr(),
        None if dx is None else dx.data_ptr(),
        None if dres is None else dres.data_ptr(),
        0 if res_dtype is None else _DTYPE_CODES[res_dtype],
        None if dw is None else dw.data_ptr(),
        None if db is None else db.data_ptr(),
        x.numel() // d,
        d,
        torch.get_num_threads(),
    )
    _check(err, "layer_norm backward")
    return dx, dres, dw, db


def add_layer_norm(
    x: torch.Tensor,
    res: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    eps: float = 1e-5,
    out_dtype: torch.dtype | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(s, layer_norm(s))`` for ``s = x + res`` in one pass (a residual connection followed
    by the next layer norm), the layer norm's output in ``out_dtype`` (default: ``s``'s dtype).

    ``x``: float32 ``(..., D)``; ``res``: float32 or bfloat16 of the same shape; ``s`` is
    float32. Differentiable with respect to ``x``, ``res``, ``weight`` and ``bias``; the
    kernel's backward adds the gradients of both outputs in the same pass. Other dtypes and
    devices run the torch expressions.
    """
    if res.shape != x.shape:
        raise ValueError(
            f"add_layer_norm: x and res must have the same shape, got {tuple(x.shape)} "
            f"and {tuple(res.shape)}"
        )
    d = x.shape[-1] if x.dim() else 0
    if (
        d == 0
        or (out_dtype or torch.float32) not in _DTYPE_CODES
        or res.dtype not in _DTYPE_CODES
        or not res.is_cpu
        or weight.shape != (d,)
        or bias.shape != (d,)
        or any(t.dtype != torch.float32 or not t.is_cpu for t in (x, weight, bias))
        or (kernel := _get_kernel()) is None
    ):
        total = x + res
        return total, layer_norm(total, weight, bias, eps, out_dtype)
    out_dtype = out_dtype or torch.float32
    x, res = x.contiguous(), res.contiguous()
    weight, bias = weight.contiguous(), bias.contiguous()
    if _needs_graph(x, res, weight, bias):
        return _AddLayerNorm.apply(x, res, weight, bias, eps, out_dtype, kernel)
    total = torch.empty_like(x)
    return total, _ln_forward(kernel, x, weight, bias, eps, out_dtype, None, (res, total))


class _AddLayerNorm(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any,
        x: torch.Tensor,
        res: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor,
        eps: float,
        out_dtype: torch.dtype,
        kernel: _Kernel,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        rows = x.numel() // x.shape[-1]
        mean, rstd = torch.empty(rows, dtype=torch.float32), torch.empty(rows, dtype=torch.float32)
        total = torch.empty_like(x)
        out = _ln_forward(kernel, x, weight, bias, eps, out_dtype, (mean, rstd), (res, total))
        ctx.save_for_backward(total, weight, mean, rstd)
        ctx.kernel, ctx.out_dtype, ctx.res_dtype = kernel, out_dtype, res.dtype
        return total, out

    @staticmethod
    @once_differentiable
    def backward(
        ctx: Any, grad_total: torch.Tensor, grad: torch.Tensor
    ) -> tuple[torch.Tensor | None, ...]:
        # (An output that was not used gets a gradient of zeros: autograd materializes it.)
        total, weight, mean, rstd = ctx.saved_tensors
        dx, dres, dw, db = _ln_backward(
            ctx.kernel, grad, ctx.out_dtype, total, mean, rstd, weight, grad_total, ctx.res_dtype
        )
        return dx, dres, dw, db, None, None, None


# ---------------------------------------------------------------------------------------
# GELU


def gelu(x: torch.Tensor) -> torch.Tensor:
    """``functional.gelu(x)`` (the exact form, x Phi(x)) of a float32 or bfloat16 CPU tensor of
    any shape, in ``x``'s dtype (computed in float32, error below 1e-6). Other dtypes and
    devices use ``functional.gelu``. Differentiable; saves ``x`` only when a gradient will be
    needed."""
    if x.dtype not in _DTYPE_CODES or not x.is_cpu or (kernel := _get_kernel()) is None:
        return functional.gelu(x)
    x = x.contiguous()
    if _needs_graph(x):
        return _Gelu.apply(x, kernel)
    return _gelu_forward(kernel, x)


def _gelu_forward(kernel: _Kernel, x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    err = kernel.gelu_forward(
        x.data_ptr(), y.data_ptr(), x.numel(), _DTYPE_CODES[x.dtype], torch.get_num_threads()
    )
    _check(err, "gelu")
    return y


class _Gelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, kernel: _Kernel) -> torch.Tensor:
        ctx.save_for_backward(x)
        ctx.kernel = kernel
        return _gelu_forward(kernel, x)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        (x,) = ctx.saved_tensors
        grad = grad.to(x.dtype).contiguous()
        dx = torch.empty_like(x)
        err = ctx.kernel.gelu_backward(
            x.data_ptr(),
            grad.data_ptr(),
            dx.data_ptr(),
            x.numel(),
            _DTYPE_CODES[x.dtype],
            torch.get_num_threads(),
        )
        _check(err, "gelu backward")
        return dx, None
