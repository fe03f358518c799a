"""Training throughput on a device: entityrl's plain torch path (what runs on a GPU) against
enn-trainer 0.1.16 on the same device, in the same run, with benchmarks/throughput.py's
matched settings and measurement (samples/s from the first rollout to the last iteration).

``--device cuda`` (the day a GPU is there): entityrl with ``device=cuda`` against enn-trainer
with ``cuda: True``; ``--precision bfloat16`` adds entityrl's mixed-precision runs.
``--device cpu`` (here): three trainers on the CPU: entityrl with its C++ kernels (the
default), entityrl on the plain torch path (``ENTITYRL_NO_KERNELS=1``, PPO's loss in torch:
the code a GPU runs, measured where it can be) and enn-trainer. Writes the section
"Device throughput (DEVICE)" of RESULTS.md. The reference interpreter must see the device
(a CUDA build of torch there for ``--device cuda``); see throughput.py for its setup.

usage: python benchmarks/gpu.py [--device cuda|cpu] [--envs ...] [--runs 3]
                                [--timesteps 65536] [--precision float32 bfloat16]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _peer import PEER_PYTHON, machine, require_peer
from results import replace_section
from throughput import ENVS, entityrl_revision, median_of, peer_versions, run_ours, run_reference

Run = Callable[[str, int], dict]


def trainers(device: str, precisions: list[str], threads: int, steps: int) -> dict[str, Run]:
    """The trainers compared on ``device``: name -> run(env, seed)."""

    def ours(extra: list[str], variables: dict[str, str] | None = None) -> Run:
        return lambda name, seed: run_ours(name, 1, steps, seed, threads, extra, variables)

    found: dict[str, Run] = {}
    if device == "cpu":
        found["entityrl, kernels"] = ours(["device=cpu"])
        found["entityrl, torch path"] = ours(["device=cpu"], {"ENTITYRL_NO_KERNELS": "1"})
    else:
        for precision in precisions:
            found[f"entityrl, {precision}"] = ours(
                [f"device={device}", f"net.precision={precision}"]
            )
    found["enn-trainer"] = lambda name, seed: run_reference(
        name, 1, steps, seed, threads, cuda=device != "cpu"
    )
    return found


def require_device(device: str) -> None:
    """Fail before any run if the reference interpreter cannot see ``device``."""
    if device == "cpu":
        return
    probe = "import torch; print(torch.cuda.is_available())"
    seen = subprocess.run([str(PEER_PYTHON), "-c", probe], capture_output=True, text=True)
    if seen.stdout.strip() != "True":
        raise SystemExit(f"{PEER_PYTHON} sees no CUDA device: install a CUDA build of torch there")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--envs", nargs="+", default=list(ENVS), choices=ENVS)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--timesteps", type=int, default=65_536)
    parser.add_argument("--torch-threads", type=int, default=0)
    parser.add_argument(
        "--precision", nargs="+", default=["float32"], choices=["float32", "bfloat16"]
    )
    args = parser.parse_args()
    require_peer()
    require_device(args.device)
    runs = trainers(args.device, args.precision, args.torch_threads, args.timesteps)
    load_before = os.getloadavg()
    results: dict[str, dict[str, list[dict]]] = {}
    for run in range(args.runs):
        for name in args.envs:
            order = list(runs.items())
            for trainer, start in order if run % 2 == 0 else order[::-1]:
                answer = start(name, run + 1)
                results.setdefault(name, {}).setdefault(trainer, []).append(answer)
                print(f"run {run + 1} {name:<18} {trainer:<22} {answer['sps']:>9,.0f} samples/s")
    write(args, results, list(runs), load_before)


def write(
    args: argparse.Namespace,
    results: dict[str, dict[str, list[dict]]],
    names: list[str],
    load_before: tuple[float, ...],
) -> None:
    command = (
        f"python benchmarks/gpu.py --device {args.device} --runs {args.runs} "
        f"--timesteps {args.timesteps} --envs {' '.join(args.envs)}"
        + (f" --torch-threads {args.torch_threads}" if args.torch_threads else "")
        + (f" --precision {' '.join(args.precision)}" if args.device != "cpu" else "")
    )
    lines = [
        f"Command: `{command}`",
        f"Machine: {machine()}; trainers run in the reference interpreter with "
        f"{peer_versions()}; load average {load_before[0]:.1f} before the run (1-minute); "
        f"{entityrl_revision()}.",
        "",
        "Settings and measurement as in the end-to-end table (1 environment process, 128 "
        f"environments x 16 steps, d_model 32, 2 layers); medians of {args.runs} runs, samples/s.",
        "",
        "| environment | "
        + " | ".join(names)
        + " | "
        + " | ".join(f"{n} / enn-trainer" for n in names[:-1])
        + " |",
        "| --- |" + " ---: |" * (2 * len(names) - 1),
    ]
    for env, cell in results.items():
        sps = [median_of(cell[n], "sps") for n in names]
        ratios = [f"{s / sps[-1]:.2f}x" for s in sps[:-1]]
        lines.append(f"| {env} | " + " | ".join(f"{s:,.0f}" for s in sps) + " | "
                     + " | ".join(ratios) + " |")  # fmt: skip
    replace_section(f"Device throughput ({args.device})", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
