"""Environment steps per second of the survival world under random legal actions, on one core.

The process pins itself to one CPU (like ``taskset -c 0``) and keeps numpy's thread pools to
one thread. Each configuration is timed ``--repeats`` times (``--steps`` batched steps of
``--num-envs`` copies after a warm-up) and the median is reported, with the random policy's
time included (``with policy``) and excluded (``environment only``). There is no peer: the
reference stack has no survival world. A cProfile of the first configuration lists where the
time goes (the heaviest functions by own time). Writes its section of RESULTS.md.

usage: python benchmarks/survival_throughput.py [--num-envs 64] [--steps 500] [--repeats 5]
       [--cpu 0]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _peer import machine  # noqa: E402
from profiling import own_time_shares  # noqa: E402
from results import replace_section  # noqa: E402

from entityrl.env import RandomPolicy  # noqa: E402
from entityrl.envs import make_vec  # noqa: E402

TITLE = "Survival world (benchmarks/survival_throughput.py)"
GOAL = 10_000

# (environment, constructor arguments, copies: None for --num-envs)
CONFIGS: list[tuple[str, dict[str, Any], int | None]] = [
    ("DayAndNight", {}, None),
    ("DayAndNight", {"actions": "simple"}, None),
    ("DayAndNight", {"actions": "simple", "observation": "nearest10"}, None),
    ("DayAndNight", {}, 256),
    ("FourSeason", {}, None),
    ("RiverNavigation", {}, None),
]


def timed_run(
    name: str, kwargs: dict[str, Any], num_envs: int, steps: int, seed: int
) -> tuple[float, float]:
    """(steps/s with the policy, steps/s of the environment alone) for one run."""
    env = make_vec(name, num_envs, seed=seed, **kwargs)
    policy = RandomPolicy(env.action_space, seed=seed)
    obs = env.reset()
    for _ in range(20):  # warm-up: caches, first resets
        obs = env.act(policy.act(obs))
    in_env = 0.0
    start = time.perf_counter()
    for _ in range(steps):
        actions = policy.act(obs)
        tick = time.perf_counter()
        obs = env.act(actions)
        in_env += time.perf_counter() - tick
    total = time.perf_counter() - start
    return num_envs * steps / total, num_envs * steps / in_env


def profile(name: str, kwargs: dict[str, Any], num_envs: int, steps: int) -> list[str]:
    """The functions with the most own time in ``steps`` steps, as "name (share)" strings."""
    shares = own_time_shares(make_vec(name, num_envs, seed=0, **kwargs), steps)
    heaviest = sorted(shares.items(), key=lambda item: item[1], reverse=True)[:8]
    return [
        f"`{Path(file).name}:{function}` {100 * share:.0f}%"
        for (file, _, function), share in heaviest
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cpu", type=int, default=0, help="the CPU to pin the process to")
    parser.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md")
    args = parser.parse_args()
    os.sched_setaffinity(0, {args.cpu})
    rows, goal_rate = [], 0.0
    for name, kwargs, copies in CONFIGS:
        n = copies or args.num_envs
        runs = [timed_run(name, kwargs, n, args.steps, seed) for seed in range(args.repeats)]
        with_policy = statistics.median(r[0] for r in runs)
        env_only = statistics.median(r[1] for r in runs)
        goal_rate = goal_rate or with_policy  # the first row is the goal's configuration
        options = ", ".join(f"{k}={v}" for k, v in kwargs.items()) or "defaults"
        every = ", ".join(f"{r[0]:,.0f}" for r in runs)
        rows.append(
            f"| {name} | {options} | {n} | {with_policy:,.0f} ({every}) | {env_only:,.0f} |"
        )
        print(rows[-1], flush=True)
    name, kwargs, _ = CONFIGS[0]
    heaviest = profile(name, kwargs, args.num_envs, args.steps)
    verdict = "meets" if goal_rate >= GOAL else "misses"
    body = f"""
Command: `python benchmarks/survival_throughput.py --num-envs {args.num_envs} --steps {args.steps} --repeats {args.repeats} --cpu {args.cpu}`
Machine: {machine()}; the process pinned to CPU {args.cpu} (as `taskset -c {args.cpu}`), numpy single-threaded. The machine's 2 cores are shared with other jobs, so single runs move by tens of percent; medians of {args.repeats} runs.

Environment steps per second with random legal actions (RandomPolicy), {args.steps} batched steps after a warm-up; "with policy" includes choosing the random actions, "environment only" is the time inside `act` (action checks, simulation, observation). No peer: the reference stack has no survival world.

| environment | options | copies | steps/s with policy, median (runs) | steps/s environment only |
| --- | --- | ---: | ---: | ---: |
{chr(10).join(rows)}

Goal: at least {GOAL:,} steps/s on DayAndNight with {args.num_envs} copies on one core; this run {verdict} it ({goal_rate:,.0f}).

Where the time goes (cProfile of the first row, own time): {", ".join(heaviest)}.
"""
    print(body)
    if not args.no_write:
        replace_section(TITLE, body)


if __name__ == "__main__":
    main()
