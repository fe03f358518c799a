"""What the C++ kernels cost on first use: the build of all of them from a cold cache (per
compiler), and the time to a first training iteration of `entityrl train CherryPick` with a
cold and with a warm kernel cache.

Every measurement runs in a fresh process with ENTITYRL_KERNEL_CACHE pointing to a new
temporary directory (cold) or to one the previous run filled (warm). Prints medians of
--repeats runs, and the CPU time the compilers used (cold builds).

    python benchmarks/compile_time.py --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Builds (or loads) every kernel the way the first training step does, and reports the wall
# time and the compilers' CPU time.
_BUILD_ALL = """
import json, resource, time
start = time.perf_counter()
from entityrl.nn import kernels
from entityrl.nn.kernels import build, categorical, linear, pointwise
ok = [m.kernel_available() for m in (kernels, pointwise, categorical, linear)]
wall = time.perf_counter() - start
cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"wall": wall, "cpu": cpu.ru_utime + cpu.ru_stime, "ok": ok,
                  "reason": build.unavailable_reason}))
"""


def build_all(cxx: str, cache: Path) -> dict:
    env = {**os.environ, "CXX": cxx, "ENTITYRL_KERNEL_CACHE": str(cache)}
    env.pop("ENTITYRL_NO_KERNELS", None)
    out = subprocess.run(
        [sys.executable, "-c", _BUILD_ALL], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def first_iteration(cache: Path, run_dir: Path) -> tuple[float, float]:
    """Wall and CPU time of `entityrl train CherryPick` stopped after its first iteration
    (the CPU time of the process and its children, compilers included)."""
    env = {**os.environ, "ENTITYRL_KERNEL_CACHE": str(cache)}
    env.pop("ENTITYRL_NO_KERNELS", None)
    entityrl = Path(sys.executable).with_name("entityrl")
    command = [str(entityrl), "train", "CherryPick", "total_timesteps=1", "log.progress=false"]
    command.append(f"log.run_dir={run_dir}")
    before, start = _children_cpu(), time.perf_counter()
    subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return time.perf_counter() - start, _children_cpu() - before


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--compilers", nargs="*", default=["g++", "clang++"])
    args = parser.parse_args()
    for cxx in args.compilers:
        if shutil.which(cxx) is None:
            print(f"{cxx}: not installed, skipped")
            continue
        runs = []
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory(prefix="entityrl-cold-") as cache:
                runs.append(build_all(cxx, Path(cache)))
        assert all(all(r["ok"][:3]) for r in runs), runs  # linear needs AVX512-BF16
        wall = statistics.median(r["wall"] for r in runs)
        cpu = statistics.median(r["cpu"] for r in runs)
        print(f"{cxx}: all kernels from a cold cache: {wall:.1f} s wall, {cpu:.1f} s CPU")
    cold, warm = [], []
    with tempfile.TemporaryDirectory(prefix="entityrl-train-") as tmp:
        for i in range(args.repeats):
            cache = Path(tmp) / f"cache{i}"
            cold.append(first_iteration(cache, Path(tmp) / f"cold{i}"))
            warm.append(first_iteration(cache, Path(tmp) / f"warm{i}"))
    for name, runs in (("cold", cold), ("warm", warm)):
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        print(
            f"entityrl train CherryPick, one iteration, {name} cache: {wall:.1f} s wall, {cpu:.1f} s CPU"
        )


if __name__ == "__main__":
    main()
