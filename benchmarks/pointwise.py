"""The LayerNorm, GELU and masked categorical kernels against ATen at a RogueNet's shapes.

Why: a PPO minibatch holds some 26,624 entity slots; each transformer block runs two layer
norms over ``(slots, d_model)`` float32 rows (their outputs cast to bfloat16 for the products
that follow, with ``net.precision=bfloat16``) and a GELU over the ``(slots, 4 * d_model)``
MLP activations, forward and backward. Every action head then turns ``(actors, choices)``
logits with illegal choices masked into actions, log-probabilities and entropies: sampling
in every rollout step (128 actors, no gradient), scoring the stored actions in every
minibatch (forward and backward). Categorical heads have a few choices (5 here);
select-entity heads as many as the most candidates in a row (64 here). The kernels of
entityrl.nn.kernels.pointwise and entityrl.nn.kernels.categorical replace those ATen calls;
this measures both on the same inputs.

The ATen side is what the network ran before the kernels: ``functional.layer_norm`` then
``.to(bfloat16)`` (whose backward casts the gradient back), ``functional.gelu``, and the torch
code of ``reference_categorical`` (masked_fill, log_softmax, the Gumbel-max sample, gather,
the entropy sum; about a dozen operations). Both categorical sides draw the same noise with
``torch.rand_like``, included in the sampling figures. Forward figures of the categorical
scoring build the autograd graph, as in training; backward figures time
``torch.autograd.grad`` on a retained graph (the forward excluded), for the categorical
heads of a loss using both the log-probabilities and the entropies. Each figure is the
median over REPEATS repeats of the mean time per call over a batch of calls lasting at least
50 ms; kernel and ATen repeats alternate so that both see the same machine load. Large
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

from entityrl.nn.kernels import categorical
from entityrl.nn.kernels.pointwise import gelu, kernel_available, layer_norm
from entityrl.nn.memory import reuse_large_allocations

D_MODELS = (32, 64)
SECTION = "LayerNorm, GELU and masked categorical kernels (benchmarks/pointwise.py)"
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


# (actors, choices) of the categorical heads: a rollout step (sampling), a minibatch of 1024
# steps of one actor each and one of many actors (26,624, as the slots), and select-entity
# heads over 64 candidates.
ROLLOUT_SHAPES = ((128, 5), (128, 64))
MINIBATCH_SHAPES = ((1024, 5), (26624, 5), (1024, 64))


def categorical_case(actors: int, choices: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Logits, a legal mask with about a fifth illegal (every row some legal choice) and legal
    chosen actions."""
    gen = torch.Generator().manual_seed(actors + choices)
    logits = torch.randn(actors, choices, generator=gen)
    chosen = torch.randint(0, choices, (actors,), generator=gen)
    legal = torch.rand(actors, choices, generator=gen) < 0.8
    legal[torch.arange(actors), chosen] = True
    return logits, legal, chosen


def categorical_sample_cases(actors: int, choices: int) -> list[Case]:
    logits, legal, _ = categorical_case(actors, choices)

    def sampler(fn: Callable[..., categorical.HeadOutput]) -> Callable[[], categorical.HeadOutput]:
        def sample() -> categorical.HeadOutput:
            with torch.no_grad():
                return fn(logits, legal)

        return sample

    kernel = sampler(categorical.masked_categorical)
    aten = sampler(categorical.reference_categorical)
    torch.manual_seed(0)
    ours = kernel()
    torch.manual_seed(0)
    assert torch.equal(ours.actions, aten().actions)  # the same noise, the same samples
    return [(f"Categorical ({actors}, {choices}) sample, no grad", kernel, aten)]


def categorical_score_cases(actors: int, choices: int) -> list[Case]:
    logits, legal, chosen = categorical_case(actors, choices)
    x = logits.requires_grad_()
    grads = (torch.randn(actors), torch.randn(actors))
    kernel, aten = categorical.masked_categorical, categorical.reference_categorical
    ours, theirs = kernel(x, legal, chosen), aten(x, legal, chosen)
    for a, b in ((ours.logprob, theirs.logprob), (ours.entropy, theirs.entropy)):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)

    def backward_of(out: categorical.HeadOutput) -> Callable[[], object]:
        outputs = (out.logprob, out.entropy)
        return lambda: torch.autograd.grad(outputs, (x,), grads, retain_graph=True)

    shape = f"Categorical ({actors}, {choices}) score"
    return [
        (f"{shape} fwd", lambda: kernel(x, legal, chosen), lambda: aten(x, legal, chosen)),
        (f"{shape} bwd", backward_of(ours), backward_of(theirs)),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--slots", type=int, default=26624)
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    if not kernel_available() or not categorical.kernel_available():
        raise SystemExit("the kernels are unavailable (see the warning above)")
    torch.set_num_threads(args.threads)
    reuse_large_allocations()
    cases: list[Case] = []
    for d_model in D_MODELS:
        for dtype in (torch.bfloat16, torch.float32):
            cases += layer_norm_cases(args.slots, d_model, dtype)
        for dtype in (torch.bfloat16, torch.float32):
            cases += gelu_cases(args.slots, 4 * d_model, dtype)
    for actors, choices in ROLLOUT_SHAPES:
        cases += categorical_sample_cases(actors, choices)
    for actors, choices in MINIBATCH_SHAPES:
        cases += categorical_score_cases(actors, choices)
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
            SECTION,
            f"Command: `python benchmarks/pointwise.py --repeats {args.repeats} --threads "
            f"{args.threads} --write`\n\nMachine: {machine()}.\n\n"
            "entityrl.nn.kernels.pointwise and entityrl.nn.kernels.categorical against what the "
            "network ran before (ATen's layer norm, then the cast to bfloat16 where the next "
            "layer takes it; ATen's GELU; the torch code of the masked categorical heads), on "
            f"the shapes of a training minibatch ({args.slots:,} entity slots; categorical "
            "heads over 1,024 or 26,624 actors) and of a rollout step (128 actors sampling, "
            f"no gradient), {args.threads} thread(s), ms per call, medians of {args.repeats} "
            "repeats with the two sides alternating. Backward = the gradient alone, on a "
            "retained graph; categorical forward = scoring the stored actions, building the "
            "graph; sampling includes drawing the noise (torch.rand_like, the same on both "
            "sides).\n\n" + "\n".join(table),
        )


if __name__ == "__main__":
    main()
