"""End-to-end training throughput of entityrl's trainer against enn-trainer 0.1.16, in the same
run, on entity-gym's own example environments; and the returns entityrl's trainer reaches.

Both trainers train on the same environments, entity-gym's MoveToOrigin, Minefield,
CherryPick, PickMatchingBalls and MultiSnake: enn-trainer directly (its ``train`` function,
configured in code through hyperstate; no tracking, no evaluation), entityrl through
``entityrl.compat.entity_gym`` (no TensorBoard events, only its metrics.jsonl). Settings on
both sides: 128 environments, 16 steps per rollout, RogueNet with d_model 32, 2 layers,
2 heads, minibatches of 1024, 3 epochs, learning rate 0.001 annealed, gamma 0.99, GAE lambda
0.95, clip 0.2 with value clipping, entropy coefficient 0.1 annealed, value coefficient 0.5,
gradient norm 2; 1 or 2 environment processes. Each trainer keeps its own default torch
thread count unless ``--torch-threads`` sets one for both.

Both sides run in subprocesses of the reference stack's interpreter, the only one where
entity-gym is importable. entityrl must be installed there for this benchmark only, without
letting pip touch that venv's numpy or torch::

    $ENTITYRL_PEER_PYTHON -m pip install --no-deps -e .
    $ENTITYRL_PEER_PYTHON -m pip install omegaconf

(see benchmarks/README.md for setting up the reference venv). Measured identically on both
sides: samples per second = environment steps / seconds from the start of the first rollout to
the end of the last iteration, its logging included (imports and the construction of
environments and network excluded); memory = the peak proportional set size of the trainer's
process tree (trainer plus environment workers, shared pages split between the processes that
share them), sampled every second by this script, and the max RSS of its largest process.
Writes the "End-to-end training throughput" section of RESULTS.md (medians of ``--runs``
runs; the two trainers alternate).

``--returns`` trains entityrl alone, CherryPick to 250k and PickMatchingBalls to 500k steps
(the environment arguments of enn-trainer's published configs for them), with entityrl's
default settings (and with ``--reference-settings`` also with those configs' settings, d_model
128: hours on this machine), and writes the "End-to-end training returns" section. ``--profile ENV`` profiles entityrl's training loop on ENV with
cProfile and prints where the time goes.

usage: python benchmarks/throughput.py [--timesteps 65536] [--runs 3] [--envs CherryPick ...]
                                       [--processes 1 2] [--torch-threads N]
       python benchmarks/throughput.py --returns [--reference-settings]
       python benchmarks/throughput.py --profile CherryPick
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _peer import FAST_REGIME, PEER_PYTHON, PEER_SCRIPTS, machine, require_peer
from results import replace_section

ENVS = ("MoveToOrigin", "Minefield", "CherryPick", "PickMatchingBalls", "MultiSnake")
# The project's goal: at least this many times enn-trainer's samples per second.
GOALS = {"CherryPick": 5.0, "PickMatchingBalls": 5.0, "Minefield": 5.0}
DEFAULT_GOAL = 3.0


@dataclass(frozen=True)
class ReturnRun:
    """A training run of ``--returns``, after enn-trainer's published config for the
    environment: its steps, environment arguments and settings (as entityrl overrides; its
    16 processes become 1) and the mean return that config states it reaches. ``tuned``:
    entityrl settings (d_model 32-64 networks) that reach that return, trained besides
    entityrl's defaults."""

    steps: int
    env_kwargs: dict[str, object]
    reference_settings: list[str]
    states: str
    tuned: tuple[str, ...] = ()


