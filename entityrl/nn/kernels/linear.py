"""A CPU kernel for bfloat16 linear layers on small batches of rows (AVX512-BF16 only).

Why a kernel: during rollouts the network runs on one row per environment or entity, some
64-256 rows, through d_model-wide linear layers. There oneDNN's bfloat16 product costs 14-18 us
a call whatever the size (float32 3-13 us), and casting x, the weight and the bias to bfloat16
adds three more ops; four such layers run per transformer block and inference call. This kernel (``linear.cpp``,
compiled on first use like the others, see :mod:`entityrl.nn.kernels.build`) multiplies with
the same instruction oneDNN uses (VDPBF16PS: bfloat16 products, float32 sums) and gives the
same results in 6-9 us at 64-256 rows (benchmarks/linear.py): to the bit on the AVX512-BF16
machine measured; where oneDNN uses AMX it sums in another order, and a value may differ by
one bfloat16 unit. It stays faster than oneDNN up to about 2048 rows on one thread; above
``MAX_ROWS``, :func:`small_batch_linear` leaves the product to oneDNN.

The weight is packed once into the kernel's layout (its bfloat16 values, pairs of input
features interleaved in blocks of 16 outputs): :func:`small_batch_linear` keeps one packing per
layer, for as long as the layer lives. A packing is never stale: it keeps a float32 copy of the
weight it was made from, and every call compares the weight with it (in C, a fraction of the
product's time) and packs again when anything changed. Checking the weight's ``_version``
instead would miss every training step: the trainer's parameters are views into one flat tensor
stepped by a fused optimizer, and neither path bumps the views' version counters.

Where the kernel cannot run (no AVX512-BF16 or no compiler on this machine, or
``ENTITYRL_NO_KERNELS=1``), :func:`small_batch_linear` returns None and the caller uses torch.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import weakref
from typing import Any

import torch
from torch import nn
from torch.autograd.function import once_differentiable

from entityrl.nn.kernels import build

__all__ = [
    "MAX_ROWS",
    "kernel_available",
    "linear",
    "pack",
    "small_batch_linear",
    "training_linear",
]

logger = logging.getLogger(__name__)

# The most rows small_batch_linear gives the kernel. Measured against oneDNN on one thread
# (benchmarks/linear.py), the kernel is faster for every layer of d_model 32, 64 and 128 up to
# 2048 rows (by 3-64% there); at 4096 some layers of d_model 64 are slower (by 2-7%): both run
# at the instruction's throughput and only oneDNN's fixed cost separated them.
MAX_ROWS = 2048

_DTYPE_CODES = {torch.float32: 0, torch.bfloat16: 1}
_ERRORS = {-1: "unsupported dtype", -2: "bad sizes", -3: "no AVX512-BF16", -5: "out of memory"}


class _Kernel:
    """The library's entry points, with their ctypes signatures set once."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        i64, ptr = ctypes.c_int64, ctypes.c_void_p
        self.supported = bool(lib.lin_supported())
        self.state_bytes = lib.lin_state_bytes
        self.state_bytes.argtypes = [i64, i64]
        self.pack = lib.lin_pack
        self.pack.argtypes = [ptr, i64, i64, ptr]
        self.forward = lib.lin_forward
        self.forward.argtypes = [ptr, i64, ptr, ptr, ptr, ptr, i64, i64, i64, i64, i64]
        # The fused MLP (entityrl.nn.kernels.mlp).
        self.mlp_forward = lib.mlp_forward
        self.mlp_forward.argtypes = [*(ptr,) * 9, i64, i64, i64, i64]
        self.mlp_backward = lib.mlp_backward
        self.mlp_backward.argtypes = [ptr] * 11 + [i64] * 4
        self.backward = lib.lin_backward
        self.backward.argtypes = [ptr] * 6 + [i64] * 4
        for fn in (lib.lin_supported, self.state_bytes, self.pack, self.forward, self.backward):
            fn.restype = i64
        for fn in (self.mlp_forward, self.mlp_backward):
            fn.restype = i64


def _bind(lib: ctypes.CDLL) -> _Kernel | None:
    kernel = _Kernel(lib)
    if not kernel.supported:
        logger.info("bfloat16 linear kernel: this CPU lacks AVX512-BF16; using torch")
        return None
    return kernel


_LIBRARY = build.LazyKernel("linear", _bind)
_get_kernel = _LIBRARY.get
kernel_available = _LIBRARY.available


def _reset() -> None:
    """Forget the loaded kernel and the packed weights; for tests."""
    _LIBRARY.reset()
    _packed.clear()


def _require_kernel() -> _Kernel:
    kernel = _get_kernel()
    if kernel is None:
        raise RuntimeError(
            "the bfloat16 linear kernel is unavailable: "
            f"{build.unavailable_reason or 'this CPU lacks AVX512-BF16'}"
        )
    return kernel


def _check(err: int, op: str) -> None:
    if err:
        message = f"{op}: {_ERRORS.get(err, f'error {err}')}"
        raise MemoryError(message) if err == -5 else ValueError(message)


