"""What CPU options buy RogueNet on this machine: the C++ kernels, bfloat16 products
(``net.precision``), threads and the allocator setting.

Each variant runs in its own process (kernel switch, allocator setting and thread counts are
per process) on the inputs of benchmarks/rogue_net.py: 2,048 rows of 1-64 entities, d_model 32
and 64. Reports the median time of a rollout forward pass (``act``) and of a training step
(forward + backward of ``evaluate``).

usage: python benchmarks/cpu_options.py [--repeats 7] [--write]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _peer import machine
from results import replace_section

VARIANTS = {
    "float32, torch only, 1 thread (baseline)": {
        "threads": 1,
        "precision": "float32",
        "no_kernels": True,
    },
    "float32, kernels, 1 thread": {"threads": 1, "precision": "float32"},
    "bfloat16, kernels, 1 thread": {"threads": 1, "precision": "bfloat16"},
    "bfloat16, kernels, 1 thread, C library allocator defaults": {
        "threads": 1,
        "precision": "bfloat16",
        "keep_malloc": True,
    },
    "float32, kernels, 2 threads": {"threads": 2, "precision": "float32"},
    "bfloat16, kernels, 2 threads": {"threads": 2, "precision": "bfloat16"},
}


def measure(options: dict, d_model: int, repeats: int) -> dict[str, float]:
    """Run in a child process: time act and a training step."""
    import time

    import numpy as np
    import torch
    from rogue_net import CHOICES, FEATURES, make_inputs, to_vec_obs

    from entityrl.env import CategoricalActionSpace, Entity, ObsSpace
    from entityrl.nn import RogueNet, RogueNetConfig

    torch.set_num_threads(options["threads"])
    data = make_inputs(2048, seed=2048)
    space = ObsSpace({n: Entity([f"{n}{i}" for i in range(k)]) for n, k in FEATURES.items()})
    torch.manual_seed(0)
    net = RogueNet(
        space,
        {"act": CategoricalActionSpace([str(i) for i in range(CHOICES)])},
        RogueNetConfig(d_model=d_model, precision=options["precision"]),
    )
    obs = to_vec_obs(data)
    actions = net.act(obs).actions(obs)
    batch = net.prepare(obs)
    chosen = {n: torch.from_numpy(a.data[:, 0]) for n, a in actions.items()}

    def act() -> None:
        with torch.inference_mode():
            net(batch)

    def train() -> None:
        out = net(batch, chosen)
        h = out.heads["act"]
        (h.logprob.sum() + h.entropy.sum() + out.values.sum()).backward()

    def timed(fn) -> float:
        fn()
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return float(np.median(times))

    return {"act": timed(act), "train": timed(train)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        options, d_model = json.loads(args.child)
        print(json.dumps(measure(options, d_model, args.repeats)))
        return
    lines = [
        "| variant | d_model | act (ms) | vs baseline | train step (ms) | vs baseline |",
        "|---|---|---|---|---|---|",
    ]
    for d_model in (32, 64):
        baseline = None
        for name, options in VARIANTS.items():
            env = dict(os.environ)
            if options.get("keep_malloc"):
                env["ENTITYRL_KEEP_MALLOC"] = "1"
            if options.get("no_kernels"):
                env["ENTITYRL_NO_KERNELS"] = "1"
            out = subprocess.run(
                [sys.executable, __file__, "--repeats", str(args.repeats), "--child",
                 json.dumps([options, d_model])],
                capture_output=True, text=True, env=env, check=True,
            )  # fmt: skip
            r = json.loads(out.stdout.strip().splitlines()[-1])
            baseline = baseline or r
            lines.append(
                f"| {name} | {d_model} | {r['act'] * 1000:.0f} | {baseline['act'] / r['act']:.2f}x "
                f"| {r['train'] * 1000:.0f} | {baseline['train'] / r['train']:.2f}x |"
            )
            print(lines[-1], flush=True)
    table = "\n".join(lines)
    if args.write:
        replace_section(
            "CPU options: kernels, bfloat16, threads, allocator",
            f"Command: `python benchmarks/cpu_options.py --repeats {args.repeats} --write`\n\n"
            f"Machine: {machine()} ({cpu_features()}).\n\n"
            "RogueNet on 2,048 rows of 1-64 entities (the inputs of benchmarks/rogue_net.py), "
            "each variant in its own process, medians. `vs baseline` > 1 is faster. torch only "
            "= no C++ kernels (ENTITYRL_NO_KERNELS=1: torch's attention on padded grids, ATen's "
            "layer norm and GELU); kernels = entityrl.nn.kernels (attention, layer norm, GELU); "
            "bfloat16 = "
            "`net.precision=bfloat16`; the allocator variant turns off entityrl's glibc "
            "setting (ENTITYRL_KEEP_MALLOC=1).\n\n"
            f"{table}\n",
        )


def cpu_features() -> str:
    """The CPU's vector and bfloat16 matrix instructions, as torch sees them."""
    import torch

    found = [
        name
        for name, probe in (
            ("AVX-512", torch.cpu._is_avx512_supported),
            ("AVX512-BF16", torch.cpu._is_avx512_bf16_supported),
            ("AMX", torch.cpu._is_amx_tile_supported),
        )
        if probe()
    ]
    return ", ".join(found) or "no AVX-512, no bfloat16 instructions"


if __name__ == "__main__":
    main()