RETURN_RUNS = {
    "CherryPick": ReturnRun(
        250_000,
        {"num_cherries": 32},
        [
            "rollout.num_envs=128",
            "rollout.steps=16",
            "ppo.update_epochs=3",
            "net.d_model=128",
            "net.n_layer=2",
            "optim.bs=2048",
            "optim.lr=0.001",
            "ppo.ent_coef=0.1",
            "ppo.anneal_entropy=true",
            "ppo.vf_coef=0.25",
        ],
        "> 0.99",
    ),
    "PickMatchingBalls": ReturnRun(
        500_000,
        {"max_balls": 32, "one_hot": True, "randomize": True},
        [
            "rollout.num_envs=64",
            "rollout.steps=16",
            "ppo.update_epochs=3",
            "net.d_model=128",
            "net.n_layer=4",
            "net.d_qk=32",
            "optim.bs=1024",
            "optim.lr=0.001",
            "ppo.ent_coef=0.5",
            "ppo.anneal_entropy=true",
        ],
        "> 0.995",
        tuned=("net.d_model=64", "ppo.ent_coef=0.3", "ppo.anneal_entropy=true", *FAST_REGIME),
    ),
}
# Reading a large process's PSS makes the kernel walk its page tables (some 30 ms): sample
# once a second, so that measuring takes a few percent of a core, not a quarter.
MEMORY_SAMPLE_SECONDS = 1.0
POLL_SECONDS = 0.05
TITLE = "End-to-end training throughput"
RETURNS_TITLE = "End-to-end training returns"


# ---------------------------------------------------------------------------- entityrl side
def matched_overrides(processes: int, torch_threads: int) -> list[str]:
    """enn-trainer's settings of the comparison, as entityrl config overrides."""
    return [
        "rollout.num_envs=128",
        "rollout.steps=16",
        f"rollout.processes={processes}",
        "net.d_model=32",
        "net.n_layer=2",
        "net.n_head=2",
        "optim.bs=1024",
        "optim.lr=0.001",
        "optim.anneal_lr=true",
        "optim.max_grad_norm=2.0",
        "ppo.update_epochs=3",
        "ppo.gamma=0.99",
        "ppo.gae_lambda=0.95",
        "ppo.norm_adv=true",
        "ppo.clip_coef=0.2",
        "ppo.clip_vloss=true",
        "ppo.ent_coef=0.1",
        "ppo.anneal_entropy=true",
        "ppo.vf_coef=0.5",
        f"torch_threads={torch_threads}",
        # enn-trainer runs untracked (no TensorBoard or W&B): entityrl writes no TensorBoard
        # events either (its metrics.jsonl stays).
        "log.tensorboard=false",
    ]


def train_ours(name: str, total: int, seed: int, run_dir: str, overrides: list[str]) -> dict:
    """Train entityrl on entity-gym's ``name`` (in the reference interpreter); time the loop."""
    from entity_gym.examples import ENV_REGISTRY
    from omegaconf import OmegaConf

    from entityrl.compat.entity_gym import from_entity_gym
    from entityrl.training.config import TrainConfig, from_layers
    from entityrl.training.runner import Trainer

    config = from_layers(
        [
            OmegaConf.structured(TrainConfig),
            OmegaConf.from_dotlist(
                [
                    *overrides,
                    f"total_timesteps={total}",
                    f"seed={seed}",
                    f"env.id={name}",
                    f"log.run_dir={run_dir}",
                    "log.progress=false",
                ]
            ),
        ],
        check_env=False,
    )
    marks: dict[str, float] = {}
    phases = {"rollout": 0.0, "update": 0.0}

    def on_iteration(metrics: dict[str, float]) -> None:
        marks["last_iteration"] = time.perf_counter()
        phases["rollout"] += metrics["perf/rollout_seconds"]
        phases["update"] += metrics["perf/update_seconds"]

    factory = from_entity_gym(ENV_REGISTRY[name], **config.env.kwargs)
    trainer = Trainer(config, factory, on_iteration=on_iteration)
    collect = trainer.algorithm.sampler.collect

    def timed_collect(*args: Any) -> Any:
        marks.setdefault("first_rollout", time.perf_counter())
        return collect(*args)

    trainer.algorithm.sampler.collect = timed_collect  # type: ignore[method-assign]
    result = trainer.run()
    seconds = marks["last_iteration"] - marks["first_rollout"]
    return {
        "steps": result.steps,
        "seconds": seconds,
        "sps": result.steps / seconds,
        "rollout_share": phases["rollout"] / (phases["rollout"] + phases["update"]),
        "last_return": result.mean_return,
    }


def worker_main(argv: list[str]) -> None:
    """``--worker ENV TOTAL SEED RUN_DIR OVERRIDE...``: one entityrl run, one JSON line."""
    name, total, seed, run_dir, *overrides = argv
    print(json.dumps(train_ours(name, int(total), int(seed), run_dir, overrides)))


