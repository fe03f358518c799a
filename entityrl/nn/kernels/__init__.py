"""CPU kernel for multi-head self-attention within ragged rows (forward and backward).

Why a kernel: the policy's rows are short (tens of entities) and ragged. Torch's fused
attention needs them padded into length-bucketed grids with key-padding masks, one call per
bucket, and computes on the padding; at policy sizes its forward and above all its backward
are several times slower than this kernel (see benchmarks/attention.py). The kernel attends
within each row of the flat ``(slots, 3 * d_model)`` tensor directly: no grids, no masks, the
rows split between threads by work, float32 accumulation for float32 and bfloat16 inputs.

The C++ source (``attention.cpp``) is compiled on first use for the CPU at hand (see
:mod:`entityrl.nn.kernels.build`). Where that is impossible, or for inputs the kernel does not
take (other dtypes or devices, heads wider than :func:`max_head_dim`), :func:`ragged_attention`
falls back to :func:`reference_attention`, plain torch with the same semantics.

Contract of :func:`ragged_attention`:

- ``qkv``: ``(slots, 3 * d_model)``; columns ``[0, d)`` are queries, ``[d, 2d)`` keys,
  ``[2d, 3d)`` values; head ``h`` owns columns ``[h * d_head, (h + 1) * d_head)`` of each.
- Row ``r`` is the slots ``row_slot[r] .. row_slot[r] + row_len[r] - 1``; rows do not overlap
  (they may come in any order). Slots no row covers are padding: their output is 0, and so is
  the gradient flowing to them.
- ``out[i]`` for head ``h`` is ``softmax_j(q_i . k_j / sqrt(d_head)) v_j`` over the tokens
  ``j`` of ``i``'s row. With ``visible`` (bool, per slot), a visible query does not attend to
  hidden keys; a hidden query attends to every key of its row (so every query sees at least
  itself).
"""

from __future__ import annotations

import ctypes
import warnings
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import torch
from torch.autograd.function import once_differentiable

from entityrl.nn.kernels import build

__all__ = ["kernel_available", "max_head_dim", "ragged_attention", "reference_attention"]

Index = torch.Tensor | npt.NDArray[np.integer] | list[int]

_DTYPE_CODES = {torch.float32: 0, torch.bfloat16: 1}
_ERRORS = {
    -1: "a row lies outside [0, slots) or has a negative length",
    -2: "rows overlap",
    -3: "unsupported head width",
    -4: "the rows changed between the forward and the backward",
    -5: "out of memory",
}


