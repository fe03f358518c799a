"""The bfloat16 linear kernel against oneDNN at the shapes of rollout inference.

Why: during rollouts RogueNet runs on some 64-256 rows per call (one per environment or
entity), and with ``net.precision=bfloat16`` each of its linear layers was oneDNN's bfloat16
product, whose fixed cost exceeds the arithmetic at these sizes, plus casts of the input, the
weight and the bias. entityrl.nn.kernels.linear replaces them below its crossover
(``MAX_ROWS``); this measures the three ways of computing a layer on the same inputs:

- kernel: ``precision.linear_in(bfloat16, ...)`` without gradients, as the network runs it
  (the weight packed once, by the first call);
- oneDNN bfloat16: what linear_in ran before, ``functional.linear`` of x, the weight and the
  bias cast to bfloat16;
- float32: ``functional.linear`` in float32 (``net.precision=float32``).

x is bfloat16 as the network gives it (its layer norms and GELU write bfloat16), float32 for
the float32 side. A second table finds the crossover: kernel (called directly, past
MAX_ROWS) against oneDNN at d_model 32, 64 and 128 and more rows. Last, RogueNet ``act`` on
128 MultiSnake observations (4 entities each), with and without the kernel; and the fused MLP
(the same kernel's products with the GELU between them, in one call) against its layers one by
one, with and without gradients. Each figure is the
median over REPEATS repeats of the mean time per call over a batch of calls lasting at least
50 ms, the sides alternating so that all see the same machine load. Prints markdown tables;
``--write`` also puts them in benchmarks/RESULTS.md.

usage: python benchmarks/linear.py [--repeats 7] [--threads 1] [--write]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import statistics
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional

sys.path.insert(0, str(Path(__file__).parent))
from _peer import machine
from attention import seconds_per_call
from results import replace_section

from entityrl.envs import make_vec
from entityrl.nn import RogueNet, RogueNetConfig, precision, transformer
from entityrl.nn.kernels import linear as lk
from entityrl.nn.kernels.mlp import fused_mlp
from entityrl.nn.kernels.pointwise import gelu

ROWS = (64, 128, 256, 512, 1024)
CROSSOVER_ROWS = (1024, 2048, 4096)
LAYERS = {"qkv": (1, 3), "proj": (1, 1), "MLP in": (1, 4), "MLP out": (4, 1)}  # in, out / d


def layers(d_model: int) -> Iterator[tuple[str, nn.Linear]]:
    torch.manual_seed(d_model)
    for name, (k, n) in LAYERS.items():
        yield name, nn.Linear(k * d_model, n * d_model)


def median_times(sides: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Median seconds per call of each side, the sides alternating."""
    times: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(repeats):
        for name, fn in sides.items():
            times[name].append(seconds_per_call(fn))
    return {name: statistics.median(t) for name, t in times.items()}


def add_row(table: list[str], *cells: str) -> None:
    table.append("| " + " | ".join(cells) + " |")
    print(table[-1], flush=True)


def shape(layer: nn.Linear) -> str:
    return f"{layer.in_features}->{layer.out_features}"


def onednn(layer: nn.Linear, x: torch.Tensor) -> Callable[[], torch.Tensor]:
    return lambda: functional.linear(x, layer.weight.bfloat16(), layer.bias.bfloat16())