def _pack(kernel: _Kernel, weight: torch.Tensor) -> torch.Tensor:
    n, k = weight.shape
    state = torch.empty(kernel.state_bytes(n, k), dtype=torch.uint8)
    _check(kernel.pack(weight.data_ptr(), n, k, state.data_ptr()), "pack")
    return state


def pack(weight: torch.Tensor) -> torch.Tensor:
    """The packed form of a float32 ``(N, K)`` CPU weight for :func:`linear` (a uint8 tensor:
    a float32 copy of the weight, then its bfloat16 values in the kernel's layout). Raises
    RuntimeError without the kernel, ValueError for other weights."""
    kernel = _require_kernel()
    if weight.dim() != 2 or weight.dtype != torch.float32 or not weight.is_cpu:
        raise ValueError(f"pack: weight must be a 2-D float32 CPU tensor, got {weight!r:.80}")
    return _pack(kernel, weight.detach().contiguous())


def _forward(
    kernel: _Kernel,
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    state: torch.Tensor,
    out_dtype: torch.dtype,
) -> torch.Tensor:
    """The kernel on contiguous CPU tensors of the right dtypes (not checked)."""
    n, k = weight.shape
    out = torch.empty((*x.shape[:-1], n), dtype=out_dtype)
    err = kernel.forward(
        x.data_ptr(),
        _DTYPE_CODES[x.dtype],
        weight.data_ptr(),
        None if bias is None else bias.data_ptr(),
        state.data_ptr(),
        out.data_ptr(),
        _DTYPE_CODES[out_dtype],
        x.numel() // k,
        n,
        k,
        torch.get_num_threads(),
    )
    _check(err, "linear")
    return out


def linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    packed: torch.Tensor | None = None,
    out_dtype: torch.dtype = torch.bfloat16,
) -> torch.Tensor:
    """``functional.linear(x.bfloat16(), weight.bfloat16(), bias.bfloat16()).to(out_dtype)``
    by the kernel, without autograd.

    ``x``: ``(..., K)`` float32 or bfloat16; ``weight``: ``(N, K)`` float32; ``bias``: ``(N,)``
    float32 or None; all on the CPU. ``packed``: :func:`pack` of this weight (or of an earlier
    value of it: it is packed again if it changed), None to pack it now. ``out_dtype``:
    bfloat16 or float32 (the float32 sums, not rounded). Raises RuntimeError without the
    kernel, ValueError for other inputs.
    """
    kernel = _require_kernel()
    if weight.dim() != 2 or x.dim() == 0 or x.shape[-1] != weight.shape[1]:
        raise ValueError(
            f"linear: x (..., K) and weight (N, K) do not match: {tuple(x.shape)}, "
            f"{tuple(weight.shape)}"
        )
    if bias is not None and bias.shape != weight.shape[:1]:
        raise ValueError(f"linear: bias must be ({weight.shape[0]},), got {tuple(bias.shape)}")
    tensors = (x, weight) if bias is None else (x, weight, bias)
    if (
        x.dtype not in _DTYPE_CODES
        or out_dtype not in _DTYPE_CODES
        or any(t.dtype != torch.float32 for t in tensors[1:])
        or not all(t.is_cpu for t in tensors)
    ):
        raise ValueError("linear: x float32 or bfloat16, weight and bias float32, on the CPU")
    weight = weight.detach().contiguous()
    bias = None if bias is None else bias.detach().contiguous()
    state = _pack(kernel, weight) if packed is None else packed
    if state.dtype != torch.uint8 or state.numel() != kernel.state_bytes(*weight.shape):
        raise ValueError("linear: packed is not the packing of a weight of this shape")
    return _forward(kernel, x.detach().contiguous(), weight, bias, state, out_dtype)


# Each layer's packings by weight shape (a layer may also be used through a block of its rows,
# see entityrl.nn.kernels.block), for as long as the layer lives (weak keys: nothing outlives
# it, and a new layer at a dead one's address cannot find the old packing).
_packed: weakref.WeakKeyDictionary[nn.Module, dict[torch.Size, torch.Tensor]] = (
    weakref.WeakKeyDictionary()
)


def small_batch_linear(layer: nn.Linear, x: torch.Tensor) -> torch.Tensor | None:
    """``layer(x)`` in bfloat16 by the kernel (as ``functional.linear`` of ``x``, the weight
    and the bias rounded to bfloat16), or None where torch should compute it: a gradient will
    be needed, more than MAX_ROWS rows, ``x`` not a float32 or bfloat16 CPU tensor of
    ``in_features`` columns, parameters not float32 CPU tensors, or no kernel here."""
    # Read from the parameter dict: Module.__getattr__ costs 0.5 us a parameter, a fifth of
    # the kernel's time at these sizes. A parametrized weight (not in it) is left to torch.
    weight, bias = layer._parameters.get("weight"), layer._parameters.get("bias")
    if weight is None:
        return None
    if torch.is_grad_enabled() and (
        x.requires_grad or weight.requires_grad or (bias is not None and bias.requires_grad)
    ):
        return None
    if (
        x.dtype not in _DTYPE_CODES
        or not x.is_cpu
        or x.dim() == 0
        or x.shape[-1] != weight.shape[1]
        or x.numel() > MAX_ROWS * weight.shape[1]
        or weight.numel() == 0
        or weight.dtype != torch.float32
        or not weight.is_cpu
        or (bias is not None and (bias.dtype != torch.float32 or not bias.is_cpu))
    ):
        return None
    kernel = _get_kernel()
    if kernel is None:
        return None
    weight = weight.contiguous()
    bias = None if bias is None else bias.contiguous()
    state = layer_state(kernel, layer, weight)
    return _forward(kernel, x.contiguous(), weight, bias, state, torch.bfloat16)


