"""CPU kernel for the policy's masked categorical distributions (the action heads).

Why a kernel: every rollout step and every PPO minibatch samples or scores one choice per
actor from ``(actors, choices)`` logits with illegal choices masked, and needs its
log-probability and the entropy, forward and backward. In torch that is a dozen small
operations each way, and ATen's log-softmax over a short last dimension is slow (the rows
have 2-10 choices for categorical heads): 1024 rows of 5 choices take some 50 us forward and
100 us with the backward on one core, for what a loop over the rows does in a few. The kernel
(``categorical.cpp``, compiled on first use like the others, see
:mod:`entityrl.nn.kernels.build`) does it in one pass each way and keeps two floats per row
for the backward (the row's largest logit and log-sum of exponentials; the probabilities are
recomputed from the logits).

:func:`masked_categorical` falls back to :func:`reference_categorical`, the torch code, where
the kernel cannot serve: no kernel on this machine (or ``ENTITYRL_NO_KERNELS=1``), logits not
float32 or not on the CPU, rows of no choices. Both draw the sampling noise with one
uniform tensor of the logits' shape from the caller's generator, so a seeded run samples the same actions with either, except
where two entries' scores agree to about 1e-7 (their logarithms may round differently).

The same library computes the select-entity heads' logits (:func:`select_logits`): each
(actor, candidate) pair's dot product of the candidate's embedding with a vector of the actor,
written to its place in the ``(actors, candidates)`` logits, and back.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from torch.autograd.function import once_differentiable

from entityrl.nn.kernels import build

__all__ = [
    "HeadOutput",
    "kernel_available",
    "masked_categorical",
    "reference_categorical",
    "select_logits",
]

# Kernel modes: score the given actions, take the argmax, sample.
_GIVEN, _ARGMAX, _SAMPLE = 0, 1, 2
_ERRORS = {
    -1: "unknown mode",
    -2: "bad sizes",
    -3: "a chosen action is out of range",
    -4: "a pair's slot, actor or position is out of range",
    -5: "out of memory",
}


@dataclass
class HeadOutput:
    """Per actor: the action (sampled or given), its log-probability and the entropy."""

    actions: torch.Tensor  # (A,) int64
    logprob: torch.Tensor  # (A,)
    entropy: torch.Tensor  # (A,)


class _Kernel:
    """The library's entry points, with their ctypes signatures set once."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        i64, ptr = ctypes.c_int64, ctypes.c_void_p
        self.forward = lib.cat_forward
        self.forward.argtypes = [ptr, ptr, ptr, ptr, i64, ptr, ptr, ptr, ptr, i64, i64, i64]
        self.backward = lib.cat_backward
        self.backward.argtypes = [ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, i64, i64, i64]
        self.select_forward = lib.sel_forward
        self.select_forward.argtypes = [ptr] * 6 + [ctypes.c_float] + [i64] * 5
        self.select_backward = lib.sel_backward
        self.select_backward.argtypes = [ptr] * 8 + [ctypes.c_float] + [i64] * 5
        for fn in (self.forward, self.backward, self.select_forward, self.select_backward):
            fn.restype = i64


_LIBRARY = build.LazyKernel("categorical", _Kernel)
_get_kernel = _LIBRARY.get
_reset = _LIBRARY.reset
kernel_available = _LIBRARY.available


def _check(err: int, op: str = "masked_categorical") -> None:
    if err:
        message = f"{op}: {_ERRORS.get(err, f'error {err}')}"
        raise MemoryError(message) if err == -5 else ValueError(message)


def _ptr(t: torch.Tensor | None) -> int | None:
    return None if t is None else t.data_ptr()


