"""The shape of the Eden paper's Figure 16 for RL^2: return over meta-training, on
meta-training tasks and on held-out (meta-test) tasks, before and after adapting.

The paper plots, for optimization-based meta-RL methods, the return on meta-training and
meta-test tasks as meta-training goes on, before and after the method's adaptation step. For
RL^2 (``experiments/eden/meta_rl.yaml``: PPO with memory on ``Trials`` of river-navigation
episodes of one task) adaptation is what the memory does within a trial, so "before" is a
trial's first episode and "after" its last. Every ``--every`` steps a callback plays
``--trials`` trials of held-out tasks and of meta-training tasks with the current policy
(sampled actions, the same tasks at every point: ``run.trial_returns``) and records the return
of each episode of a trial.

Each seed trains in ``OUT/seed<S>``; its curve goes to ``OUT/seed<S>.json`` when it finishes, and
a later sitting with the same settings reuses it (an interrupted seed is trained again from
scratch: a few minutes). The curves of all seeds go to ``experiments/eden/results/fig16.json``,
the figure (means over the seeds with 95% bootstrap intervals) to
``docs/images/eden_fig16.png``, the table to the section "Results: Figure 16, RL^2 over
meta-training" of docs/survival.md.

usage: python experiments/eden/fig16.py [--seeds 1 2 3 4 5] [--steps 500000] [--every 25000]
       [--trials 64] [--out runs/eden/fig16] [--report-only]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from entityrl.training import Callback

if TYPE_CHECKING:
    from entityrl.training import Trainer

HERE = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("eden_run", HERE / "run.py")
assert spec is not None and spec.loader is not None
eden = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = eden  # dataclasses look their module up
spec.loader.exec_module(eden)

TITLE = "Results: Figure 16, RL^2 over meta-training"
SPLITS = {"train": "meta-training tasks", "test": "held-out tasks"}


class TrialCurve(Callback):
    """A training callback: every ``every`` steps (and at the end), the current policy's return
    per episode of a trial on held-out and on meta-training tasks."""

    def __init__(self, every: int, trials: int) -> None:
        self.every = every
        self.trials = trials
        self.next = 0
        self.points: list[dict] = []

    def on_iteration(self, trainer: Trainer, metrics: dict[str, float]) -> None:
        last = trainer.step >= trainer.config.total_timesteps
        if trainer.step < self.next and not last:
            return
        self.next = (trainer.step // self.every + 1) * self.every
        self.points.append({"step": trainer.step, **self.evaluate(trainer)})
        point = self.points[-1]
        print(
            f"  step {trainer.step:>9,}: return per episode of a trial, held-out "
            f"{_fmt(point['test'])}, meta-training {_fmt(point['train'])}",
            flush=True,
        )

    def evaluate(self, trainer: Trainer) -> dict[str, list[float]]:
        from entityrl.training.agent import Agent

        # An agent of its own, seeded apart: the training's generators are left alone.
        agent = Agent(trainer.net, trainer.config, deterministic=False, seed=eden.EVAL_SEED)
        kwargs = dict(trainer.config.env.kwargs)
        try:
            return {
                split: eden.trial_returns(agent, kwargs, split, self.trials)["return"]
                for split in SPLITS
            }
        finally:
            trainer.net.train()


def _fmt(returns: list[float]) -> str:
    return " / ".join(f"{r:.0f}" for r in returns)


def train_seed(seed: int, args: argparse.Namespace) -> dict:
    """One seed's curve: reused from ``OUT/seed<S>.json`` if it has these settings."""
    from entityrl.training import train

    settings = {"seed": seed, "steps": args.steps, "every": args.every, "trials": args.trials}
    done = args.out / f"seed{seed}.json"
    if done.exists():
        saved = json.loads(done.read_text())
        if {k: saved.get(k) for k in settings} == settings:
            print(f"seed {seed}: reused {done}", flush=True)
            return saved
    run_dir = args.out / f"seed{seed}"
    shutil.rmtree(run_dir, ignore_errors=True)  # an interrupted sitting's: trained again
    print(f"seed {seed}: training {args.steps:,} steps in {run_dir}", flush=True)
    curve = TrialCurve(args.every, args.trials)
    started = time.time()
    train(
        config=eden.META_CONFIG,
        overrides=[
            f"seed={seed}",
            f"total_timesteps={args.steps}",
            f"log.run_dir={run_dir}",
            "torch_threads=1",
        ],
        callbacks=[curve],
    )
    result = {**settings, "seconds": time.time() - started, "points": curve.points}
    eden.write_json(done, result)
    return result


