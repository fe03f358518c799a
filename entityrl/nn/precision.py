"""Compute precision of the transformer: float32, or bfloat16 where the CPU multiplies it natively.

Entity embeddings are narrow (d_model 32-128) and batches hold tens of thousands of entities,
so a training step is dominated by thin matrix products and the MLP's elementwise work over
``(entities, 4 * d_model)`` tensors. On CPUs with bfloat16 dot-product instructions
(AVX512-BF16, AMX) those products run several times faster in bfloat16 than in float32, and
bfloat16 activations halve the memory traffic of the elementwise work. Parameters, optimizer
state, layer norms, the residual stream, attention weights and every head stay in float32: only
the inputs and outputs of the transformer's linear layers (and the GELU between them) are
rounded to bfloat16, with float32 accumulation inside the products.

Rollouts are the other case: no gradients, and some 64-256 rows per call, where oneDNN's
bfloat16 product has a fixed cost of 14-18 us (more than float32's) plus casts of the input and
the parameters. There, and up to the crossover measured in :mod:`entityrl.nn.kernels.linear`,
a compiled kernel computes the same products (the same instruction, from a cached bfloat16
packing of the weight) in a few microseconds.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Literal, get_args

import torch
from torch import nn
from torch.nn import functional

from entityrl.nn.kernels.linear import small_batch_linear, training_linear

Precision = Literal["auto", "float32", "bfloat16"]
PRECISIONS: tuple[str, ...] = get_args(Precision)


def cpu_supports(feature: str) -> bool:
    """Whether the CPU has the feature ``feature`` (``avx512_bf16``, ``amx_tile``): as torch
    reports it, or, where this torch cannot tell (releases before 2.5), as Linux lists it in
    /proc/cpuinfo; False where neither can tell."""
    probe = getattr(torch.cpu, f"_is_{feature}_supported", None)
    if probe is None:
        return feature in _linux_cpu_flags()
    try:
        return bool(probe())
    except RuntimeError:
        return False


@functools.cache
def _linux_cpu_flags() -> frozenset[str]:
    """The CPU feature flags of /proc/cpuinfo (empty where there is none)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.partition(":")[2].split())
    return frozenset()


@functools.cache
def native_bfloat16() -> bool:
    """Whether this CPU has bfloat16 matrix instructions (AVX512-BF16 or AMX-BF16)."""
    return cpu_supports("avx512_bf16") or cpu_supports("amx_tile")


def compute_dtype(precision: str, device: torch.device | str = "cpu") -> torch.dtype:
    """The dtype of a precision setting on ``device``; "auto" is bfloat16 on CPUs that
    multiply it natively, float32 elsewhere. "bfloat16" is mixed precision on any device
    (bfloat16 products, float32 parameters, accumulation, residual stream and heads): the
    choice for GPUs with bfloat16 tensor cores."""
    if precision not in PRECISIONS:
        raise ValueError(f"net.precision must be one of {list(PRECISIONS)}, got {precision!r}")
    on_cpu = torch.device(device).type == "cpu"
    if precision == "bfloat16" or (precision == "auto" and on_cpu and native_bfloat16()):
        return torch.bfloat16
    return torch.float32


def linear_in(dtype: torch.dtype, layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """``layer(x)`` computed in ``dtype``: the float32 parameters are cast on the fly (they are
    small) and receive float32 gradients; ``x`` is cast if it is not in ``dtype`` already.
    In bfloat16 the kernels of kernels/linear.py run it where they serve: without gradients on
    small batches, with gradients at any size."""
    if dtype == layer.weight.dtype:
        return layer(x.to(dtype))
    if dtype == torch.bfloat16 and (y := small_batch_linear(layer, x)) is not None:
        return y
    if dtype == torch.bfloat16 and (y := training_linear(layer, x)) is not None:
        return y
    bias = None if layer.bias is None else layer.bias.to(dtype)
    return functional.linear(x.to(dtype), layer.weight.to(dtype), bias)


# Compiled matrix products kept by oneDNN (its primitive cache) and by PyTorch's oneDNN layer
# (its LRU cache); both default to 1024. Each entry holds about half a megabyte of generated
# code, and a training step uses about a dozen shapes (see layout.padded_slots), so 128 keeps
# every shape of recent batches while bounding the caches to some 60 MB instead of 500+.
COMPILED_PRODUCTS_KEPT = 128


def limit_compiled_product_caches() -> None:
    """Bound oneDNN's caches of compiled products, unless the user set them. Both libraries
    read these variables when they first compile a product, so call this before any forward
    pass (RogueNet's constructor does)."""
    for variable in ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY"):
        os.environ.setdefault(variable, str(COMPILED_PRODUCTS_KEPT))