def masked_categorical(
    logits: torch.Tensor,
    legal: torch.Tensor | None,
    chosen: torch.Tensor | None = None,
    deterministic: bool = False,
    generator: torch.Generator | None = None,
) -> HeadOutput:
    """Sample (or score ``chosen``) from categorical distributions with illegal choices removed.

    ``logits``: ``(A, C)``; ``legal``: bool ``(A, C)`` or None (all legal); ``chosen``:
    integer ``(A,)`` or None, in which case the actions are the argmax of the legal logits
    (``deterministic``) or a sample (Gumbel-max with uniform noise drawn from ``generator``,
    torch's default generator if None). Illegal
    choices have probability exactly 0: never sampled, no part of the entropy, no gradient. A
    row with no legal choice gets action 0 (unless given), NaN log-probability and entropy,
    and zero gradient. Differentiable (once) with respect to ``logits`` through the
    log-probability and the entropy. Raises ValueError for inputs of the wrong shape or dtype
    and, on the kernel's path, for chosen actions outside ``[0, C)``.
    """
    if logits.dim() != 2:
        raise ValueError(
            f"masked_categorical: logits must be (actors, choices), got {tuple(logits.shape)}"
        )
    if legal is not None and (legal.dtype != torch.bool or legal.shape != logits.shape):
        raise ValueError(
            f"masked_categorical: legal must be bool of the logits' shape {tuple(logits.shape)}, "
            f"got {legal.dtype} {tuple(legal.shape)}"
        )
    if chosen is not None:
        if chosen.dtype != torch.int64:
            if chosen.is_floating_point() or chosen.is_complex() or chosen.dtype == torch.bool:
                raise ValueError(f"masked_categorical: chosen must be integer, got {chosen.dtype}")
            chosen = chosen.long()
        if chosen.shape != logits.shape[:1]:
            raise ValueError(
                f"masked_categorical: chosen must be ({logits.shape[0]},), got {tuple(chosen.shape)}"
            )
    # The tensors first: asking for the kernel starts its build, useless off the CPU.
    if (
        logits.dtype != torch.float32
        or not logits.is_cpu
        or logits.shape[1] == 0
        or (kernel := _get_kernel()) is None
    ):
        return reference_categorical(logits, legal, chosen, deterministic, generator)
    logits = logits.contiguous()
    legal = None if legal is None else legal.contiguous()
    if chosen is None:
        actions = torch.empty(logits.shape[0], dtype=torch.int64)
        mode = _ARGMAX if deterministic else _SAMPLE
    else:
        actions, mode = chosen.contiguous(), _GIVEN
    noise = _uniform(logits, generator) if mode == _SAMPLE else None
    call = _Call(legal, actions, noise, mode)
    if torch.is_grad_enabled() and logits.requires_grad:
        logprob, entropy = _MaskedCategorical.apply(logits, kernel, call)
    else:
        logprob, entropy, _ = _forward(kernel, logits, call, save=False)
    return HeadOutput(chosen if chosen is not None else actions, logprob, entropy)


class _Call(NamedTuple):
    """The kernel forward's inputs besides the logits."""

    legal: torch.Tensor | None
    actions: torch.Tensor  # given (mode _GIVEN) or to be written
    noise: torch.Tensor | None  # mode _SAMPLE
    mode: int


