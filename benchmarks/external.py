"""entityrl beside Stable-Baselines3 PPO on the same machine, in the same run.

entityrl trains with its shipped config for the task (through entityrl.interop); SB3 trains
with RL Baselines3 Zoo's tuned hyperparameters and step budget in its own virtual environment
(benchmarks/sb3_ppo.py, started with --sb3-python; SB3 is never a dependency of entityrl).
Both follow the same rule: every ``interval`` steps the agent plays 32 episodes with sampled
actions, and training ends at the first evaluation that reaches the task's target (CartPole:
mean return 475; MiniGrid: success rate 0.95), else at the step budget. The evaluations count
in the wall time. The final agents then play the same number of fresh episodes.

Crafter has no target: both trainers train for the same step budget (``--steps``) without
periodic evaluations, and the final agents' episodes give each achievement's success rate and
the Crafter score (entityrl.interop.crafter.crafter_score). SB3 trains as the Crafter paper's
PPO baseline did: its default hyperparameters and CNN policy on Crafter's 64 x 64 image.

Per task, the table gives steps trained, wall time, return and success reached, per seed and
as medians; ``--curves FILE`` keeps every evaluation (steps, seconds, return, success) as JSON,
which benchmarks/plot_external.py draws.

usage: python benchmarks/external.py --sb3-python /work/venvs/sb3/bin/python [--seeds 1 2 3]
       [--tasks CartPole-v1 ...] [--trainers entityrl] [--steps N] [--curves FILE] [--write]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).parent))
from _peer import machine
from learning import EPISODES, run
from results import replace_section

from entityrl.interop.crafter import crafter_score
from entityrl.training.agent import Evaluation
from entityrl.training.callbacks import Callback
from entityrl.training.config import config_path_for
from entityrl.training.runner import Trainer

EVAL_EPISODES = 32


@dataclass(frozen=True)
class Task:
    name: str
    """entityrl's registry name."""
    gym_id: str
    """The Gymnasium id SB3 trains on."""
    sb3_steps: int
    """RL Baselines3 Zoo's step budget."""
    metric: str
    """What the target is about: "return" or "success"; "score" (Crafter): no target."""
    target: float
    interval: int
    """Steps between evaluations (0: none)."""
    fixed_budget: bool = False
    """Both trainers train for ``sb3_steps`` (else entityrl for its config's budget)."""
    episodes: int = EPISODES
    """Episodes the final agents play."""


TASKS = {
    task.gym_id: task
    for task in (
        Task("gymnasium:CartPole-v1", "CartPole-v1", 100_000, "return", 475.0, 8192),
        Task(
            "minigrid:MiniGrid-Empty-Random-5x5-v0",
            "MiniGrid-Empty-Random-5x5-v0",
            100_000,
            "success",
            0.95,
            4096,
        ),
        Task(
            "minigrid:MiniGrid-DoorKey-5x5-v0",
            "MiniGrid-DoorKey-5x5-v0",
            100_000,
            "success",
            0.95,
            8192,
        ),
        # 100 final episodes: Crafter's episodes are long (hundreds of steps).
        Task("crafter:default", "Crafter", 100_000, "score", math.inf, 0, True, 100),
    )
}
TRAINERS = ("entityrl", "SB3 PPO")


class Curve(Callback):
    """Records every periodic evaluation of an entityrl run; stops it at the task's target."""

    def __init__(self, task: Task) -> None:
        self.task = task
        self.started = time.time()
        self.points: list[tuple[int, float, float, float]] = []

    def on_eval(self, trainer: Trainer, evaluation: Evaluation) -> None:
        success = evaluation.mean("success") if "success" in evaluation.metrics else math.nan
        mean_return = evaluation.mean()
        self.points.append((trainer.step, time.time() - self.started, mean_return, success))
        if (mean_return if self.task.metric == "return" else success) >= self.task.target:
            trainer.request_stop(f"evaluation {self.task.metric} reached {self.task.target}")


def entityrl_run(task: Task, seed: int) -> dict[str, Any]:
    curve = Curve(task)
    budget = [f"total_timesteps={task.sb3_steps}"] if task.fixed_budget else []
    overrides = [
        *budget,
        f"seed={seed}",
        f"eval.interval={task.interval}",
        f"eval.episodes={EVAL_EPISODES}",
        f"eval.num_envs={EVAL_EPISODES}",  # one episode each, as SB3's evaluation
        "eval.stop_at_target=false",  # the Curve callback stops at the task's target
    ]
    result = run(
        config_path_for(task.name), 1, overrides, callbacks=[curve], episodes=task.episodes
    )
    prefix = "achievement/"
    achievements = {
        name.removeprefix(prefix): rate
        for name, rate in result["metrics"].items()
        if name.startswith(prefix)
    }
    return {**result, "achievements": achievements, "curve": curve.points}