class _Kernel:
    """The loaded library's entry points, with their ctypes signatures set once."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        i64, ptr = ctypes.c_int64, ctypes.c_void_p
        self.forward = lib.ra_forward
        self.forward.argtypes = [ptr, ptr, ptr, i64, ptr, ptr, ptr, i64, i64, i64, i64, i64, i64]
        self.forward.restype = i64
        self.backward = lib.ra_backward
        self.backward.argtypes = [
            *(ptr, ptr, ptr, i64, ptr, ptr, ptr, ptr),
            *(i64, i64, i64, i64, i64, i64),
        ]
        self.backward.restype = i64
        self.saved_size = lib.ra_saved_size
        self.saved_size.argtypes = [ptr, i64, i64, i64]
        self.saved_size.restype = i64
        info = (ctypes.c_int64 * 4)()
        lib.ra_info(info)
        self.vector_width, self.max_head_dim, self.openmp = info[0], info[1], bool(info[2])


_LIBRARY = build.LazyKernel("attention", _Kernel)
_get_kernel = _LIBRARY.get
_reset = _LIBRARY.reset
kernel_available = _LIBRARY.available
_warned: set[str] = set()


def max_head_dim() -> int:
    """The widest head the kernel takes (0 without a kernel); wider heads use the fallback."""
    kernel = _get_kernel()
    return 0 if kernel is None else kernel.max_head_dim


def _index(x: Index) -> tuple[Any, int, int]:
    """(object keeping the data alive, address of its int64 data, length) of an index array."""
    if isinstance(x, torch.Tensor):
        if x.dtype is not torch.int64 or not x.is_cpu or not x.is_contiguous():
            x = x.to(device="cpu", dtype=torch.int64).contiguous()
        return x, x.data_ptr(), x.numel()
    a = x if isinstance(x, np.ndarray) else np.asarray(x)
    if a.dtype != np.int64 or not a.flags.c_contiguous:
        a = np.ascontiguousarray(a, dtype=np.int64)
    return a, a.__array_interface__["data"][0], a.size


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        warnings.warn(message, stacklevel=3)


class _Args(NamedTuple):
    """Kernel arguments besides the tensors."""

    row_slot: int  # address of the int64 array
    row_len: int  # address of the int64 array
    visible: int | None  # address of the bool array
    rows: int
    n_head: int
    d_head: int
    dtype: int  # code, see _DTYPE_CODES


def ragged_attention(
    qkv: torch.Tensor,
    row_slot: Index,
    row_len: Index,
    n_head: int,
    visible: torch.Tensor | npt.NDArray[np.bool_] | None = None,
) -> torch.Tensor:
    """Self-attention of every token over the tokens of its row; see the module docstring.

    ``qkv``: ``(slots, 3 * d_model)`` float32 or bfloat16 on the CPU (other dtypes and devices
    use :func:`reference_attention`); ``row_slot``, ``row_len``: int64 tensors or numpy arrays
    of length R; ``visible``: optional bool ``(slots,)`` (the three not to be modified before
    the backward, which may recompute the attention weights from them). Returns
    ``(slots, d_model)`` in ``qkv``'s dtype, differentiable with respect to ``qkv``; what the
    backward needs (the attention weights, or for bfloat16 on CPUs with AVX512-BF16 only their
    softmax statistics) is saved only when a gradient will be needed. Runs on
    ``torch.get_num_threads()`` threads (fewer for small calls). Raises ValueError for
    malformed inputs (rows outside the tensor or overlapping, bad shapes).
    """
    shape = qkv.shape
    if len(shape) != 2 or shape[1] % 3:
        raise ValueError(f"qkv must be (slots, 3 * d_model), got {tuple(shape)}")
    d_model = shape[1] // 3
    if n_head <= 0 or d_model % n_head:
        raise ValueError(f"d_model ({d_model}) must be divisible by n_head ({n_head})")
    # The device first: asking for the kernel starts its build, useless off the CPU.
    dtype = _DTYPE_CODES.get(qkv.dtype)
    if dtype is None or not qkv.is_cpu or (kernel := _get_kernel()) is None:
        return reference_attention(qkv, row_slot, row_len, n_head, visible)
    d_head = d_model // n_head
    if d_head > kernel.max_head_dim:
        _warn_once(
            f"ragged_attention: heads of {d_head} features are wider than the kernel's "
            f"{kernel.max_head_dim}; using the torch implementation"
        )
        return reference_attention(qkv, row_slot, row_len, n_head, visible)
    args, keep = _arguments(shape[0], row_slot, row_len, n_head, d_head, dtype, visible)
    if not qkv.is_contiguous():
        qkv = qkv.contiguous()
    if qkv.requires_grad and torch.is_grad_enabled():
        return _RaggedAttention.apply(qkv, kernel, args, keep)
    return _forward(kernel, qkv, None, args)


def _arguments(
    slots: int,
    row_slot: Index,
    row_len: Index,
    n_head: int,
    d_head: int,
    dtype: int,
    visible: torch.Tensor | npt.NDArray[np.bool_] | None,
) -> tuple[_Args, tuple]:
    """The kernel's arguments besides the tensors, and the arrays they point into (to keep
    alive while the kernel may use them)."""
    rs_keep, rs, rows = _index(row_slot)
    rl_keep, rl, rows_len = _index(row_len)
    if rows != rows_len:
        raise ValueError(f"row_slot has {rows} rows but row_len has {rows_len}")
    vis_keep, vis = None, None
    if visible is not None:
        vis_keep = torch.as_tensor(visible)
        if vis_keep.dtype is not torch.bool or not vis_keep.is_cpu or not vis_keep.is_contiguous():
            vis_keep = vis_keep.to(device="cpu", dtype=torch.bool).contiguous()
        if vis_keep.shape != (slots,):
            raise ValueError(f"visible must be ({slots},), got {tuple(vis_keep.shape)}")
        vis = vis_keep.data_ptr()
    return _Args(rs, rl, vis, rows, n_head, d_head, dtype), (rs_keep, rl_keep, vis_keep)


def _check(err: int) -> None:
    if err:
        message = f"ragged_attention: {_ERRORS.get(err, f'error {err}')}"
        raise MemoryError(message) if err == -5 else ValueError(message)


def _forward(
    kernel: _Kernel, qkv: torch.Tensor, saved: torch.Tensor | None, args: _Args
) -> torch.Tensor:
    rs, rl, vis, rows, n_head, d_head, dtype = args
    out = torch.empty((qkv.shape[0], n_head * d_head), dtype=qkv.dtype)
    _check(
        kernel.forward(
            qkv.data_ptr(),
            out.data_ptr(),
            None if saved is None else saved.data_ptr(),
            0 if saved is None else saved.numel(),
            rs,
            rl,
            vis,
            rows,
            qkv.shape[0],
            n_head,
            d_head,
            dtype,
            torch.get_num_threads(),
        )
    )
    return out


class _RaggedAttention(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any, qkv: torch.Tensor, kernel: _Kernel, args: _Args, keep: tuple
    ) -> torch.Tensor:
        out, saved = _forward_for_backward(kernel, qkv, args)
        ctx.save_for_backward(qkv, saved)
        ctx.kernel, ctx.args, ctx.keep = kernel, args, keep
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        qkv, saved = ctx.saved_tensors
        return _backward(ctx.kernel, qkv, saved, grad, ctx.args), None, None, None


def _forward_for_backward(
    kernel: _Kernel, qkv: torch.Tensor, args: _Args
) -> tuple[torch.Tensor, torch.Tensor]:
    """The forward, and what it saves for the backward."""
    size = kernel.saved_size(args.row_len, args.rows, args.n_head, args.dtype)
    _check(-1 if size < 0 else 0)
    saved = torch.empty(size, dtype=torch.float32)
    return _forward(kernel, qkv, saved, args), saved


def _backward(
    kernel: _Kernel, qkv: torch.Tensor, saved: torch.Tensor, grad: torch.Tensor, args: _Args
) -> torch.Tensor:
    """The gradient of ``qkv`` from the gradient of the forward's output."""
    rs, rl, vis, rows, n_head, d_head, dtype = args
    grad = grad.to(qkv.dtype).contiguous()
    dqkv = torch.empty_like(qkv)
    _check(
        kernel.backward(
            qkv.data_ptr(),
            grad.data_ptr(),
            saved.data_ptr(),
            saved.numel(),
            dqkv.data_ptr(),
            rs,
            rl,
            vis,
            rows,
            qkv.shape[0],
            n_head,
            d_head,
            dtype,
            torch.get_num_threads(),
        )
    )
    return dqkv


