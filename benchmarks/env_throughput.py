"""Samples per second of the built-in environments under random legal actions, and the mean
return a random policy gets in each.

Compares, on CherryPick and MineSweeper, entityrl's in-process vectorization (SerialVecEnv),
its worker processes (ProcessVecEnv, 2 workers) and, for CherryPick, the natively batched
CherryPickBatched, with the reference stack's EnvList on the same environment (run with the
reference interpreter in a subprocess, in the same run). Writes its section of RESULTS.md.

usage: python benchmarks/env_throughput.py [--num-envs 256] [--steps 200] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _peer import machine, note_if_peer_missing, peer_available, run_peer
from results import replace_section

from entityrl.env import RandomPolicy, VecEnv
from entityrl.envs import make_vec, names

TITLE = "Environment throughput and random-policy returns (benchmarks/env_throughput.py)"


def samples_per_second(make: Callable[[], VecEnv], steps: int, seed: int) -> float:
    with make() as env:
        policy = RandomPolicy(env.action_space, seed=seed)
        obs = env.reset()
        start = time.perf_counter()
        for _ in range(steps):
            obs = env.act(policy.act(obs))
        return env.num_envs * steps / (time.perf_counter() - start)


def median_rate(make: Callable[[], VecEnv], steps: int, repeats: int) -> float:
    return statistics.median(samples_per_second(make, steps, seed) for seed in range(repeats))


def random_returns(name: str, num_envs: int = 8, steps: int = 1000) -> tuple[float, int]:
    """Mean return and number of episodes of random play (seed 0)."""
    with make_vec(name, num_envs, seed=0) as env:
        policy = RandomPolicy(env.action_space, seed=0)
        obs = env.reset()
        returns = []
        for _ in range(steps):
            obs = env.act(policy.act(obs))
            returns.extend(obs.metrics.get("episode_return", []))
    return float(np.mean(returns)), len(returns)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num-envs", type=int, default=256)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    note_if_peer_missing()
    n, steps, repeats = args.num_envs, args.steps, args.repeats

    lines = [
        f"Command: `python benchmarks/env_throughput.py --num-envs {n} --steps {steps} "
        f"--repeats {repeats}`",
        f"Machine: {machine()}",
        "",
        f"Samples (environment steps) per second with random legal actions, {n} environments, "
        f"{steps} steps, median of {repeats} runs; the random policy's time is included on "
        "both sides. The machine's 2 cores are shared with other jobs, so figures of one row "
        "can move by tens of percent between runs; the peer is measured in the same run.",
        "",
        "| environment | vectorization | entityrl | reference EnvList | ratio |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for env_name in ("CherryPick", "MineSweeper"):
        peer = None
        if peer_available():
            rates = run_peer("env_throughput_peer.py", env_name, n, steps, repeats)
            peer = statistics.median(rates["samples_per_second"])
        variants: list[tuple[str, Callable[[], VecEnv]]] = [
            ("SerialVecEnv", lambda e=env_name: make_vec(e, n, seed=0)),
            ("ProcessVecEnv, 2 workers", lambda e=env_name: make_vec(e, n, seed=0, processes=2)),
        ]
        if env_name == "CherryPick":
            variants.append(("CherryPickBatched", lambda: make_vec("CherryPickBatched", n, seed=0)))
        for label, make in variants:
            rate = median_rate(make, steps, repeats)
            peer_cell = f"{peer:,.0f}" if peer else "not run"
            ratio = f"{rate / peer:.1f}x" if peer else "-"
            lines.append(f"| {env_name} | {label} | {rate:,.0f} | {peer_cell} | {ratio} |")
            print(lines[-1], flush=True)

    lines += [
        "",
        "Random-policy returns: 8 environments, 1,000 steps, seed 0; serial samples per second "
        f"with {n} environments and {steps} steps (median of {repeats}).",
        "",
        "| environment | episodes | mean return | samples/s |",
        "| --- | ---: | ---: | ---: |",
    ]
    for env_name in names():
        mean, episodes = random_returns(env_name)
        rate = median_rate(lambda e=env_name: make_vec(e, n, seed=0), steps, repeats)
        lines.append(f"| {env_name} | {episodes} | {mean:.3f} | {rate:,.0f} |")
        print(lines[-1], flush=True)

    replace_section(TITLE, "\n".join(lines))


if __name__ == "__main__":
    main()
