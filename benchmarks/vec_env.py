"""Environment steps per second of SerialVecEnv and ProcessVecEnv on MineSweeper, what the
process transport (pickled VecObs over a pipe) costs, and entity-gym's EnvList and
ParallelEnvList on the same machine.

usage: python benchmarks/vec_env.py [--envs 256] [--workers 2] [--steps 200] [--runs 5]
Writes the "Vectorized environments (MineSweeper)" section of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import pickle
import statistics
import sys
import time
from collections.abc import Callable

from _peer import machine, note_if_peer_missing, peer_available, run_peer
from profiling import own_time_shares
from results import replace_section

from entityrl.env import ProcessVecEnv, RandomPolicy, VecEnv, VecObs
from entityrl.envs import lookup, make_vec

TITLE = "Vectorized environments (MineSweeper)"


def steps_per_second(env: VecEnv, steps: int) -> float:
    """Environment steps per second of random play (policy included, as in a rollout)."""
    policy = RandomPolicy(env.action_space, seed=0)
    obs = env.reset()
    for _ in range(10):
        obs = env.act(policy.act(obs))
    start = time.perf_counter()
    for _ in range(steps):
        obs = env.act(policy.act(obs))
    return steps * env.num_envs / (time.perf_counter() - start)


def median_time(call: Callable[[], object], repeats: int) -> float:
    """Median seconds of ``call`` over ``repeats`` batches of 100 calls."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(100):
            call()
        times.append((time.perf_counter() - start) / 100)
    return statistics.median(times)


def transport_costs(envs_per_worker: int, steps: int) -> dict[str, float]:
    """What one worker's step costs, against pickling its answer to the parent."""
    env = make_vec("MineSweeper", envs_per_worker, seed=0)
    policy = RandomPolicy(env.action_space, seed=0)
    obs = env.reset()
    for _ in range(10):
        obs = env.act(policy.act(obs))
    elapsed = 0.0
    for _ in range(steps):
        actions = policy.act(obs)
        start = time.perf_counter()
        obs = env.act(actions)
        elapsed += time.perf_counter() - start
    step_seconds = elapsed / steps
    message: tuple[str, VecObs] = ("ok", obs)
    blob = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return {
        "step_ms": step_seconds * 1e3,
        "bytes": len(blob),
        "dumps_us": median_time(lambda: pickle.dumps(message, pickle.HIGHEST_PROTOCOL), 5) * 1e6,
        "loads_us": median_time(lambda: pickle.loads(blob), 5) * 1e6,
    }


def parent_profile(env: VecEnv, steps: int) -> dict[str, float]:
    """Shares of the parent's time (cProfile) spent waiting for the workers and unpickling."""
    shares = own_time_shares(env, steps)

    def own_time(name: str) -> float:
        return sum(share for key, share in shares.items() if key[2] == name)

    return {
        "waiting": own_time("<method 'poll' of 'select.poll' objects>"),
        "unpickling": own_time("<built-in method _pickle.loads>"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", type=int, default=256)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    note_if_peer_missing()
    load = os.getloadavg()[0]

    # name -> (entityrl vec env, entity-gym counterpart in the peer script's output)
    contenders = {
        "SerialVecEnv": (make_vec("MineSweeper", args.envs, seed=0), "EnvList"),
        "ProcessVecEnv, 1 worker (transport overhead, no parallelism)": (
            ProcessVecEnv(lookup("MineSweeper"), args.envs, seed=0, num_workers=1),
            None,
        ),
        f"ProcessVecEnv, {args.workers} workers": (
            make_vec("MineSweeper", args.envs, seed=0, processes=args.workers),
            f"ParallelEnvList, {args.workers} processes",
        ),
    }
    ours: dict[str, list[float]] = {name: [] for name in contenders}
    theirs: dict[str, list[float]] = {
        "EnvList": [],
        f"ParallelEnvList, {args.workers} processes": [],
    }
    # Runs alternate between entityrl and the reference so that both see the same changes in
    # the load of a shared machine.
    for _ in range(args.runs):
        for name, (env, _) in contenders.items():
            ours[name].append(steps_per_second(env, args.steps))
        if peer_available():
            run = run_peer("vec_env_peer.py", args.envs, args.workers, args.steps, 1)
            theirs["EnvList"] += run["serial"]
            theirs[f"ParallelEnvList, {args.workers} processes"] += run["parallel"]
    shares = parent_profile(contenders[f"ProcessVecEnv, {args.workers} workers"][0], args.steps)
    for env, _ in contenders.values():
        env.close()
    costs = transport_costs(args.envs // args.workers, args.steps)

    def figures(rates: list[float]) -> str:
        return f"{statistics.median(rates):,.0f} (runs: {', '.join(f'{r:,.0f}' for r in rates)})"

    table = [
        "| entityrl | env-steps/s, median | entity-gym 0.1.10 | env-steps/s, median | ratio |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, (_, peer_name) in contenders.items():
        peer_rates = theirs.get(peer_name or "", [])
        if peer_rates:
            ratio = f"{statistics.median(ours[name]) / statistics.median(peer_rates):.2f}x"
            table.append(
                f"| {name} | {figures(ours[name])} | {peer_name} | {figures(peer_rates)} | {ratio} |"
            )
        else:
            table.append(f"| {name} | {figures(ours[name])} | - | - | - |")
    transport = costs["dumps_us"] + costs["loads_us"]
    share = transport / 1e3 / costs["step_ms"]
    verdict = (
        "Pickling is not the bottleneck: shared memory or msgpack could save at most that share, "
        "so the transport stays a pickled VecObs over a pipe. The time goes to stepping the "
        "Python environments."
        if share < 0.05
        else "Pickling is a noticeable share of the step: a shared-memory transport may pay off."
    )
    speedup = statistics.median(ours[f"ProcessVecEnv, {args.workers} workers"]) / statistics.median(
        ours["SerialVecEnv"]
    )
    parallelism = f"{args.workers} workers step {speedup:.2f}x as fast as SerialVecEnv" + (
        " here: the parent, the workers and the machine's other jobs share its "
        f"{os.cpu_count()} cores, so there is no idle core for the workers to gain from."
        if speedup < 1.2
        else "."
    )
    body = f"""
Command: `python benchmarks/vec_env.py --envs {args.envs} --workers {args.workers} --steps {args.steps} --runs {args.runs}`

Machine: {machine()}; shared with other jobs (load average {load:.1f} at the start), so figures vary from run to run: medians of
{args.runs} runs, entityrl and the reference alternating. Random legal actions (the policy's
time included), MineSweeper with its default settings. The 1-worker row steps all
environments in one worker process: its gap to SerialVecEnv is the whole cost of the process
boundary (pipe, pickling both ways, waking the worker).

{chr(10).join(table)}

Transport, per worker and step ({args.envs // args.workers} environments): the worker's step
takes {costs["step_ms"]:.2f} ms; its answer is one pickled VecObs of {costs["bytes"]:,} bytes,
pickled in {costs["dumps_us"]:.0f} µs and unpickled in {costs["loads_us"]:.0f} µs, {share:.1%} of
the step. Profiled with cProfile over {args.steps} steps, the parent of {args.workers} workers spends
{shares["waiting"]:.0%} of its time waiting for their answers and {shares["unpickling"]:.1%}
unpickling them. {verdict} {parallelism}
"""
    replace_section(TITLE, body)
    print(body)


if __name__ == "__main__":
    sys.exit(main())