def reference_attention(
    qkv: torch.Tensor,
    row_slot: Index,
    row_len: Index,
    n_head: int,
    visible: torch.Tensor | npt.NDArray[np.bool_] | None = None,
) -> torch.Tensor:
    """Plain-torch ragged attention with :func:`ragged_attention`'s semantics, for any dtype
    and device (computed in float32, or float64 for float64 inputs): the fallback, and the
    reference the kernel is tested against. Pads every row to the longest one."""
    slots, width = qkv.shape
    d_model = width // 3
    d_head = d_model // n_head
    device = qkv.device

    def as_index(x: Index) -> torch.Tensor:
        x = x if isinstance(x, torch.Tensor) else torch.from_numpy(np.asarray(x))
        return x.to(device=device, dtype=torch.int64).reshape(-1)

    starts, lengths = as_index(row_slot), as_index(row_len)
    if len(lengths) and (
        (lengths < 0).any() or (starts < 0).any() or (starts + lengths > slots).any()
    ):
        raise ValueError(f"ragged_attention: {_ERRORS[-1]}")
    starts, lengths = starts[lengths > 0], lengths[lengths > 0]
    compute = torch.float64 if qkv.dtype == torch.float64 else torch.float32
    x = qkv.to(compute)
    rows, longest = len(lengths), int(lengths.max()) if len(lengths) else 0
    pos = torch.arange(longest, device=device)
    valid = pos[None, :] < lengths[:, None]
    slot = torch.where(valid, starts[:, None] + pos[None, :], 0)
    q, k, v = x[slot].view(rows, longest, 3, n_head, d_head).permute(2, 0, 3, 1, 4)
    mask = valid[:, None, None, :]
    if visible is not None:
        vis = torch.as_tensor(visible, device=device).to(torch.bool)[slot] & valid
        mask = mask & (~vis[:, None, :, None] | vis[:, None, None, :])
    logits = ((q @ k.transpose(-1, -2)) * d_head**-0.5).masked_fill(~mask, float("-inf"))
    y = (torch.softmax(logits, dim=-1) @ v).transpose(1, 2).reshape(rows, longest, d_model)
    out = x.new_zeros(slots, d_model).index_copy(0, slot[valid], y[valid])
    return out.to(qkv.dtype)