def plot(results: list[dict], path: Path) -> None:
    """Two panels (meta-training and held-out tasks): the first and the last episode of a
    trial, mean over the seeds with a 95% bootstrap interval, against meta-training steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from entityrl import stats

    steps = [p["step"] for p in results[0]["points"]]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.8), sharey=True, constrained_layout=True)
    for ax, (split, what) in zip(axes, SPLITS.items(), strict=True):
        for index, label in ((0, "first episode of a trial"), (-1, "last episode of a trial")):
            per_step = np.array([[p[split][index] for p in r["points"]] for r in results]).T
            bands = [stats.interval([row], aggregate=stats.mean) for row in per_step]
            ax.plot(steps, [b.value for b in bands], label=label)
            ax.fill_between(
                steps, [b.low for b in bands], [b.high for b in bands], alpha=0.2
            )  # fmt: skip
        ax.set(title=f"RiverNavigation, {what}", xlabel="meta-training steps")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("return of the episode")
    axes[0].legend(fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    tmp.replace(path)


def section(results: list[dict]) -> str:
    """The docs' table: at a few points of meta-training, the mean return of each episode of a
    trial over the seeds, on both kinds of task."""
    import numpy as np

    seeds = " ".join(str(r["seed"]) for r in results)
    steps, every, trials = (results[0][k] for k in ("steps", "every", "trials"))
    points = results[0]["points"]
    shown = sorted({0, len(points) // 4, len(points) // 2, len(points) - 1})
    rows = [
        "| meta-training step | tasks | return per episode of a trial | last - first (per seed) |",
        "|---:|---|---|---|",
    ]
    for i in shown:
        for split, what in SPLITS.items():
            returns = np.array([r["points"][i][split] for r in results])
            gain = returns[:, -1] - returns[:, 0]
            rows.append(
                f"| {points[i]['step']:,} | {what} | {_fmt(list(returns.mean(0)))} | "
                f"{gain.mean():+.1f} ({', '.join(f'{g:+.1f}' for g in gain)}) |"
            )
    minutes = sum(r["seconds"] for r in results) / 60
    return (
        f"### {TITLE}\n\n"
        f"Command: `python experiments/eden/fig16.py --seeds {seeds} --steps {steps} "
        f"--every {every} --trials {trials}`: `meta_rl.yaml` (RL^2 on trials of "
        f"{eden.TRIAL_EPISODES['navigation']} river-navigation episodes), {trials} trials per "
        f"point and kind of task, sampled actions; {minutes:.0f} minutes of training and "
        f"evaluation in all on {platform.machine()} ({platform.python_version()}). Figure: "
        "means over the seeds, 95% bootstrap bands.\n\n"
        "![RL^2 over meta-training](images/eden_fig16.png)\n\n" + "\n".join(rows) + "\n"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--steps", type=int, default=500_000)
    parser.add_argument("--every", type=int, default=25_000)
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--out", type=Path, default=eden.DEFAULT_OUT / "fig16")
    parser.add_argument("--report-only", action="store_true", help="report the finished seeds")
    args = parser.parse_args(argv)
    for name in ("steps", "every", "trials"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    if args.report_only:
        found = [args.out / f"seed{s}.json" for s in args.seeds]
        results = [json.loads(p.read_text()) for p in found if p.exists()]
        if not results:
            parser.error(f"--report-only: no finished seed in {args.out} (seeds {args.seeds})")
    else:
        results = [train_seed(seed, args) for seed in args.seeds]
    report(results)


def report(
    results: list[dict], docs: Path = eden.DOCS, results_dir: Path = HERE / "results"
) -> None:
    """The curves to ``results_dir``/fig16.json, the figure and the section to ``docs``."""
    eden.write_json(results_dir / "fig16.json", results)
    plot(results, docs / "images" / "eden_fig16.png")
    eden.replace_section(docs / "survival.md", section(results))
    print(f"wrote fig16.json, images/eden_fig16.png and '{TITLE}' in {docs / 'survival.md'}")


if __name__ == "__main__":
    main()