# ---------------------------------------------------------------------------- measuring
def tree_pss(root: int) -> int:
    """Proportional set size, in bytes, of ``root`` and all its descendants together.

    PSS splits each shared page between the processes that map it, so forked workers are not
    counted as full copies of their parent (a sum of RSS would count them so, and would jump
    whenever the trainer forks a short-lived helper).
    """
    parents: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(entry.path, "stat").read_text()
            except OSError:
                continue
            # The command name (field 2) is parenthesized and may hold spaces.
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    tree, frontier = {root}, [root]
    while frontier:
        pid = frontier.pop()
        children = [child for child, parent in parents.items() if parent == pid]
        tree.update(children)
        frontier.extend(children)
    total = 0
    for pid in tree:
        try:
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        total += next(
            int(line.split()[1]) for line in rollup.splitlines() if line.startswith("Pss:")
        )
    return total * 1024


def measure(command: list[str], env: dict[str, str], timeout: float) -> dict:
    """Run ``command``, sampling its memory; its JSON answer plus ``peak_pss`` (process tree)
    and ``max_rss`` (its largest single process, from the kernel's accounting)."""
    started = time.monotonic()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(command, stdout=out, stderr=err, text=True, env=env)
        peak = 0
        next_sample = started
        while True:
            # wait4 rather than poll: it also reports the largest RSS of the process and of the
            # descendants it waited for.
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                proc.returncode = os.waitstatus_to_exitcode(status)
                break
            now = time.monotonic()
            if now >= next_sample:
                peak = max(peak, tree_pss(proc.pid))
                next_sample = now + MEMORY_SAMPLE_SECONDS
            if now - started > timeout:
                proc.kill()
                proc.wait()
                raise RuntimeError(f"{command[1:3]} took more than {timeout:.0f} s")
            time.sleep(POLL_SECONDS)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(command[1:])} failed:\n{err.read()[-3000:]}")
        answer = json.loads(out.read().strip().splitlines()[-1])
    answer["peak_pss"] = peak
    answer["max_rss"] = usage.ru_maxrss * 1024
    return answer


def subprocess_env(torch_threads: int) -> dict[str, str]:
    env = dict(os.environ)
    if torch_threads:
        # torch's default thread count follows OMP_NUM_THREADS; set for both sides alike.
        env["OMP_NUM_THREADS"] = str(torch_threads)
    return env


def run_ours(
    name: str,
    processes: int,
    total: int,
    seed: int,
    torch_threads: int,
    extra: Sequence[str] = (),
    variables: Mapping[str, str] | None = None,
) -> dict:
    """One entityrl run with the matched settings, plus ``extra`` overrides and environment
    ``variables`` (benchmarks/gpu.py: the device, the torch path)."""
    with tempfile.TemporaryDirectory() as tmp:
        command = [str(PEER_PYTHON), __file__, "--worker", name, str(total), str(seed)]
        command += [str(Path(tmp, "run")), *matched_overrides(processes, torch_threads), *extra]
        env = subprocess_env(torch_threads) | dict(variables or {})
        return measure(command, env, timeout=3600)


def run_reference(
    name: str, processes: int, total: int, seed: int, torch_threads: int, cuda: bool = False
) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        command = [str(PEER_PYTHON), str(PEER_SCRIPTS / "throughput_peer.py"), name]
        command += [str(processes), str(total), str(seed), tmp, str(int(cuda))]
        return measure(command, subprocess_env(torch_threads), timeout=3600)


