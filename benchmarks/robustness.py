"""Robustness suite: entityrl's library defaults beside Stable-Baselines3 PPO's defaults.

Each task is trained as a new user of either library would on a task nobody tuned: entityrl
with no config file at all (``load_config`` would pick up a shipped per-task config for a name
that has one, e.g. ``gymnasium:CartPole-v1``; the suite sets only ``env.id``, the seed and the
step budget), SB3 with ``PPO("MlpPolicy", env)`` on one environment (benchmarks/sb3_ppo.py
``--defaults``). Both train for the same environment steps; the final agents then play
``EPISODES`` fresh episodes with sampled actions. A task's score is normalized: 0 is the mean
return of uniformly random legal actions (measured here, same episodes), 1 the task's stated
reference return. Over tasks x seeds the table gives the interquartile mean (IQM) of the
normalized scores with a 95% stratified bootstrap interval (seeds resampled within each task).

Every (task, trainer, seed, budget) result is kept in a JSON cache (written atomically after
each run), so the suite can be stopped at any time and resumed, by anyone, with the same
command; ``--label NAME KEY=VALUE ...`` screens a candidate change of entityrl's defaults as
its own trainer (``entityrl[NAME]``).

usage: python benchmarks/robustness.py [--tasks ...] [--seeds 1 2 3] [--steps 100000]
       [--trainers entityrl sb3] [--label NAME KEY=VALUE ...] [--write]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

sys.path.insert(0, str(Path(__file__).parent))
from _peer import machine
from learning import run
from results import replace_section

from entityrl import stats
from entityrl.env.random_policy import RandomPolicy
from entityrl.envs import make_vec
from entityrl.training import evaluate

EPISODES = 100
CACHE = Path(__file__).parent / "robustness.json"
SB3 = "sb3"


@dataclass(frozen=True)
class Task:
    name: str
    """entityrl's environment name."""
    best: float
    """The reference return that scores 1."""
    gym_id: str | None = None
    """The Gymnasium id SB3 trains on (None: SB3 cannot train this task)."""


# References: the return of a near-optimal policy (CartPole's cap; MountainCar's and
# Pendulum's usual "solved" levels; MiniGrid's return is 1 - 0.9 * steps / limit, so 1 is the
# unreachable bound); the shipped entity environments' own config targets.
TASKS = {
    task.name: task
    for task in (
        Task("gymnasium:CartPole-v1", 500.0, "CartPole-v1"),
        Task("gymnasium:MountainCar-v0", -110.0, "MountainCar-v0"),
        Task("gymnasium:Pendulum-v1", -200.0, "Pendulum-v1"),
        Task("minigrid:MiniGrid-Empty-8x8-v0", 1.0, "MiniGrid-Empty-8x8-v0"),
        Task("minigrid:MiniGrid-FourRooms-v0", 1.0, "MiniGrid-FourRooms-v0"),
        Task("minigrid:MiniGrid-DoorKey-6x6-v0", 1.0, "MiniGrid-DoorKey-6x6-v0"),
        Task("minigrid:MiniGrid-RedBlueDoors-6x6-v0", 1.0, "MiniGrid-RedBlueDoors-6x6-v0"),
        Task("CherryPick", 0.95),
        Task("MineSweeper", 0.95),
    )
}
PENDING = {
    "pettingzoo:connect_four_v3": "self-play against snapshots, evaluated against random "
    "play: not wired into this script yet",
    "mpe2 (simple_reference / simple_tag)": "the mpe2 package is not installed and its names "
    "do not resolve yet",
}


def load_cache() -> dict[str, Any]:
    return json.loads(CACHE.read_text()) if CACHE.exists() else {"random": {}, "runs": {}}