def layer_state(kernel: _Kernel, layer: nn.Module, weight: torch.Tensor) -> torch.Tensor:
    """The packing kept for ``layer``, whose contiguous float32 weight (or block of rows of
    it) is ``weight`` (the kernel packs it again when it changed)."""
    states = _packed.get(layer)
    if states is None:
        states = _packed[layer] = {}
    state = states.get(weight.shape)
    if state is None:
        state = states[weight.shape] = _pack(kernel, weight)
    return state


def training_linear(layer: nn.Linear, x: torch.Tensor) -> torch.Tensor | None:
    """``layer(x)`` in bfloat16 with gradients for ``x`` and the layer's float32 parameters, or
    None where torch should compute it: no kernel here, no bias, widths that are not multiples
    of 16, or inputs other than a 2-D float32 or bfloat16 CPU tensor.

    The forward is :func:`small_batch_linear`'s product up to MAX_ROWS rows, and above, oneDNN's
    linear with the bias added inside the product where torch has it (``functional.linear`` in
    bfloat16 first copies the bias into every row of its output: inside a training step, at
    34,816 x 96 outputs, that copy cost 1.9 ms beside the product's 1.0). Either gives torch's
    values to the bit. The backward is one kernel call: ``dx`` rounded as torch's product, and
    float32 sums for the weight and bias gradients (torch's path rounds them to bfloat16).
    """
    weight, bias = layer._parameters.get("weight"), layer._parameters.get("bias")
    if weight is None or bias is None:
        return None
    n, k = weight.shape
    if (
        x.dim() != 2
        or x.dtype not in _DTYPE_CODES
        or not x.is_cpu
        or x.shape[1] != k
        or n % 16
        or k % 16
        or n == 0
        or k == 0
        or any(p.dtype != torch.float32 or not p.is_cpu for p in (weight, bias))
    ):
        return None
    kernel = _get_kernel()
    if kernel is None:
        return None
    return _TrainingLinear.apply(x, weight, bias, kernel, layer)


@functools.cache
def _fused_bias_linear() -> Any:
    """oneDNN's linear with a fused bias (``mkldnn._linear_pointwise``), where torch has it."""
    if not torch.backends.mkldnn.is_available():
        return None
    return getattr(torch.ops.mkldnn, "_linear_pointwise", None)


class _TrainingLinear(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any,
        x: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor,
        kernel: _Kernel,
        layer: nn.Linear,
    ) -> torch.Tensor:
        x = x.to(torch.bfloat16).contiguous()
        weight, bias = weight.contiguous(), bias.contiguous()
        ctx.save_for_backward(x, weight)
        ctx.kernel = kernel
        return _training_forward(kernel, layer, x, weight, bias)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, weight = ctx.saved_tensors
        return (*_backward(ctx.kernel, x, grad, weight, ctx.needs_input_grad[0]), None, None)


def _training_forward(
    kernel: _Kernel, layer: nn.Linear, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor
) -> torch.Tensor:
    """training_linear's product of contiguous bfloat16 ``x`` and ``layer``'s contiguous
    float32 ``weight`` and ``bias``."""
    fused = _fused_bias_linear()
    if x.shape[0] <= MAX_ROWS or fused is None:
        return _forward(kernel, x, weight, bias, layer_state(kernel, layer, weight), torch.bfloat16)
    return fused(x, weight.to(torch.bfloat16), bias.to(torch.bfloat16), "none", [], "")


def _backward(
    kernel: _Kernel, x: torch.Tensor, grad: torch.Tensor, weight: torch.Tensor, need_x: bool
) -> tuple[torch.Tensor | None, torch.Tensor, torch.Tensor]:
    """(dx or None, dweight, dbias) of training_linear's product of the contiguous bfloat16
    ``x`` and the float32 ``weight``, from the gradient of its output."""
    grad = grad.to(torch.bfloat16).contiguous()
    n, k = weight.shape
    dx = torch.empty_like(x) if need_x else None
    dw, db = torch.empty_like(weight), torch.empty(n, dtype=torch.float32)
    err = kernel.backward(
        x.data_ptr(),
        grad.data_ptr(),
        weight.data_ptr(),
        None if dx is None else dx.data_ptr(),
        dw.data_ptr(),
        db.data_ptr(),
        x.shape[0],
        n,
        k,
        torch.get_num_threads(),
    )
    _check(err, "linear backward")
    return dx, dw, db
