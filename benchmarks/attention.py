"""The ragged attention kernel against torch's fused attention on bucketed grids.

Why: the kernel (entityrl/nn/kernels) replaces per-bucket ``scaled_dot_product_attention``
calls in the policy's attention layers; this measures the gain at policy-sized shapes, for
inference (forward under ``no_grad``) and training (forward + backward).

Both sides get the same inputs: rows are sorted by length and cut into up to 16 buckets of at
least 16 rows (as entityrl.nn.layout does), each bucket a ``(rows, width)`` grid of slots in
one flat ``(slots, 3 * d_model)`` float32 (or bfloat16, as in training) tensor. SDPA runs once
per bucket on a view of its grid with a key-padding mask (as RaggedAttention does); the kernel
runs once on the flat tensor. Each figure is the median over REPEATS repeats of the mean time
per call over a batch of calls lasting at least 50 ms; kernel and SDPA repeats alternate so
that both see the same machine load. Prints a markdown table (milliseconds per call and the
speedup).

usage: python benchmarks/attention.py [--repeats 7] [--threads 1 2]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch.nn import functional

from entityrl.nn.kernels import kernel_available, ragged_attention

MIN_BUCKET_ROWS = 16
MAX_BUCKETS = 16
BATCH_SECONDS = 0.05


@dataclass
class Shape:
    name: str
    rows: int
    min_len: int
    max_len: int
    d_model: int
    n_head: int
    dtype: torch.dtype = torch.float32


SHAPES = [
    Shape("1024 rows x 33-34 tokens, d_model 32, 2 heads", 1024, 33, 34, 32, 2),
    Shape("same, bfloat16", 1024, 33, 34, 32, 2, torch.bfloat16),
    Shape("1024 rows x 17-33 tokens, d_model 32, 2 heads", 1024, 17, 33, 32, 2),
    Shape("same, bfloat16", 1024, 17, 33, 32, 2, torch.bfloat16),
    Shape("1024 rows x 1 token, d_model 32, 2 heads", 1024, 1, 1, 32, 2),
    Shape("128 rows x 17-33 tokens, d_model 32, 2 heads", 128, 17, 33, 32, 2),
    Shape("128 rows x 1-2 tokens, d_model 32, 2 heads", 128, 1, 2, 32, 2),
    Shape("1024 rows x 17-33 tokens, d_model 64, 4 heads", 1024, 17, 33, 64, 4),
]


@dataclass
class Batch:
    qkv: torch.Tensor  # (slots, 3 * d_model)
    row_slot: np.ndarray
    row_len: np.ndarray
    grids: list[tuple[int, int, torch.Tensor | None]]  # rows, width, key mask per bucket


def make_batch(shape: Shape, rng: np.random.Generator) -> Batch:
    """Rows of random lengths laid out in length-sorted bucket grids."""
    lengths = rng.integers(shape.min_len, shape.max_len + 1, shape.rows).astype(np.int64)
    order = np.argsort(lengths, kind="stable")
    count = max(1, min(MAX_BUCKETS, shape.rows // MIN_BUCKET_ROWS))
    cuts = np.linspace(0, shape.rows, count + 1).round().astype(np.int64)
    sizes: list[int] = []
    for start, stop in itertools.pairwise(cuts):
        sorted_len = lengths[order]
        if sizes and sorted_len[start - 1] == sorted_len[stop - 1]:
            sizes[-1] += int(stop - start)
        else:
            sizes.append(int(stop - start))
    row_slot = np.empty(shape.rows, dtype=np.int64)
    grids = []
    slots = start = 0
    for size in sizes:
        members = order[start : start + size]
        width = int(lengths[members].max())
        row_slot[members] = slots + np.arange(size) * width
        valid = torch.from_numpy(np.arange(width)[None, :] < lengths[members][:, None])
        grids.append((size, width, None if bool(valid.all()) else valid[:, None, None, :]))
        slots += size * width
        start += size
    qkv = torch.randn(slots, 3 * shape.d_model).to(shape.dtype)
    return Batch(qkv, row_slot, lengths, grids)


def sdpa(qkv: torch.Tensor, batch: Batch, n_head: int) -> torch.Tensor:
    """Per-bucket fused attention on views of the flat tensor, as RaggedAttention runs it."""
    d_model = qkv.shape[1] // 3
    parts = torch.split(qkv, [rows * width for rows, width, _ in batch.grids])
    outputs = []
    for part, (rows, width, mask) in zip(parts, batch.grids, strict=True):
        q, k, v = part.view(rows, width, 3, n_head, d_model // n_head).permute(2, 0, 3, 1, 4)
        y = functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        outputs.append(y.transpose(1, 2).reshape(rows * width, d_model))
    return outputs[0] if len(outputs) == 1 else torch.cat(outputs)


def kernel(qkv: torch.Tensor, batch: Batch, n_head: int) -> torch.Tensor:
    return ragged_attention(qkv, batch.row_slot, batch.row_len, n_head)


def seconds_per_call(fn: Callable[[], object]) -> float:
    """Mean time per call over a batch of calls lasting at least BATCH_SECONDS."""
    fn()
    calls = 1
    while True:
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed >= BATCH_SECONDS:
            return elapsed / calls
        calls *= 2


def measure(shape: Shape, threads: int, repeats: int) -> dict[str, float]:
    torch.set_num_threads(threads)
    batch = make_batch(shape, np.random.default_rng(0))
    x = batch.qkv.clone().requires_grad_()
    grad = torch.randn(batch.qkv.shape[0], shape.d_model).to(shape.dtype)
    valid = torch.zeros(batch.qkv.shape[0], dtype=torch.bool)
    for s, n in zip(batch.row_slot, batch.row_len, strict=True):
        valid[s : s + n] = True

    # The two agree on every token (SDPA's padding slots hold garbage, the kernel's zeros).
    with torch.no_grad():
        ours, theirs = kernel(batch.qkv, batch, shape.n_head), sdpa(batch.qkv, batch, shape.n_head)
    error = (ours - theirs)[valid].abs().max()
    assert error < (1e-4 if shape.dtype == torch.float32 else 3e-2), error

    cases: dict[str, Callable[[], object]] = {}
    for name, fn in (("kernel", kernel), ("sdpa", sdpa)):

        def forward(fn: Callable = fn) -> None:
            with torch.no_grad():
                fn(batch.qkv, batch, shape.n_head)

        def forward_backward(fn: Callable = fn) -> None:
            torch.autograd.grad(fn(x, batch, shape.n_head), x, grad)

        cases[f"{name} fwd"] = forward
        cases[f"{name} fwd+bwd"] = forward_backward
    times: dict[str, list[float]] = {case: [] for case in cases}
    for _ in range(repeats):
        for case, fn in cases.items():
            times[case].append(seconds_per_call(fn))
    return {case: statistics.median(ts) * 1e3 for case, ts in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    if not kernel_available():
        raise SystemExit("the attention kernel is unavailable (see the warning above)")
    print(f"torch {torch.__version__}, median of {args.repeats} repeats, ms per call\n")
    print(
        "| shape | threads | kernel fwd | SDPA fwd | speedup | kernel fwd+bwd | SDPA fwd+bwd "
        "| speedup |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for shape in SHAPES:
        for threads in args.threads:
            t = measure(shape, threads, args.repeats)
            fwd, fwd_bwd = t["sdpa fwd"] / t["kernel fwd"], t["sdpa fwd+bwd"] / t["kernel fwd+bwd"]
            print(
                f"| {shape.name} | {threads} | {t['kernel fwd']:.3f} | {t['sdpa fwd']:.3f} "
                f"| {fwd:.1f}x | {t['kernel fwd+bwd']:.3f} | {t['sdpa fwd+bwd']:.3f} "
                f"| {fwd_bwd:.1f}x |"
            )


if __name__ == "__main__":
    main()
