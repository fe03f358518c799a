"""The Eden paper's PPO studies on the survival world, one command each.

Every study is a grid of training runs: ``base.yaml`` plus a few overrides per run, repeated for
each seed. A run trains PPO, then its agent (sampled actions) and a uniformly random policy each
play ``--episodes`` fresh episodes. The study's results (per run and seed: lifetime, return,
deaths, tasks done, the learning curve) go to ``results/<study>.json``; its figure (mean
learning curves over the seeds, one panel per setting) to ``docs/images/eden_<study>.png``; its
table to the section "Results: <title>" of ``docs/survival.md``.

usage: python experiments/eden/run.py STUDY [--seeds 1 2 3] [--steps 2000000] [--episodes 100]
       [--jobs 1] [--threads 1] [--out DIR] [--runs TEXT] [--no-report]
       python experiments/eden/run.py STUDY --commands   (the equivalent ``entityrl train`` lines)
       python experiments/eden/run.py --list
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
DOCS = ROOT / "docs"
BASE = HERE / "base.yaml"
WORLDS = HERE / "worlds"
REWARDS = ("dense", "sparse", "very_sparse")
EXPANSIONS = ("3pig", "5pig", "expand_consume", "expand_pickup", "expand_collect", "expand_all")


@dataclass(frozen=True)
class Run:
    """One training run of a study: a curve (``label``) in a panel (``panel``) of its figure."""

    panel: str
    label: str
    overrides: tuple[str, ...]

    @property
    def name(self) -> str:
        return re.sub(r"[^a-z0-9]+", "_", f"{self.panel} {self.label}".lower()).strip("_")


@dataclass(frozen=True)
class Study:
    title: str
    runs: tuple[Run, ...]


def _world(file: str) -> tuple[str, ...]:
    # Relative to the repository's root, where main() runs.
    return ("env.id=Survival", f"env.kwargs.config={(WORLDS / file).relative_to(ROOT)}")


def _grid() -> dict[str, Study]:
    ll = "env.kwargs.life_limit"
    fig8 = [
        Run(f"life limit {limit}", label, (f"{ll}={limit}", f"env.kwargs.observation={mode}"))
        for limit in (50, 100, 150)
        for label, mode in (
            ("baseline (nearest1)", "nearest1"),
            ("10pigs (nearest10_prey)", "nearest10_prey"),
            ("10all (nearest10)", "nearest10"),
            ("entities", "entities"),
        )
    ]
    fig10 = [
        Run(f"{reward} reward", label, (f"{ll}=300", f"env.kwargs.reward={reward}", *expand))
        for reward in REWARDS
        for label, expand in [("simple", ())]
        + [(e, (f"env.kwargs.expand=[{e}]",)) for e in EXPANSIONS]
    ]
    fig11 = [
        Run(f"life limit {limit}", reward, (f"{ll}={limit}", f"env.kwargs.reward={reward}"))
        for limit in (100, 150, 300)
        for reward in REWARDS
    ]
    fig12 = [
        Run("life limit 300", "deceptive", (f"{ll}=300", *_world("deceptive.yaml"))),
        Run("life limit 300", "very_sparse", (f"{ll}=300", "env.kwargs.reward=very_sparse")),
    ]
    fig13 = [
        Run(
            f"{reward} reward",
            f"life limit {limit}",
            (f"{ll}={limit}", f"env.kwargs.reward={reward}"),
        )
        for reward in REWARDS
        for limit in (50, 100, 150)
    ]
    full_meter = [
        Run(f"life limit {limit}", f"sparse_when_full={paid}", (f"{ll}={limit}", "env.kwargs.reward=sparse",
            f"env.kwargs.overrides.rewards.sparse_when_full={paid}"))
        for limit in (100, 300)
        for paid in ("true", "false")
    ]  # fmt: skip
    four_season = [
        Run(f"{reward} reward", label, (f"{ll}=300", f"env.kwargs.reward={reward}", *world))
        for reward in ("dense", "sparse")
        for label, world in (
            ("FourSeason", ("env.id=FourSeason",)),
            ("FourSeasonGentle", _world("four_season_gentle.yaml")),
        )
    ]
    return {
        "fig8": Study("Figure 8, state sizes (dense reward)", tuple(fig8)),
        "fig10": Study("Figure 10, action expansions (life limit 300)", tuple(fig10)),
        "fig11": Study("Figure 11, three rewards at life limits 100, 150, 300", tuple(fig11)),
        "fig12": Study("Figure 12, deceptive reward vs very sparse (life limit 300)", tuple(fig12)),
        "fig13": Study("Figure 13, survival stress", tuple(fig13)),
        "full_meter": Study("Sparse reward at a full meter, paid or not", tuple(full_meter)),
        "four_season": Study("FourSeason until winter (life limit 300)", tuple(four_season)),
    }


STUDIES = _grid()


# ---------------------------------------------------------------------------- one run
def run_one(study: str, run: Run, seed: int, args: argparse.Namespace, out: Path) -> dict:
    from entityrl.env import RandomPolicy
    from entityrl.training import evaluate, load_agent, make_eval_env
    from entityrl.training.config import load_config
    from entityrl.training.run_log import read_metrics
    from entityrl.training.runner import Trainer

    run_dir = out / study / f"{run.name}_seed{seed}"
    overrides = [*run.overrides, *_settings(args, seed, run_dir)]
    config = load_config(BASE, overrides)
    started = time.time()
    Trainer(config).run()
    seconds = time.time() - started
    agent = load_agent(run_dir, seed=0)
    with make_eval_env(agent, num_envs=32, seed=777) as env:
        trained = evaluate(agent, env, args.episodes)
        baseline = evaluate(RandomPolicy(env.action_space, seed=0), env, args.episodes)
    tasks = sorted(k for k in trained.metrics if k.startswith("task/"))
    return {
        "panel": run.panel,
        "label": run.label,
        "seed": seed,
        "steps": args.steps,
        "lifetime": trained.mean("episode_length"),
        "return": trained.mean("episode_return"),
        "died": trained.mean("died"),
        "tasks": {t.removeprefix("task/"): trained.mean(t) for t in tasks},
        "random_lifetime": baseline.mean("episode_length"),
        "random_return": baseline.mean("episode_return"),
        "seconds": seconds,
        "curve": [
            (r["step"], r["episode/episode_length"], r.get("episode/episode_return"))
            for r in read_metrics(run_dir)
            if "episode/episode_length" in r
        ],
    }


def _settings(args: argparse.Namespace, seed: int, run_dir: Path | str) -> list[str]:
    return [
        f"seed={seed}",
        f"total_timesteps={args.steps}",
        f"log.run_dir={run_dir}",
        "log.tensorboard=false",
        "log.progress=false",
        f"torch_threads={args.threads}",
    ]


# ---------------------------------------------------------------------------- reporting
def plot(study: Study, results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    panels = list(dict.fromkeys(r.panel for r in study.runs))
    fig, axes = plt.subplots(
        2, len(panels), figsize=(5 * len(panels), 7), squeeze=False, constrained_layout=True
    )
    for column, panel in enumerate(panels):
        for label in dict.fromkeys(r.label for r in study.runs if r.panel == panel):
            curves = [r["curve"] for r in results if (r["panel"], r["label"]) == (panel, label)]
            curves = [c for c in curves if c]
            if not curves:
                continue
            grid = np.linspace(0, min(c[-1][0] for c in curves), 50)
            for row, field in ((0, 1), (1, 2)):
                # Points where the log has no value for this field are left out, not zeroed.
                known = [[p for p in c if p[field] is not None] for c in curves]
                ys = np.array(
                    [np.interp(grid, [p[0] for p in k], [p[field] for p in k]) for k in known if k]
                )
                if not ys.size:
                    continue
                ax = axes[row, column]
                ax.plot(grid, ys.mean(axis=0), label=label)
                ax.fill_between(grid, ys.min(axis=0), ys.max(axis=0), alpha=0.2)
        axes[0, column].set(title=panel, ylabel="lifetime")
        axes[1, column].set(xlabel="environment steps", ylabel="episode return")
        axes[0, column].legend(fontsize=7)
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    os.replace(tmp, path)


def table(study: Study, results: list[dict]) -> str:
    import numpy as np

    rows = [
        "| setting | run | seeds | PPO lifetime | random lifetime | PPO return | died |",
        "|---|---|---|---|---|---|---|",
    ]
    for run in study.runs:
        mine = [r for r in results if (r["panel"], r["label"]) == (run.panel, run.label)]
        if not mine:
            continue
        life = np.array([r["lifetime"] for r in mine])
        rows.append(
            f"| {run.panel} | {run.label} | {len(mine)} | {life.mean():.1f} ± {life.std():.1f} | "
            f"{np.mean([r['random_lifetime'] for r in mine]):.1f} | "
            f"{np.mean([r['return'] for r in mine]):.2f} | "
            f"{np.mean([r['died'] for r in mine]):.2f} |"
        )
    return "\n".join(rows)


def write_section(name: str, study: Study, results: list[dict], args: argparse.Namespace) -> None:
    figure = DOCS / "images" / f"eden_{name}.png"
    figure.parent.mkdir(parents=True, exist_ok=True)
    plot(study, results, figure)
    seeds = " ".join(str(s) for s in args.seeds)
    heading = f"### Results: {study.title}"
    body = (
        f"{heading}\n\nCommand: `python experiments/eden/run.py {name} --seeds {seeds} "
        f"--steps {args.steps} --episodes {args.episodes}` (lifetime: mean ± std over the "
        f"seeds of each seed's mean over {args.episodes} episodes).\n\n{table(study, results)}\n\n"
        f"![{study.title}](images/{figure.name})\n"
    )
    doc = DOCS / "survival.md"
    text = doc.read_text()
    pattern = re.compile(rf"^{re.escape(heading)}\n.*?(?=^##|\Z)", re.S | re.M)
    text = pattern.sub(lambda _: body + "\n", text) if pattern.search(text) else text + "\n" + body
    tmp = doc.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, doc)


def _save(path: Path, results: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(results, indent=1))
    os.replace(tmp, path)


# ---------------------------------------------------------------------------- main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("study", nargs="?", choices=sorted(STUDIES))
    parser.add_argument("--list", action="store_true", help="list the studies and their runs")
    parser.add_argument("--commands", action="store_true", help="print the runs' train commands")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--steps", type=int, default=2_000_000, help="per run (default 2M)")
    parser.add_argument("--episodes", type=int, default=100, help="evaluation episodes")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per run")
    parser.add_argument("--jobs", type=int, default=1, help="runs trained at the same time")
    parser.add_argument("--out", type=Path, help="keep the run directories here")
    parser.add_argument(
        "--runs", metavar="TEXT", help="only the runs whose name contains TEXT (see --commands)"
    )
    parser.add_argument(
        "--no-report",
        action="store_true",
        help="only print each run's summary (for smoke runs): no results/, docs/ or figure",
    )
    args = parser.parse_args()
    os.chdir(ROOT)
    if args.list or args.study is None:
        for name, study in STUDIES.items():
            print(f"{name}: {study.title}: {len(study.runs)} runs per seed")
        return
    study = STUDIES[args.study]
    if args.runs:
        study = Study(study.title, tuple(r for r in study.runs if args.runs in r.name))
    if args.commands:
        for run in study.runs:
            for seed in args.seeds:
                run_dir = f"runs/eden/{args.study}/{run.name}_seed{seed}"
                settings = _settings(args, seed, run_dir)[:3]
                print(
                    " ".join(
                        ["entityrl train", str(BASE.relative_to(ROOT)), *run.overrides, *settings]
                    )
                )
        return
    results: list[dict] = []
    out_json = HERE / "results" / f"{args.study}.json"
    with tempfile.TemporaryDirectory() as tmp, ProcessPoolExecutor(args.jobs) as pool:
        out = args.out or Path(tmp)
        futures = [
            pool.submit(run_one, args.study, run, seed, args, out)
            for run in study.runs
            for seed in args.seeds
        ]
        for future in futures:
            results.append(future.result())
            summary = {k: v for k, v in results[-1].items() if k != "curve"}
            print(json.dumps(summary), flush=True)
            if not args.no_report:
                _save(out_json, results)
    if args.no_report:
        return
    write_section(args.study, study, results, args)
    print(
        f"wrote {out_json.relative_to(ROOT)}, docs/images/eden_{args.study}.png, docs/survival.md"
    )


if __name__ == "__main__":
    main()