# ---------------------------------------------------------------------------- throughput
def entityrl_revision() -> str:
    """The commit of the entityrl tree measured, and whether its package has local changes."""
    repo = Path(__file__).resolve().parent.parent
    git = ["git", "-C", str(repo)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    changed = subprocess.run(
        [*git, "status", "--porcelain", "--", "entityrl"], capture_output=True, text=True
    )
    dirty = " with uncommitted changes to entityrl/" if changed.stdout.strip() else ""
    return f"entityrl at {head.stdout.strip() or 'unknown commit'}{dirty}"


def peer_versions() -> str:
    """numpy and torch of the reference interpreter, where both trainers run."""
    probe = "import numpy, torch; print(f'numpy {numpy.__version__}, torch {torch.__version__}')"
    found = subprocess.run([str(PEER_PYTHON), "-c", probe], capture_output=True, text=True)
    return found.stdout.strip() or "unknown versions"


def memory(answers: dict | list[dict]) -> str:
    """Peak PSS of the process tree / max RSS of one process (medians for several runs)."""
    runs = answers if isinstance(answers, list) else [answers]
    pss, rss = median_of(runs, "peak_pss"), median_of(runs, "max_rss")
    return f"{pss / 2**20:,.0f} / {rss / 2**20:,.0f} MiB"


def throughput(args: argparse.Namespace) -> None:
    revision = entityrl_revision()
    load_before = os.getloadavg()
    results: dict[tuple[str, int], dict[str, list[dict]]] = {}
    for run in range(args.runs):
        for name in args.envs:
            for processes in args.processes:
                cell = results.setdefault((name, processes), {"ours": [], "reference": []})
                sides = [("ours", run_ours), ("reference", run_reference)]
                # Alternate who goes first, so neither always meets the same background load.
                for side, runner in sides if run % 2 == 0 else sides[::-1]:
                    answer = runner(name, processes, args.timesteps, run + 1, args.torch_threads)
                    cell[side].append(answer)
                    print(
                        f"run {run + 1} {name:<18} {processes} process(es) {side:<9} "
                        f"{answer['sps']:>9,.0f} samples/s  memory {memory(answer)}",
                        flush=True,
                    )
    load_after = os.getloadavg()
    write_throughput(args, results, load_before, load_after, revision)


def median_of(answers: list[dict], key: str) -> float:
    return statistics.median(a[key] for a in answers)


def write_throughput(
    args: argparse.Namespace,
    results: dict[tuple[str, int], dict[str, list[dict]]],
    load_before: tuple[float, ...],
    load_after: tuple[float, ...],
    revision: str,
) -> None:
    threads = (
        f"{args.torch_threads} torch thread(s) on both sides (OMP_NUM_THREADS)"
        if args.torch_threads
        else "each trainer's default torch threads (enn-trainer: torch's default, one per "
        "core; entityrl: one per core with 1 process, half the cores with 2)"
    )
    command = (
        f"python benchmarks/throughput.py --timesteps {args.timesteps} --runs {args.runs} "
        f"--envs {' '.join(args.envs)} --processes {' '.join(map(str, args.processes))}"
        + (f" --torch-threads {args.torch_threads}" if args.torch_threads else "")
    )
    lines = [
        f"Command: `{command}`",
        f"Machine: {machine()} (this script's interpreter); both trainers run in the "
        f"reference interpreter with "
        f"{peer_versions()}; load average {load_before[0]:.1f} before and "
        f"{load_after[0]:.1f} after the run (1-minute); {revision}.",
        "",
        "entityrl's trainer (through `entityrl.compat.entity_gym`) and enn-trainer 0.1.16 train "
        "on entity-gym 0.1.10's own example environments with the same settings: 128 "
        "environments x 16 steps per rollout, RogueNet d_model 32, 2 layers, 2 heads, "
        "minibatch 1024, 3 epochs, lr 0.001 annealed, entropy coefficient 0.1 annealed, "
        f"gamma 0.99, GAE lambda 0.95, clip 0.2 (value clipping on), value coefficient 0.5; "
        f"{args.timesteps:,} steps per run, {threads}. Both run in the reference stack's "
        "interpreter; neither writes TensorBoard events (enn-trainer runs untracked, entityrl "
        "writes only its metrics.jsonl). entityrl runs with its defaults otherwise: the ragged "
        "attention and pointwise kernels and `net.precision=auto` (bfloat16 products on CPUs with bfloat16 instructions). "
        "Samples per second = environment steps / time "
        "from the start of the first rollout to the end of the last iteration (startup "
        "excluded on both sides); medians of "
        f"{args.runs} runs, the two trainers alternating. Memory: peak PSS of the trainer's "
        "process tree (environment workers included; shared pages split between the processes "
        "that share them), sampled every second / max RSS of its largest single process. The "
        "machine's 2 cores are shared with other jobs: absolute figures move with "
        "their load, so the ratio between the two trainers of the same run is what counts. "
        "Rollout share: the part of entityrl's loop spent collecting rollouts (the rest is the "
        "PPO update).",
        "",
        "| environment | processes | entityrl samples/s | enn-trainer samples/s | ratio | goal "
        "| entityrl memory | enn-trainer memory | entityrl rollout share |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for (name, processes), cell in results.items():
        ours, ref = median_of(cell["ours"], "sps"), median_of(cell["reference"], "sps")
        goal = GOALS.get(name, DEFAULT_GOAL)
        lines.append(
            f"| {name} | {processes} | {ours:,.0f} | {ref:,.0f} | {ours / ref:.2f}x "
            f"| {goal:.0f}x | {memory(cell['ours'])} | {memory(cell['reference'])} "
            f"| {median_of(cell['ours'], 'rollout_share'):.0%} |"
        )
    lines += ["", "Every run (samples/s, entityrl / enn-trainer):", ""]
    for (name, processes), cell in results.items():
        pairs = ", ".join(
            f"{a['sps']:,.0f} / {b['sps']:,.0f}"
            for a, b in zip(cell["ours"], cell["reference"], strict=True)
        )
        lines.append(f"- {name}, {processes} process(es): {pairs}")
    replace_section(throughput_title(args.torch_threads), "\n".join(lines))
    print("\n".join(lines))


def throughput_title(torch_threads: int | None) -> str:
    """Each thread count measured gets its own section."""
    if not torch_threads:
        return TITLE
    return f"{TITLE} ({torch_threads} torch thread{'s' if torch_threads > 1 else ''})"


# ---------------------------------------------------------------------------- returns
def returns(args: argparse.Namespace) -> None:
    revision = entityrl_revision()
    rows = []
    for name, run in RETURN_RUNS.items():
        kwargs = [f"env.kwargs.{k}={json.dumps(v)}" for k, v in run.env_kwargs.items()]
        threads = f"torch_threads={args.torch_threads}"
        settings = {"entityrl defaults": [threads]}
        if run.tuned:
            settings[" ".join(run.tuned)] = [*run.tuned, threads]
        if args.reference_settings:
            settings["enn-trainer's config"] = [*run.reference_settings, threads]
        for label, overrides in settings.items():
            with tempfile.TemporaryDirectory() as tmp:
                command = [str(PEER_PYTHON), __file__, "--worker", name, str(run.steps), "1"]
                command += [str(Path(tmp, "run")), *kwargs, *overrides]
                answer = measure(command, subprocess_env(args.torch_threads), timeout=7200)
            rows.append((name, label, answer))
            print(f"{name} ({label}): {answer}", flush=True)
    lines = [
        "Command: `python benchmarks/throughput.py --returns"
        + (" --reference-settings" if args.reference_settings else "")
        + (f" --torch-threads {args.torch_threads}`" if args.torch_threads else "`"),
        f"Machine: {machine()}; run in the reference interpreter with {peer_versions()}; "
        f"{revision}.",
        "",
        "entityrl's trainer on entity-gym 0.1.10's CherryPick and PickMatchingBalls (through "
        "`entityrl.compat.entity_gym`), 1 environment process, seed 1, one run each; the "
        "environment arguments of enn-trainer's published configs for these "
        "environments. Mean return of the last 100 episodes at the end of training. Settings: "
        "entityrl's defaults; for PickMatchingBalls also a wider network with more entropy "
        "(the settings column); with --reference-settings, those of enn-trainer's config "
        "mapped onto entityrl's trainer "
        + "; ".join(
            f"({name}: {', '.join(run.reference_settings)})" for name, run in RETURN_RUNS.items()
        )
        + ". The last column is the return enn-trainer's config states it reaches in as many "
        "steps.",
        "",
        "| environment | environment arguments | settings | steps | final mean return "
        "| samples/s | enn-trainer config states |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for name, label, answer in rows:
        run = RETURN_RUNS[name]
        env_args = ", ".join(f"{k}={v}" for k, v in run.env_kwargs.items())
        lines.append(
            f"| {name} | {env_args} | {label} | {answer['steps']:,} "
            f"| {answer['last_return']:.3f} | {answer['sps']:,.0f} | {run.states} |"
        )
    replace_section(RETURNS_TITLE, "\n".join(lines))
    print("\n".join(lines))


# ---------------------------------------------------------------------------- profile
# Parts of a training iteration, as (label, path fragment, function name) of the function whose
# cumulative time measures it; indentation shows what contains what.
PROFILE_PARTS = (
    ("training iteration", "training/runner.py", "train_iteration"),
    ("  rollout (Sampler.collect)", "training/sampler.py", "collect"),
    ("    policy forward (RogueNet.act)", "nn/rogue_net.py", "act"),
    ("    environments (SerialVecEnv.act)", "env/vec_env.py", "act"),
    ("      EntityGymEnvironment.act", "compat/entity_gym.py", "act"),
    ("        entity-gym environment's own act", "entity_gym/examples/", "act"),
    ("      Batcher.batch (observations -> VecObs)", "env/batching.py", "batch"),
    ("      Batcher.unbatch (actions -> per env)", "env/batching.py", "unbatch"),
    ("  PPO update (ppo_update)", "algorithms/ppo/loss.py", "ppo_update"),
    ("    forward with gradients (RogueNet.evaluate)", "nn/rogue_net.py", "evaluate"),
    ("      batch preparation (RogueNet.prepare)", "nn/rogue_net.py", "prepare"),
    (
        "    backward (autograd engine)",
        "~",
        "<method 'run_backward' of 'torch._C._EngineBase' objects>",
    ),
    ("    Adam step", "torch/optim/adam.py", "step"),
    ("  input normalizers (update_normalizers)", "nn/rogue_net.py", "update_normalizers"),
)


def where_time_goes(stats: pstats.Stats) -> list[tuple[str, float, float]]:
    """(part, seconds, share of the training iterations) for :data:`PROFILE_PARTS`."""
    table = stats.stats  # type: ignore[attr-defined]
    seconds = []
    for label, fragment, function in PROFILE_PARTS:
        total = sum(
            entry[3]
            for (path, _, func), entry in table.items()
            if func == function and fragment in path
        )
        seconds.append((label, total))
    whole = seconds[0][1] or 1.0
    return [(label, total, total / whole) for label, total in seconds]


def profile(args: argparse.Namespace) -> None:
    """cProfile entityrl's training loop on one environment; print where the time goes."""
    name = args.profile
    with tempfile.TemporaryDirectory() as tmp:
        stats_file = str(Path(tmp, "profile.out"))
        command = [str(PEER_PYTHON), "-m", "cProfile", "-o", stats_file, __file__, "--worker"]
        command += [name, str(args.timesteps), "1", str(Path(tmp, "run"))]
        command += matched_overrides(args.processes[0], args.torch_threads)
        answer = measure(command, subprocess_env(args.torch_threads), timeout=3600)
        stats = pstats.Stats(stats_file)
    print(f"{name}, {args.processes[0]} process(es): {answer['sps']:,.0f} samples/s under cProfile")
    print("\n| part of the training loop | seconds | share |\n| --- | ---: | ---: |")
    for label, total, share in where_time_goes(stats):
        print(f"| {label.replace('  ', '. ')} | {total:.2f} | {share:.1%} |")
    print()
    stats.sort_stats("tottime").print_stats(25)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker_main(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timesteps", type=int, default=65_536)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--envs", nargs="+", default=list(ENVS), choices=ENVS)
    parser.add_argument("--processes", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--torch-threads", type=int, default=0)
    parser.add_argument("--returns", action="store_true")
    parser.add_argument(
        "--reference-settings",
        action="store_true",
        help="with --returns: also train with enn-trainer's configs (d_model 128; slow)",
    )
    parser.add_argument("--profile", choices=ENVS)
    args = parser.parse_args()
    require_peer()
    # The results name this interpreter's numpy and torch: fail now, not after the runs, if
    # it has none (the project's venv has them).
    try:
        machine()
    except ImportError as err:
        message = f"run this script with the project's interpreter (.venv/bin/python): {err}"
        raise SystemExit(message) from None
    if args.returns:
        returns(args)
    elif args.profile:
        profile(args)
    else:
        throughput(args)


if __name__ == "__main__":
    main()
