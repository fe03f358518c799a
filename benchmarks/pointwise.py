"""The LayerNorm and GELU kernels against ATen at the shapes of a RogueNet training step.

Why: a PPO minibatch holds some 26,624 entity slots; each transformer block runs two layer
norms over ``(slots, d_model)`` float32 rows (their outputs cast to bfloat16 for the products
that follow, with ``net.precision=bfloat16``) and a GELU over the ``(slots, 4 * d_model)``
MLP activations, forward and backward. entityrl.nn.kernels.pointwise replaces those ATen
calls; this measures both on the same inputs.

The ATen side is what the network ran before the kernels: ``functional.layer_norm`` then
``.to(bfloat16)`` (whose backward casts the gradient back), and ``functional.gelu``. Backward
figures time ``torch.autograd.grad`` on a retained graph (the forward excluded). Each figure
is the median over REPEATS repeats of the mean time per call over a batch of calls lasting at
least 50 ms; kernel and ATen repeats alternate so that both see the same machine load. Large
allocations are reused as in training (entityrl.nn.memory). Prints a markdown table;
``--write`` also puts it in benchmarks/RESULTS.md.

usage: python benchmarks/pointwise.py [--repeats 7] [--threads 1] [--slots 26624] [--write]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import torch
from torch.nn import functional

sys.path.insert(0, str(Path(__file__).parent))
from _peer import machine
from attention import seconds_per_call
from results import replace_section

from entityrl.nn.kernels.pointwise import gelu, kernel_available, layer_norm
from entityrl.nn.memory import reuse_large_allocations

D_MODELS = (32, 64)
DTYPE_NAMES = {torch.float32: "float32", torch.bfloat16: "bfloat16"}

Case = tuple[str, Callable[[], object], Callable[[], object]]  # name, kernel, ATen


def backward(out: torch.Tensor, inputs: tuple[torch.Tensor, ...], grad: torch.Tensor):
    """A call running the backward of ``out``'s graph (kept for the next call)."""
    return lambda: torch.autograd.grad(out, inputs, grad, retain_graph=True)


def gelu_cases(slots: int, width: int, dtype: torch.dtype) -> list[Case]:
    x = torch.randn(slots, width).to(dtype).requires_grad_()
    grad = torch.randn(slots, width).to(dtype)
    with torch.no_grad():
        error = (gelu(x).float() - functional.gelu(x).float()).abs().max()
    assert error < 1e-2, error  # a bfloat16 unit at most
    shape = f"GELU ({slots}, {width}) {DTYPE_NAMES[dtype]}"
    with torch.no_grad():
        forward = (lambda: gelu(x), lambda: functional.gelu(x))
    return [
        (f"{shape} fwd", *forward),
        (f"{shape} bwd", backward(gelu(x), (x,), grad), backward(functional.gelu(x), (x,), grad)),
    ]


def layer_norm_cases(slots: int, d_model: int, out_dtype: torch.dtype) -> list[Case]:
    x = torch.randn(slots, d_model, requires_grad=True)
    weight = torch.randn(d_model, requires_grad=True)
    bias = torch.randn(d_model, requires_grad=True)
    grad = torch.randn(slots, d_model).to(out_dtype)
    inputs = (x, weight, bias)

    def kernel() -> torch.Tensor:
        return layer_norm(x, weight, bias, 1e-5, out_dtype)

    def aten() -> torch.Tensor:
        return functional.layer_norm(x, (d_model,), weight, bias, 1e-5).to(out_dtype)

    with torch.no_grad():
        error = (kernel().float() - aten().float()).abs().max()
    assert error < 5e-2, error  # a bfloat16 unit of values up to 8 at most

    def no_grad(fn: Callable[[], torch.Tensor]) -> Callable[[], torch.Tensor]:
        def run() -> torch.Tensor:
            with torch.no_grad():
                return fn()

        return run

    cast = "" if out_dtype == torch.float32 else " + cast to bfloat16"
    shape = f"LayerNorm ({slots}, {d_model}) float32{cast}"
    return [
        (f"{shape} fwd", no_grad(kernel), no_grad(aten)),
        (f"{shape} bwd", backward(kernel(), inputs, grad), backward(aten(), inputs, grad)),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--slots", type=int, default=26624)
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    if not kernel_available():
        raise SystemExit("the pointwise kernels are unavailable (see the warning above)")
    torch.set_num_threads(args.threads)
    reuse_large_allocations()
    cases: list[Case] = []
    for d_model in D_MODELS:
        for dtype in (torch.bfloat16, torch.float32):
            cases += layer_norm_cases(args.slots, d_model, dtype)
        for dtype in (torch.bfloat16, torch.float32):
            cases += gelu_cases(args.slots, 4 * d_model, dtype)
    print(
        f"torch {torch.__version__}, {args.threads} thread(s), median of {args.repeats} "
        "repeats, ms per call\n"
    )
    table = ["| operation | ATen | kernel | speedup |", "| --- | --- | --- | --- |"]
    print("\n".join(table))
    for name, kernel, aten in cases:
        times: dict[str, list[float]] = {"kernel": [], "aten": []}
        for _ in range(args.repeats):
            times["kernel"].append(seconds_per_call(kernel))
            times["aten"].append(seconds_per_call(aten))
        ours, theirs = (statistics.median(times[k]) * 1e3 for k in ("kernel", "aten"))
        table.append(f"| {name} | {theirs:.3f} | {ours:.3f} | {theirs / ours:.1f}x |")
        print(table[-1], flush=True)
    if args.write:
        replace_section(
            "LayerNorm and GELU kernels (benchmarks/pointwise.py)",
            f"Command: `python benchmarks/pointwise.py --repeats {args.repeats} --threads "
            f"{args.threads} --write`\n\nMachine: {machine()}.\n\n"
            "entityrl.nn.kernels.pointwise against what the network ran before (ATen's layer "
            "norm, then the cast to bfloat16 where the next layer takes it; ATen's GELU), on "
            f"the shapes of a training minibatch ({args.slots:,} entity slots), "
            f"{args.threads} thread(s), ms per call, medians of {args.repeats} repeats with "
            "the two sides alternating. Backward = the gradient alone, on a retained graph.\n\n"
            + "\n".join(table),
        )


if __name__ == "__main__":
    main()