def sb3_run(python: str, task: Task, seed: int) -> dict[str, Any]:
    script = Path(__file__).parent / "sb3_ppo.py"
    stop = ["--stop-metric", task.metric, "--stop-at", str(task.target)]
    out = subprocess.run(
        [python, str(script), "--env", task.gym_id, "--seed", str(seed),
         "--steps", str(task.sb3_steps), "--episodes", str(task.episodes),
         "--eval-interval", str(task.interval), "--eval-episodes", str(EVAL_EPISODES),
         *(stop if math.isfinite(task.target) else [])],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def load_average() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def achievement_table(runs: dict[str, list[dict[str, Any]]], seeds: list[int]) -> str:
    """Per achievement, the success rate of each trainer's final episodes, per seed; last,
    the Crafter score of those rates."""
    columns = [
        (trainer, seed, r)
        for trainer, rs in runs.items()
        for seed, r in zip(seeds, rs, strict=True)
    ]
    names = sorted({name for _, _, r in columns for name in r["achievements"]})
    lines = [
        "| achievement | " + " | ".join(f"{t} (seed {s})" for t, s, _ in columns) + " |",
        "|---|" + "---:|" * len(columns),
    ]
    for name in names:
        rates = " | ".join(f"{100 * r['achievements'].get(name, 0.0):.1f}%" for *_, r in columns)
        lines.append(f"| {name} | {rates} |")
    scores = " | ".join(f"**{crafter_score(r['achievements']):.2f}%**" for *_, r in columns)
    lines.append(f"| Crafter score | {scores} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sb3-python", required=True, help="python of a venv with SB3")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    targets = sorted(gym_id for gym_id, task in TASKS.items() if not task.fixed_budget)
    parser.add_argument("--tasks", nargs="+", choices=sorted(TASKS), default=targets)
    parser.add_argument("--trainers", nargs="+", choices=TRAINERS, default=TRAINERS)
    parser.add_argument("--steps", type=int, help="both trainers' budget on Crafter")
    parser.add_argument("--curves", type=Path, help="write every evaluation here (JSON)")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    torch.set_num_threads(1)
    lines = [
        "| task | trainer | seed | steps | wall time (s) | return | success | load average |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    medians = [
        "| task | trainer | median steps | median wall time (s) | median return | median success |",
        "|---|---|---:|---:|---:|---:|",
    ]
    curves: dict[str, dict[str, list[Any]]] = {}
    extra: list[str] = []
    for gym_id in args.tasks:
        task = TASKS[gym_id]
        if task.fixed_budget and args.steps:
            task = dataclasses.replace(task, sb3_steps=args.steps)
        results: dict[str, list[dict[str, Any]]] = {trainer: [] for trainer in args.trainers}
        for seed in args.seeds:
            for trainer in results:
                # One training at a time; the load average says what else the machine ran.
                if trainer == "entityrl":
                    r = entityrl_run(task, seed)
                else:
                    r = sb3_run(args.sb3_python, task, seed)
                r["load"] = load_average()
                results[trainer].append(r)
                curves.setdefault(gym_id, {}).setdefault(trainer, []).append(r["curve"])
                success = f"{r['success']:.3g}" if task.metric == "success" else "-"
                lines.append(
                    f"| {gym_id} | {trainer} | {seed} | {r['steps']:,} | {r['seconds']:.1f} "
                    f"| {r['reached']:.3g} | {success} | {r['load']:.1f} |"
                )
                print(lines[-1], flush=True)
                if r.get("achievements"):  # kept in the log as they come: Crafter runs are long
                    print(json.dumps(r["achievements"]), flush=True)
        if task.metric == "score":
            extra.append(
                f"{gym_id}, {task.sb3_steps:,} steps each:\n\n"
                + achievement_table(results, args.seeds)
            )
            print(extra[-1], flush=True)
        for trainer, runs in results.items():

            def median(key: str, runs: list[dict[str, Any]] = runs) -> float:
                return statistics.median(float(r[key]) for r in runs)

            success = f"{median('success'):.3g}" if task.metric == "success" else "-"
            medians.append(
                f"| {gym_id} | {trainer} | {median('steps'):,.0f} | {median('seconds'):.1f} "
                f"| {median('reached'):.3g} | {success} |"
            )
    summary = "\n\n".join(["\n".join(medians), *extra])
    print(summary)
    if args.curves:
        args.curves.write_text(json.dumps(curves))
    if args.write:
        replace_section(
            f"Side by side with Stable-Baselines3: {', '.join(args.tasks)} "
            "(benchmarks/external.py)",
            f"Command: `python benchmarks/external.py --sb3-python /work/venvs/sb3/bin/python "
            f"--seeds {' '.join(map(str, args.seeds))} --tasks {' '.join(args.tasks)} "
            f"--trainers {' '.join(map(repr, args.trainers))} "
            f"{f'--steps {args.steps} ' if args.steps else ''}--write`\n\nMachine: {machine()}; one torch thread each, one training at a "
            f"time (the load average is the machine's, other jobs included). Returns and "
            f"success: {EPISODES} fresh episodes with sampled actions "
            f"(Crafter: {TASKS['Crafter'].episodes}).\n\n{summary}\n\n"
            f"{chr(10).join(lines)}\n",
        )


if __name__ == "__main__":
    main()