def small_shapes(repeats: int) -> list[str]:
    table = [
        "| layer (d_model 32) | rows | float32 | oneDNN bfloat16 | kernel | vs oneDNN "
        "| vs float32 |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    print("\n".join(table))
    for name, layer in layers(32):
        for rows in ROWS:
            x32 = torch.randn(rows, layer.in_features)
            x = x32.bfloat16()
            kernel = functools.partial(precision.linear_in, torch.bfloat16, layer, x)
            error = (kernel().float() - onednn(layer, x)().float()).abs().max()
            assert error <= 2**-7 * x.float().abs().max() * layer.weight.abs().sum(1).max()
            t = median_times(
                {
                    "kernel": kernel,
                    "onednn": onednn(layer, x),
                    "float32": functools.partial(functional.linear, x32, layer.weight, layer.bias),
                },
                repeats,
            )
            us = {side: f"{seconds * 1e6:.1f}" for side, seconds in t.items()}
            add_row(
                table,
                f"{name} {shape(layer)}",
                str(rows),
                *(us[side] for side in ("float32", "onednn", "kernel")),
                f"{t['onednn'] / t['kernel']:.1f}x",
                f"{t['float32'] / t['kernel']:.1f}x",
            )
    return table


def crossover(repeats: int) -> list[str]:
    table = [
        "| d_model | layer | rows | oneDNN bfloat16 | kernel | speedup |",
        "| --- | --- | --- | ---: | ---: | ---: |",
    ]
    print("\n".join(table))
    for d_model in (32, 64, 128):
        for name, layer in layers(d_model):
            packed = lk.pack(layer.weight)
            for rows in CROSSOVER_ROWS:
                x = torch.randn(rows, layer.in_features).bfloat16()
                t = median_times(
                    {
                        "kernel": functools.partial(lk.linear, x, layer.weight, layer.bias, packed),
                        "onednn": onednn(layer, x),
                    },
                    repeats,
                )
                add_row(
                    table,
                    str(d_model),
                    f"{name} {shape(layer)}",
                    str(rows),
                    f"{t['onednn'] * 1e6:.0f}",
                    f"{t['kernel'] * 1e6:.0f}",
                    f"{t['onednn'] / t['kernel']:.2f}x",
                )
    return table


@contextlib.contextmanager
def kernel_off() -> Iterator[None]:
    """The network as it was before the kernel: every bfloat16 product by oneDNN (linear_in
    without the kernel, and the blocks' MLPs as separate layers)."""
    saved = precision.small_batch_linear, transformer.fused_mlp
    precision.small_batch_linear = lambda layer, x: None
    transformer.fused_mlp = lambda up, down, x: None
    try:
        yield
    finally:
        precision.small_batch_linear, transformer.fused_mlp = saved


MLP_ROWS = (128, 1024, 4352, 34816)


def mlp_times(
    up: nn.Linear, down: nn.Linear, rows: int, repeats: int
) -> tuple[dict[str, float], dict[str, float]]:
    """Seconds per call of the MLP's layers one by one and fused: without gradients, then
    forward and backward."""
    x = torch.randn(rows, up.in_features).bfloat16()
    grad = torch.randn(rows, up.in_features).bfloat16()

    def layers(x: torch.Tensor) -> torch.Tensor:
        bf16 = torch.bfloat16
        return precision.linear_in(bf16, down, gelu(precision.linear_in(bf16, up, x)))

    def fused(x: torch.Tensor) -> torch.Tensor:
        y = fused_mlp(up, down, x)
        assert y is not None
        return y

    def train(fn: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[], None]:
        return lambda: fn(x.detach().requires_grad_()).backward(grad)

    with torch.no_grad():
        inference = median_times({"layers": lambda: layers(x), "fused": lambda: fused(x)}, repeats)
    training = median_times({"layers": train(layers), "fused": train(fused)}, repeats)
    return inference, training


def fused_mlp_table(repeats: int) -> list[str]:
    """The fused MLP (entityrl.nn.kernels.mlp) against its layers one by one (linear_in,
    the GELU kernel, linear_in), without and with gradients."""
    table = [
        "| d_model | rows | layers, no grad | fused | speedup | layers, fwd+bwd | fused "
        "| speedup |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    print("\n".join(table))
    for d in (32, 64):
        torch.manual_seed(d)
        up, down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        for rows in MLP_ROWS:
            t, g = mlp_times(up, down, rows, repeats)
            add_row(
                table,
                str(d),
                str(rows),
                f"{t['layers'] * 1e6:.0f}",
                f"{t['fused'] * 1e6:.0f}",
                f"{t['layers'] / t['fused']:.2f}x",
                f"{g['layers'] * 1e6:.0f}",
                f"{g['fused'] * 1e6:.0f}",
                f"{g['layers'] / g['fused']:.2f}x",
            )
    return table


def rogue_net_act(repeats: int) -> list[str]:
    env = make_vec("MultiSnake", 128, seed=0)
    obs = env.reset()
    torch.manual_seed(0)
    config = RogueNetConfig(d_model=32, n_layer=2, n_head=2, precision="bfloat16")
    net = RogueNet(env.obs_space, env.action_space, config)
    slots = sum(f.data.shape[0] for f in obs.features.values())

    def without_kernel() -> object:
        with kernel_off():
            return net.act(obs)

    t = median_times({"kernel": lambda: net.act(obs), "torch": without_kernel}, repeats)
    table = [
        "| RogueNet act, d_model 32, 2 layers | entity slots | oneDNN bfloat16 | kernel "
        "| speedup |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    print("\n".join(table))
    add_row(
        table,
        "128 MultiSnake observations",
        str(slots),
        f"{t['torch'] * 1e3:.3f} ms",
        f"{t['kernel'] * 1e3:.3f} ms",
        f"{t['torch'] / t['kernel']:.2f}x",
    )
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    if not lk.kernel_available():
        raise SystemExit("the bfloat16 linear kernel is unavailable here (it needs AVX512-BF16)")
    torch.set_num_threads(args.threads)
    print(
        f"torch {torch.__version__}, {args.threads} thread(s), median of {args.repeats} "
        "repeats, us per call\n"
    )
    with torch.no_grad():
        small = small_shapes(args.repeats)
        print()
        cross = crossover(args.repeats)
        print()
    act = rogue_net_act(args.repeats)
    print()
    mlp = fused_mlp_table(args.repeats)
    if args.write:
        replace_section(
            "bfloat16 linear kernel (benchmarks/linear.py)",
            f"Command: `python benchmarks/linear.py --repeats {args.repeats} --threads "
            f"{args.threads} --write`\n\nMachine: {machine()}.\n\n"
            "entityrl.nn.kernels.linear (through precision.linear_in, no gradients) against "
            "oneDNN's bfloat16 product with the casts linear_in ran before it, and float32, "
            f"at the shapes of a d_model 32 policy during rollouts; {args.threads} thread(s), "
            f"us per call, medians of {args.repeats} repeats with the sides alternating.\n\n"
            + "\n".join(small)
            + "\n\nCrossover (kernel called directly, past MAX_ROWS = "
            f"{lk.MAX_ROWS}), us per call:\n\n"
            + "\n".join(cross)
            + "\n\n"
            + "\n".join(act)
            + "\n\nThe fused MLP (entityrl.nn.kernels.mlp: linear, GELU, linear in one call) "
            "against the same layers one by one (linear_in, the GELU kernel, linear_in), "
            "us per call, bfloat16 input; fwd+bwd: forward and backward of a fresh graph:\n\n"
            + "\n".join(mlp),
        )


if __name__ == "__main__":
    main()