def _forward(
    kernel: _Kernel, logits: torch.Tensor, call: _Call, save: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The kernel's forward: (logprob, entropy, what the backward needs if ``save``: each
    row's maximum legal logit and log-sum of exponentials, ``(2, A)``); writes
    ``call.actions`` unless they are given."""
    rows, choices = logits.shape
    logprob, entropy = torch.empty(rows), torch.empty(rows)
    stats = torch.empty(2, rows) if save else None
    err = kernel.forward(
        logits.data_ptr(),
        _ptr(call.legal),
        _ptr(call.noise),
        call.actions.data_ptr(),
        call.mode,
        logprob.data_ptr(),
        entropy.data_ptr(),
        None if stats is None else stats.data_ptr(),
        None if stats is None else stats.data_ptr() + 4 * rows,
        rows,
        choices,
        torch.get_num_threads(),
    )
    _check(err)
    return logprob, entropy, stats


class _MaskedCategorical(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any, logits: torch.Tensor, kernel: _Kernel, call: _Call
    ) -> tuple[torch.Tensor, torch.Tensor]:
        logprob, entropy, stats = _forward(kernel, logits, call, save=True)
        ctx.save_for_backward(logits, call.legal, call.actions, stats, entropy)
        ctx.kernel = kernel
        # An unused output's gradient stays None: the kernel then skips its term.
        ctx.set_materialize_grads(False)
        return logprob, entropy

    @staticmethod
    @once_differentiable
    def backward(
        ctx: Any, glogprob: torch.Tensor | None, gentropy: torch.Tensor | None
    ) -> tuple[torch.Tensor | None, None, None]:
        logits, legal, actions, stats, entropy = ctx.saved_tensors
        if glogprob is None and gentropy is None:
            return None, None, None
        rows, choices = logits.shape
        glogprob = None if glogprob is None else glogprob.float().contiguous()
        gentropy = None if gentropy is None else gentropy.float().contiguous()
        dlogits = torch.empty_like(logits)
        err = ctx.kernel.backward(
            logits.data_ptr(),
            _ptr(legal),
            actions.data_ptr(),
            stats.data_ptr(),
            stats.data_ptr() + 4 * rows,
            entropy.data_ptr(),
            _ptr(glogprob),
            _ptr(gentropy),
            dlogits.data_ptr(),
            rows,
            choices,
            torch.get_num_threads(),
        )
        _check(err)
        return dlogits, None, None


def _uniform(like: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """Uniform [0, 1) noise of ``like``'s shape, dtype and device (``torch.rand_like`` takes no
    generator; with the default one this draws the same values)."""
    return torch.rand(like.shape, dtype=like.dtype, device=like.device, generator=generator)


def reference_categorical(
    logits: torch.Tensor,
    legal: torch.Tensor | None,
    chosen: torch.Tensor | None = None,
    deterministic: bool = False,
    generator: torch.Generator | None = None,
) -> HeadOutput:
    """:func:`masked_categorical` in plain torch, for any dtype and device: the fallback, and
    the reference the kernel is tested against.

    Illegal choices get logit -inf, hence probability exactly 0: they are never sampled.
    """
    if legal is not None:
        logits = logits.masked_fill(~legal, float("-inf"))
    logp = torch.log_softmax(logits, dim=-1)
    if chosen is None:
        if deterministic:
            chosen = logits.argmax(dim=-1)
        else:
            # Gumbel-max: argmax(logits + Gumbel noise) is a sample of softmax(logits).
            u = _uniform(logits, generator)
            chosen = (logits - torch.log(-torch.log(u))).argmax(dim=-1)
    logprob = logp.gather(1, chosen.unsqueeze(1)).squeeze(1)
    # p * log p with p = 0 where illegal (log p = -inf there, so zero it first).
    safe_logp = logp if legal is None else logp.masked_fill(~legal, 0.0)
    entropy = -(logp.exp() * safe_logp).sum(dim=-1)
    return HeadOutput(chosen, logprob, entropy)


def select_logits(
    x: torch.Tensor,
    u: torch.Tensor,
    slot: torch.Tensor,
    actor: torch.Tensor,
    pos: torch.Tensor,
    shape: tuple[int, int],
    scale: float,
) -> torch.Tensor:
    """``(actors, candidates)`` logits, 0 except ``logits.view(-1)[pos[p]] = scale *
    x[slot[p]] . u[actor[p]]`` for every pair ``p``; differentiable with respect to ``x``
    ``(slots, D)`` and ``u`` ``(actors, D)``. The kernel takes float32 CPU tensors (and int64
    indices, which it checks); anything else runs the same in torch."""
    if (
        any(t.dtype != torch.float32 or not t.is_cpu for t in (x, u))
        or x.dim() != 2
        or u.dim() != 2
        or x.shape[1] != u.shape[1]
        or (kernel := _get_kernel()) is None
    ):
        flat = scale * (x.index_select(0, slot) * u.index_select(0, actor)).sum(1)
        return flat.new_zeros(shape[0] * shape[1]).index_copy(0, pos, flat).view(shape)
    indices = tuple(t.to(torch.int64).contiguous() for t in (slot, actor, pos))
    return _SelectLogits.apply(x.contiguous(), u.contiguous(), indices, shape, scale, kernel)


class _SelectLogits(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any,
        x: torch.Tensor,
        u: torch.Tensor,
        indices: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
        shape: tuple[int, int],
        scale: float,
        kernel: _Kernel,
    ) -> torch.Tensor:
        slot, actor, pos = indices
        logits = torch.empty(shape, dtype=torch.float32)
        err = kernel.select_forward(
            x.data_ptr(),
            u.data_ptr(),
            slot.data_ptr(),
            actor.data_ptr(),
            pos.data_ptr(),
            logits.data_ptr(),
            scale,
            slot.shape[0],
            x.shape[0],
            u.shape[0],
            logits.numel(),
            x.shape[1],
        )
        _check(err, "select_logits")
        ctx.save_for_backward(x, u, slot, actor, pos)
        ctx.scale, ctx.kernel = scale, kernel
        return logits

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, u, slot, actor, pos = ctx.saved_tensors
        grad = grad.to(torch.float32).contiguous()
        dx, du = torch.empty_like(x), torch.empty_like(u)
        err = ctx.kernel.select_backward(
            x.data_ptr(),
            u.data_ptr(),
            slot.data_ptr(),
            actor.data_ptr(),
            pos.data_ptr(),
            grad.data_ptr(),
            dx.data_ptr(),
            du.data_ptr(),
            ctx.scale,
            slot.shape[0],
            x.shape[0],
            u.shape[0],
            grad.numel(),
            x.shape[1],
        )
        _check(err, "select_logits backward")
        return dx, du, None, None, None, None
