"""Data-parallel scaling on this machine: one environment's shipped config trained by 1 and by
2 processes (``world_size``), samples/s and time to the config's target return; and what a
multi-machine run sends per iteration.

Each run is ``python -m entityrl train ENV world_size=W seed=S`` in a subprocess (default
torch threads: the cores shared by the processes). Samples/s: the median of the iterations'
``perf/sps`` after the first (which pays the start-up); time to target: seconds from the
process's start to the first iteration whose mean episode return reaches ``target_return``
(start-up included, as a user waits for it). Communication: the bytes one process sends per
iteration (a float32 all-reduce of the flat gradient per minibatch, plus a few float64
statistics), and a ring all-reduce estimate of the update's communication time at 8 and 64
processes for a network of a given bandwidth and latency.
Writes the section "Data-parallel scaling" of RESULTS.md.

With ``--sampling``: synchronous against asynchronous sampling (``rollout.mode``, issue 31).
First the slow simulator (``env.id=Slow``: CherryPick whose every step waits
``--step-ms`` milliseconds), samples/s (the median ``perf/sps`` of the iterations after the
first) against the number of worker processes in each mode (one worker in sync mode steps
the environments in the training process; async needs two or more). Then the CPU-bound
environments of ``--learning-envs`` on their shipped configs, sync against async with
``--learning-processes`` workers: samples/s, the return at the end and the steps at which the
mean return first reached the config's target_return. One thread per process
(``torch_threads=1``). Writes the section "Asynchronous sampling (issue #31)" of RESULTS.md
(or ``--section``'s).

With ``--ray``: the slow simulator's samples/s against ``--workers`` with local worker
processes (sync) and with Ray actors (``rollout.backend=ray``, a Ray instance started on this
machine by each run; sync and async), the iterations' median ``perf/sps`` after the first.
Writes the section "Ray actors as environment workers (issue #31)" of RESULTS.md. Run it in a
network namespace with only loopback, so that Ray binds to nothing else:
``unshare --net sh -c 'ip link set lo up && python benchmarks/scaling.py --ray ...'``.

With ``--model``: a scaling model on paper for ``--machines`` (8 16 32 64) machines, from
per-iteration costs measured here on ``--env``'s shipped config: the workers' CPU per sample
(inference and environment step, 8 environments per worker, one thread), the bytes of a
rollout per sample and of the parameters sent to each worker, the learner's update per sample
(a sync run, one process) and its V-trace evaluation per sample (an async run), and the
all-reduce payload. Two designs: one learner fed by remote samplers (Ray, async) and
data-parallel learners (torchrun), over ``BANDWIDTH``/``LATENCY`` below. Writes the section
"Scaling model (issue #31)" of RESULTS.md.

usage: python benchmarks/scaling.py [--env CherryPick] [--world-sizes 1 2] [--runs 3]
       python benchmarks/scaling.py --sampling [--workers 1 2 4 8 16] [--step-ms 2]
           [--iterations 6] [--learning-envs CherryPick] [--learning-processes 2] [--runs 1]
           [--light-learner ppo.update_epochs=1] [--section TITLE]
       python benchmarks/scaling.py --ray [--workers 1 2 4 8] [--step-ms 2] [--iterations 4]
       python benchmarks/scaling.py --model [--env CherryPick] [--machines 8 16 32 64]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _peer import machine
from results import replace_section

from entityrl.training.config import load_config
from entityrl.training.runner import make_env

# A network between machines: 10 Gb/s Ethernet, 50 us per message.
BANDWIDTH = 10e9 / 8
LATENCY = 50e-6


def train(env: str, *overrides: str) -> tuple[list[dict[str, float]], float, float]:
    """The metrics.jsonl rows of ``entityrl train env *overrides`` in a subprocess, and the
    times it started and finished."""
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "-m", "entityrl", "train", env, *overrides,
                   "log.progress=false", "log.tensorboard=false", f"log.run_dir={tmp}/run"]  # fmt: skip
        started = time.time()
        subprocess.run(command, check=True, capture_output=True, env=dict(os.environ))
        finished = time.time()
        rows = [json.loads(line) for line in Path(tmp, "run/metrics.jsonl").read_text().split("\n")
                if line.strip()]  # fmt: skip
    return rows, started, finished


def run(env: str, world_size: int, seed: int, target: float) -> dict[str, float]:
    rows, started, finished = train(env, f"world_size={world_size}", f"seed={seed}")
    reached = [r["time"] for r in rows if r.get("episode/episode_return", -1e9) >= target]
    return {
        "sps": statistics.median(r["perf/sps"] for r in rows[1:]),
        "to_target": (reached[0] - started) if reached else float("nan"),
        "seconds": finished - started,
    }


def slow_sps(
    mode: str,
    workers: int,
    step_ms: float,
    iterations: int,
    learner: list[str],
    backend: str = "local",
) -> dict[str, float]:
    """Samples/s of the slow simulator with ``workers`` workers (``backend``'s) in ``mode``,
    the learner's settings changed by the overrides ``learner``."""
    config = load_config("CherryPick")
    rows, _, _ = train(
        "CherryPick", "env.id=Slow", f"env.kwargs.step_ms={step_ms}", f"rollout.mode={mode}",
        f"rollout.processes={workers}", f"rollout.backend={backend}", "torch_threads=1",
        f"total_timesteps={iterations * config.batch_size}", *learner,
    )  # fmt: skip
    later = rows[1:]
    return {
        "sps": statistics.median(r["perf/sps"] for r in later),
        "wait": statistics.median(r.get("perf/wait_seconds", 0.0) for r in later),
        "update": statistics.median(r["perf/update_seconds"] for r in later),
    }


def learning(env: str, mode: str, processes: int, seed: int) -> dict[str, float]:
    """Samples/s, final return and steps to the target of ``env``'s shipped config."""
    target = load_config(env).target_return
    rows, started, finished = train(
        env, f"rollout.mode={mode}", f"rollout.processes={processes}", f"seed={seed}",
        "torch_threads=1",
    )  # fmt: skip
    returns = [r for r in rows if "episode/episode_return" in r]
    reached = [r["step"] for r in returns if r["episode/episode_return"] >= (target or math.inf)]
    lags = [r["async/abs_log_ratio"] for r in rows if "async/abs_log_ratio" in r]
    return {
        "sps": statistics.median(r["perf/sps"] for r in rows[1:]),
        "final": statistics.mean(r["episode/episode_return"] for r in returns[-5:]),
        "to_target": reached[0] if reached else math.nan,
        "seconds": finished - started,
        "abs_log_ratio": statistics.mean(lags) if lags else math.nan,
    }


def communication(env: str) -> dict[str, float]:
    """Parameters, minibatches per iteration and bytes one process sends per iteration."""
    from entityrl.nn.rogue_net import RogueNet

    config = load_config(env)
    with make_env(config, None, num_envs=1) as vec:
        net = RogueNet(vec.obs_space, vec.action_space, config.net, device="cpu")
    params = sum(p.numel() for p in net.parameters())
    minibatches = config.ppo.update_epochs * (config.batch_size // config.optim.bs)
    gradient_bytes = 4 * params
    return {"params": params, "minibatches": minibatches,
            "bytes": minibatches * (gradient_bytes + 8 * 8)}  # fmt: skip


def _time_to_target(answers: list[dict[str, float]]) -> str:
    """Median over the seeds that reached the target, and how many did."""
    reached = [a["to_target"] for a in answers if not math.isnan(a["to_target"])]
    shown = f"{statistics.median(reached):.1f}" if reached else "-"
    return f"{shown} ({len(reached)} of {len(answers)} seeds)"


def ring_seconds(nbytes: float, ranks: int, messages: int) -> float:
    """A ring all-reduce of ``nbytes`` over ``ranks``: 2(N-1)/N of the data each way, 2(N-1)
    steps of latency; ``messages`` all-reduces per iteration."""
    steps = 2 * (ranks - 1)
    return steps / ranks * nbytes / BANDWIDTH + messages * steps * LATENCY


SAMPLING_SECTION = "Asynchronous sampling (issue #31)"


def sampling(args: argparse.Namespace) -> None:
    """Sync against async sampling: the slow simulator's samples/s, then learning."""
    load_before = os.getloadavg()
    command = (
        f"python benchmarks/scaling.py --sampling --workers {' '.join(map(str, args.workers))} "
        f"--step-ms {args.step_ms:g} --iterations {args.iterations} --learning-envs "
        f"{' '.join(args.learning_envs)} --learning-processes {args.learning_processes} "
        f"--runs {args.runs}"
    )
    if args.light_learner:
        command += f" --light-learner {' '.join(args.light_learner)}"
    if args.section != SAMPLING_SECTION:
        command += f" --section '{args.section}'"
    lines = [
        f"Command: `{command}`",
        f"Machine: {machine()}; load average {load_before[0]:.1f} before the run (1-minute).",
    ]
    if args.workers:
        lines += slow_table(args)
    if args.learning_envs:
        lines += learning_table(args)
    replace_section(args.section, "\n".join(lines))


def slow_table(args: argparse.Namespace) -> list[str]:
    """Samples/s of the slow simulator against the workers, sync and async."""
    lines = [
        "",
        f"**Slow simulator** (`env.id=Slow env.kwargs.step_ms={args.step_ms:g}`: CherryPick "
        f"whose every step first sleeps {args.step_ms:g} ms), CherryPick's shipped config "
        f"otherwise, one torch thread per process, {args.iterations} iterations per run; "
        "samples/s is the median `perf/sps` of the iterations after the first, `wait` the "
        "learner's median wait for the workers after its update (async), `update` its update.",
        "",
        "| learner | workers | sync samples/s | async samples/s | sync x 1 worker "
        "| async x 1 worker | async update (s) | async wait (s) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for learner in ([], args.light_learner) if args.light_learner else ([],):
        name = " ".join(learner) or "shipped"
        base = None
        for workers in args.workers:
            sync = slow_sps("sync", workers, args.step_ms, args.iterations, learner)
            base = base or sync["sps"]
            line = f"| {name} | {workers} | {sync['sps']:,.0f} "
            if workers >= 2:
                fast = slow_sps("async", workers, args.step_ms, args.iterations, learner)
                line += (
                    f"| {fast['sps']:,.0f} | {sync['sps'] / base:.1f}x "
                    f"| {fast['sps'] / base:.1f}x | {fast['update']:.2f} | {fast['wait']:.2f} |"
                )
            else:
                line += f"| (needs 2) | {sync['sps'] / base:.1f}x | - | - | - |"
            print(line, flush=True)
            lines.append(line)
    return lines


def learning_table(args: argparse.Namespace) -> list[str]:
    """Sync against async on the shipped configs of ``args.learning_envs``."""
    lines = [
        "",
        f"**Learning, CPU-bound** (shipped configs, {args.learning_processes} worker "
        f"processes, one torch thread each, seeds 1-{args.runs}): samples/s, the mean of the "
        "last five logged episode returns, the step at which the logged mean return first "
        "reached the config's target_return, and (async) the mean |log ratio| of learner to "
        "acting policy per row.",
        "",
        "| env | mode | seed | samples/s | final return | steps to target | whole run (s) "
        "| mean abs log ratio |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for env in args.learning_envs:
        for seed in range(1, args.runs + 1):
            for mode in ("sync", "async"):
                a = learning(env, mode, args.learning_processes, seed)
                line = (
                    f"| {env} | {mode} | {seed} | {a['sps']:,.0f} | {a['final']:.3f} "
                    f"| {a['to_target']:,.0f} | {a['seconds']:.0f} | {a['abs_log_ratio']:.3f} |"
                )
                print(line, flush=True)
                lines.append(line)
    return lines


RAY_SECTION = "Ray actors as environment workers (issue #31)"


def ray_sampling(args: argparse.Namespace) -> None:
    """The slow simulator's samples/s with local worker processes and with Ray actors."""
    load_before = os.getloadavg()
    workers = " ".join(map(str, args.workers))
    lines = [
        "Command: `unshare --net sh -c 'ip link set lo up && python benchmarks/scaling.py "
        f"--ray --workers {workers} --step-ms {args.step_ms:g} --iterations {args.iterations}'`",
        f"Machine: {machine()} (the 2-core shared box); load average {load_before[0]:.1f} "
        "before the run (1-minute). One run per cell.",
        "",
        f"**Slow simulator** (`env.id=Slow env.kwargs.step_ms={args.step_ms:g}`), CherryPick's "
        f"shipped config otherwise, one torch thread per process, {args.iterations} "
        "iterations per run; samples/s is the median `perf/sps` of the iterations after the "
        "first. Ray: `rollout.backend=ray`, a Ray instance started on this machine by each "
        "run, one actor per worker.",
        "",
        "| workers | local sync | Ray sync | Ray async | Ray sync / local sync |",
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    for n in args.workers:
        local = slow_sps("sync", n, args.step_ms, args.iterations, [])["sps"]
        ray = slow_sps("sync", n, args.step_ms, args.iterations, [], backend="ray")["sps"]
        fast = (
            f"{slow_sps('async', n, args.step_ms, args.iterations, [], backend='ray')['sps']:,.0f}"
            if n >= 2
            else "(needs 2)"
        )
        line = f"| {n} | {local:,.0f} | {ray:,.0f} | {fast} | {ray / local:.2f} |"
        print(line, flush=True)
        lines.append(line)
    lines.append(f"\nLoad average after the run: {os.getloadavg()[0]:.1f} (1-minute).")
    replace_section(RAY_SECTION, "\n".join(lines))


MODEL_SECTION = "Scaling model (issue #31)"


def measured_costs(env: str) -> dict[str, float]:
    """Per-sample and per-iteration costs of ``env``'s shipped config on this machine."""
    import torch

    from entityrl.nn.rogue_net import RogueNet
    from entityrl.training import sampler as sampling_loop
    from entityrl.training.agent import Agent

    config = load_config(env)
    batch = config.batch_size
    torch.set_num_threads(1)
    costs: dict[str, float] = {"batch": batch}
    # A worker of 8 environments, 16 steps per rollout (as 16 workers share 128): its CPU
    # time per sample, and what it sends back per sample. Stepped here, in this process.
    config.rollout.processes = 1
    with make_env(config, None, num_envs=8) as vec:
        net = RogueNet(vec.obs_space, vec.action_space, config.net, device="cpu")
        agent = Agent(net, generator=torch.Generator().manual_seed(0))
        obs = vec.reset()
        _, obs = sampling_loop._run(agent, vec, obs, 16)  # warm-up
        reps, started = 10, time.process_time()
        for _ in range(reps):
            transitions, obs = sampling_loop._run(agent, vec, obs, 16)
        costs["act"] = (time.process_time() - started) / (reps * 16 * 8)
        costs["rollout_bytes"] = len(pickle.dumps((transitions, obs, None), protocol=5)) / 128
    params = {name: value.numpy() for name, value in net.state_dict().items()}
    costs["param_bytes"] = len(pickle.dumps(params, protocol=5))
    costs["params"] = sum(p.numel() for p in net.parameters())
    # The learner: a sync run in one process (its update and its whole iteration), and an
    # async run (the V-trace evaluation of each rollout received).
    steps = f"total_timesteps={4 * batch}"
    rows, _, _ = train(env, "rollout.processes=1", "torch_threads=1", steps)
    later = rows[1:]
    costs["update"] = statistics.median(r["perf/update_seconds"] for r in later) / batch
    costs["iteration"] = batch / statistics.median(r["perf/sps"] for r in later)
    rows, _, _ = train(env, "rollout.processes=2", "rollout.mode=async", "torch_threads=1", steps)
    costs["correct"] = statistics.median(r["perf/correct_seconds"] for r in rows[1:]) / batch
    comm = communication(env)
    costs["allreduce_bytes"], costs["minibatches"] = comm["bytes"], comm["minibatches"]
    return costs


def one_learner(c: dict[str, float], machines: int, cores: int, sim_ms: float) -> dict[str, float]:
    """One learner (one core: the update and the V-trace evaluation, plus its network link),
    fed by ``machines`` sampler machines of ``cores`` cores, one worker per core, whose
    environments spend ``sim_ms`` of CPU per step besides the policy's inference."""
    per_sample = c["act"] + sim_ms / 1e3
    sampling = machines * cores / per_sample
    # Per update of one batch the learner sends the parameters to every worker and takes the
    # rollouts in through its one network link, one message after another (each pays the
    # latency), before and after its update: on its critical path.
    workers = machines * cores
    link = (workers * c["param_bytes"] + c["batch"] * c["rollout_bytes"]) / BANDWIDTH
    link += 2 * workers * LATENCY
    learning = c["batch"] / (c["batch"] * (c["update"] + c["correct"]) + link)
    rate = min(sampling, learning)
    limit = "samplers" if sampling <= learning else "learner"
    # The machines at which the samplers outrun the learner: more add nothing.
    stops = learning * per_sample / cores
    return {"rate": rate, "limit": limit, "link": link, "stops": stops}


def data_parallel(c: dict[str, float], machines: int, grow: bool) -> dict[str, float]:
    """``machines`` ranks (torchrun), each a machine like this one running the whole loop on
    its share of the environments; the config's batch split between them (``grow`` False,
    as ``world_size`` does) or each rank keeping a whole batch (``rollout.num_envs`` times
    ``machines``)."""
    compute = c["iteration"] if grow else c["iteration"] / machines
    comm = ring_seconds(c["allreduce_bytes"], machines, int(c["minibatches"]))
    samples = c["batch"] * (machines if grow else 1)
    rate = samples / (compute + comm)
    return {"rate": rate, "efficiency": compute / (compute + comm), "comm": comm}


def scaling_model(args: argparse.Namespace) -> None:
    """The scaling model's table from costs measured here (see the module's docstring)."""
    load_before = os.getloadavg()
    c = measured_costs(args.env)
    print(c, flush=True)
    one = c["batch"] / c["iteration"]
    lines = [
        f"Command: `python benchmarks/scaling.py --model --env {args.env} --machines "
        f"{' '.join(map(str, args.machines))}`",
        f"Machine: {machine()}; load average {load_before[0]:.1f} before the run (1-minute).",
        "",
        f"Measured here ({args.env}'s shipped config, one thread per process, "
        f"{c['batch']:,.0f} samples per iteration): a worker's CPU per sample (policy "
        f"inference and environment step, 8 environments per worker) {c['act'] * 1e6:.0f} us; "
        f"a rollout sent back {c['rollout_bytes']:.0f} bytes per sample; the parameters sent "
        f"to each worker per update {c['param_bytes'] / 1e3:.0f} kB ({c['params']:,.0f} "
        f"parameters); the learner's update {c['update'] * 1e6:.0f} us per sample "
        f"({c['update'] * c['batch']:.2f} s per iteration) and its V-trace evaluation "
        f"(async) {c['correct'] * 1e6:.0f} us per sample; one process's whole sync "
        f"iteration {c['iteration']:.2f} s ({one:,.0f} samples/s); the all-reduce "
        f"{c['allreduce_bytes'] / 2**20:.2f} MiB in {c['minibatches']:.0f} messages per "
        f"iteration. Network: {BANDWIDTH * 8 / 1e9:.0f} Gb/s, {LATENCY * 1e6:.0f} us per "
        f"message. Machines: {args.cores} cores like this one.",
        "",
        "**One learner, remote samplers** (Ray actors, `rollout.mode=async`, one worker per "
        "core; samples/s of the whole run; efficiency: that over the machines times one sampler "
        "machine's). `sim` is the environment's own CPU per step beyond "
        f"{args.env}'s (a real simulator's work; waiting costs no CPU and overlaps):",
        "",
        "| sim CPU per step | machines | samples/s | efficiency | bound by "
        "| link per update (ms) | learner saturated from (machines) |",
        "| ---: | ---: | ---: | ---: | --- | ---: | ---: |",
    ]
    for sim_ms in args.sim_ms:
        alone = one_learner(c, 1, args.cores, sim_ms)["rate"]
        for n in args.machines:
            m = one_learner(c, n, args.cores, sim_ms)
            lines.append(
                f"| {sim_ms:g} ms | {n} | {m['rate']:,.0f} | {m['rate'] / (n * alone):.0%} "
                f"| {m['limit']} | {m['link'] * 1e3:.1f} | {m['stops']:.1f} |"
            )
    lines += [
        "",
        "**Data-parallel learners** (torchrun, one rank per machine, each running workers and "
        "learner on its share; the ranks all-reduce the gradient once per minibatch). Fixed "
        "batch: the config's `rollout.num_envs` split between the ranks (what `world_size` "
        "does); growing batch: `rollout.num_envs` times the machines, so each rank keeps a "
        "whole batch:",
        "",
        "| machines | all-reduce per iteration (ms) | fixed batch samples/s | efficiency "
        "| growing batch samples/s | efficiency |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for n in args.machines:
        fixed, grown = data_parallel(c, n, False), data_parallel(c, n, True)
        lines.append(
            f"| {n} | {fixed['comm'] * 1e3:.1f} | {fixed['rate']:,.0f} "
            f"| {fixed['efficiency']:.0%} | {grown['rate']:,.0f} | {grown['efficiency']:.0%} |"
        )
    lines.append(f"\nLoad average after the run: {os.getloadavg()[0]:.1f} (1-minute).")
    replace_section(MODEL_SECTION, "\n".join(lines))
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="CherryPick")
    parser.add_argument("--world-sizes", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sampling", action="store_true", help="sync against async sampling")
    parser.add_argument("--ray", action="store_true", help="local workers against Ray actors")
    parser.add_argument("--model", action="store_true", help="the scaling model on paper")
    parser.add_argument("--machines", nargs="+", type=int, default=[8, 16, 32, 64])
    parser.add_argument("--cores", type=int, default=2, help="cores per machine (--model)")
    parser.add_argument(
        "--sim-ms", nargs="+", type=float, default=[0.0, 10.0, 50.0],
        help="environment CPU per step beyond the env's own (--model)",
    )  # fmt: skip
    parser.add_argument("--workers", nargs="*", type=int, default=[1, 2, 4, 8, 16])
    parser.add_argument("--step-ms", type=float, default=2.0)
    parser.add_argument("--iterations", type=int, default=6)
    parser.add_argument("--learning-envs", nargs="*", default=["CherryPick"])
    parser.add_argument("--learning-processes", type=int, default=2)
    parser.add_argument("--section", default=SAMPLING_SECTION, help="RESULTS.md section")
    parser.add_argument(
        "--light-learner",
        nargs="*",
        default=[],
        help="overrides for a second slow-simulator table with a cheaper update",
    )
    args = parser.parse_args()
    if args.sampling:
        sampling(args)
        return
    if args.ray:
        ray_sampling(args)
        return
    if args.model:
        scaling_model(args)
        return
    config = load_config(args.env)
    target = config.target_return
    if target is None:
        raise SystemExit(f"{args.env}'s shipped config states no target_return")
    load_before = os.getloadavg()
    results: dict[int, list[dict[str, float]]] = {w: [] for w in args.world_sizes}
    for seed in range(1, args.runs + 1):
        for world_size in args.world_sizes:
            answer = run(args.env, world_size, seed, target)
            results[world_size].append(answer)
            print(f"seed {seed} world_size {world_size}: {answer}", flush=True)
    comm = communication(args.env)
    lines = [
        f"Command: `python benchmarks/scaling.py --env {args.env} --world-sizes "
        f"{' '.join(map(str, args.world_sizes))} --runs {args.runs}`",
        f"Machine: {machine()}; load average {load_before[0]:.1f} before the run (1-minute).",
        "",
        f"{args.env}'s shipped config ({config.total_timesteps:,} steps, "
        f"{config.rollout.num_envs} environments, target return {target}), default torch "
        f"threads (the cores split between the processes); medians of {args.runs} seeds.",
        "",
        "| processes | samples/s | speed-up | time to target (s) | whole run (s) |",
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    base = statistics.median(a["sps"] for a in results[args.world_sizes[0]])
    for world_size, answers in results.items():
        sps = statistics.median(a["sps"] for a in answers)
        lines.append(
            f"| {world_size} | {sps:,.0f} | {sps / base:.2f}x "
            f"| {_time_to_target(answers)} "
            f"| {statistics.median(a['seconds'] for a in answers):.1f} |"
        )
    # Computation per iteration of one process: the single-process run's samples/s.
    per_iteration = config.batch_size / base
    comm8, comm64 = (ring_seconds(comm["bytes"], n, comm["minibatches"]) for n in (8, 64))
    lines += [
        "",
        f"Per iteration each process sends one float32 all-reduce of the flat gradient per "
        f"minibatch ({comm['params']:,} parameters, {comm['minibatches']} minibatches) plus a "
        f"few float64 statistics: {comm['bytes'] / 2**20:.2f} MiB. A ring all-reduce over "
        f"10 Gb/s Ethernet with 50 us per message would take {comm8 * 1e3:.1f} ms per "
        f"iteration at 8 processes and {comm64 * 1e3:.1f} ms at 64, against about "
        f"{per_iteration * 1e3:.0f} ms of computation per iteration of one process here "
        f"if every process keeps this much work (`rollout.num_envs` grown with `world_size`, "
        f"which otherwise splits the rollout between the processes): an expected efficiency "
        f"of {per_iteration / (per_iteration + comm8):.0%} at 8 and "
        f"{per_iteration / (per_iteration + comm64):.0%} at 64 processes. With the rollout "
        "split, each process's share of the work shrinks while the all-reduce does not: see "
        '"Scaling model (issue #31)" for both cases. Bandwidth is not the limit for networks '
        "this small; the per-minibatch latency is (it grows with the number of processes), so "
        "fewer, larger minibatches (`optim.bs`) scale better.",
    ]
    replace_section("Data-parallel scaling", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