def save_cache(cache: dict[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(dir=CACHE.parent, prefix=".robustness.", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(cache, f, indent=1, sort_keys=True)
    os.replace(tmp, CACHE)


def random_return(task: Task) -> float:
    """Mean return of uniformly random legal actions over ``EPISODES`` episodes."""
    with make_vec(task.name, 16, seed=12345) as env:
        return evaluate(RandomPolicy(env.action_space, seed=0), env, EPISODES).mean()


def train_entityrl(task: Task, seed: int, steps: int, overrides: Sequence[str]) -> dict[str, Any]:
    result = run(
        None,
        1,
        [f"env.id={task.name}", f"seed={seed}", f"total_timesteps={steps}", *overrides],
        episodes=EPISODES,
    )
    return {"steps": result["steps"], "seconds": result["seconds"], "return": result["reached"]}


def train_sb3(task: Task, seed: int, steps: int) -> dict[str, Any]:
    assert task.gym_id is not None
    script = Path(__file__).parent / "sb3_ppo.py"
    out = subprocess.run(
        [sys.executable, str(script), "--defaults", "--env", task.gym_id, "--seed", str(seed),
         "--steps", str(steps), "--episodes", str(EPISODES)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return {"steps": result["steps"], "seconds": result["seconds"], "return": result["reached"]}


def run_key(trainer: str, task: str, seed: int, steps: int) -> str:
    return f"{trainer}|{task}|{seed}|{steps}"


def report(
    cache: dict[str, Any], trainers: list[str], tasks: list[Task], seeds: list[int], steps: int
) -> str:
    """Per task and trainer the normalized score per seed and the mean wall time; then each
    trainer's IQM over the tasks every trainer finished for all seeds."""
    lines = [
        "| task | trainer | normalized score per seed | mean | wall time (s) |",
        "|---|---|---|---:|---:|",
    ]
    scores: dict[str, dict[str, npt.NDArray[np.float64]]] = {t: {} for t in trainers}
    for task in tasks:
        low = cache["random"].get(task.name)
        for trainer in trainers:
            runs = [cache["runs"].get(run_key(trainer, task.name, s, steps)) for s in seeds]
            done = [r for r in runs if r is not None]
            if not done or low is None:
                continue
            normalized = np.array([(r["return"] - low) / (task.best - low) for r in done])
            if len(done) == len(seeds):
                scores[trainer][task.name] = normalized
            shown = iter(normalized)
            per_seed = " ".join(f"{next(shown):.2f}" if r else "-" for r in runs)
            seconds = np.mean([r["seconds"] for r in done])
            lines.append(
                f"| {task.name} | {trainer} | {per_seed} | {normalized.mean():.2f} "
                f"| {seconds:.0f} |"
            )
    common = [t.name for t in tasks if all(t.name in scores[tr] for tr in trainers)]
    summary = [
        f"IQM of normalized scores over {len(common)} tasks x {len(seeds)} seeds "
        f"({', '.join(common) or 'none finished'}), 95% stratified bootstrap interval:",
        "",
        "| trainer | IQM | 95% interval |",
        "|---|---:|---|",
    ]
    for trainer in trainers if common else []:
        iqm = stats.interval([scores[trainer][name] for name in common])
        summary.append(f"| {trainer} | {iqm.value:.2f} | [{iqm.low:.2f}, {iqm.high:.2f}] |")
    if len(trainers) == 2 and common:
        first, second = ([scores[t][name] for name in common] for t in trainers)
        chance = stats.probability_of_improvement(first, second)
        summary += ["", f"Probability that a run of {trainers[0]} outscores one of {trainers[1]} "
                    f"on a task drawn at random: {chance}."]  # fmt: skip
    randoms = ", ".join(
        f"{t.name} {cache['random'][t.name]:.3g} (reference {t.best:g})"
        for t in tasks
        if t.name in cache["random"]
    )
    return "\n".join([*lines, "", *summary, "", f"Random-play returns (score 0): {randoms}."])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", choices=sorted(TASKS), default=sorted(TASKS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--steps", type=int, default=100_000, help="environment steps each")
    parser.add_argument(
        "--trainers", nargs="+", choices=["entityrl", SB3], default=["entityrl", SB3]
    )
    parser.add_argument(
        "--label", nargs="+", metavar="NAME KEY=VALUE", help="screen entityrl with overrides"
    )
    parser.add_argument("--report", nargs="+", help="trainers to tabulate (default: those run)")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    torch.set_num_threads(1)
    tasks = [TASKS[name] for name in args.tasks]
    label, overrides = (args.label[0], args.label[1:]) if args.label else (None, [])
    trainers = [f"entityrl[{label}]" if t == "entityrl" and label else t for t in args.trainers]
    cache = load_cache()
    for task in tasks:
        if task.name not in cache["random"]:
            cache["random"][task.name] = random_return(task)
            save_cache(cache)
        for seed in args.seeds:
            for trainer in trainers:
                key = run_key(trainer, task.name, seed, args.steps)
                if key in cache["runs"] or (trainer == SB3 and task.gym_id is None):
                    continue
                if trainer == SB3:
                    result = train_sb3(task, seed, args.steps)
                else:
                    result = train_entityrl(task, seed, args.steps, overrides)
                result["load"] = os.getloadavg()[0]
                cache["runs"][key] = result
                save_cache(cache)
                print(key, json.dumps(result), flush=True)
    table = report(cache, args.report or trainers, tasks, args.seeds, args.steps)
    print(table)
    if args.write:
        pending = "\n".join(f"- {name}: {why}" for name, why in PENDING.items())
        replace_section(
            "Robustness suite: library defaults beside SB3's defaults (benchmarks/robustness.py)",
            f"Command: `python benchmarks/robustness.py --seeds {' '.join(map(str, args.seeds))} "
            f"--steps {args.steps} --write` (results cached in benchmarks/robustness.json).\n\n"
            f"Machine: {machine()}; one torch thread, one training at a time. {args.steps:,} "
            f"environment steps each; {EPISODES} final episodes with sampled actions.\n\n"
            f"{table}\n\nPending:\n{pending}\n",
        )


if __name__ == "__main__":
    main()
