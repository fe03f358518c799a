"""The Eden paper's PPO studies on the survival world, one command each.

Every study is a grid of training runs: ``base.yaml`` plus a few overrides per run, repeated for
each seed. A run trains PPO, then its agent (sampled actions) and a uniformly random policy each
play ``--episodes`` fresh episodes; its summary goes to ``result.json`` in its run directory
(``--out``, by default ``runs/eden``: ``OUT/STUDY/RUN_seedS``). A study accumulates over
sittings: running it again reuses every finished run of the same steps and episodes and
continues an interrupted one from its checkpoint. Studies share runs: a run is its resolved
training config, and one that any study under the same ``--out`` has finished or begun is taken
where it is kept, not trained again (``--list`` counts them). The results of all finished runs (per run and
seed: lifetime, return, deaths, tasks done, the learning curve) go to ``results/<study>.json``;
the figure (mean learning curves over the seeds, one panel per setting) to
``docs/images/eden_<study>.png``; the table to the section "Results: <title>" of
``docs/survival.md``, which says how many of the study's runs it holds.

usage: python experiments/eden/run.py STUDY [--seeds 1 2 3] [--steps 2000000] [--episodes 100]
       [--jobs 1] [--threads 1] [--out DIR] [--runs TEXT] [--no-report | --report-only]
       python experiments/eden/run.py STUDY --commands   (the equivalent ``entityrl train`` lines)
       python experiments/eden/run.py --list
"""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import os
import re
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from entityrl.training.config import TrainConfig

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
DOCS = ROOT / "docs"
BASE = HERE / "base.yaml"
WORLDS = HERE / "worlds"
REWARDS = ("dense", "sparse", "very_sparse")
EXPANSIONS = ("3pig", "5pig", "expand_consume", "expand_pickup", "expand_collect", "expand_all")
RND_COEF = 1.0
"""fig15's exploration bonus (``rnd.coef``): the weight of entityrl's shipped RND config."""
STUDY_SEEDS = (1, 2, 3)
"""The seeds of a whole study: a study with fewer is reported as partial."""
DEFAULT_OUT = ROOT / "runs" / "eden"
RESULT_FILE = "result.json"
LOCK_FILE = "training.pid"
"""In a run's directory while a process trains or evaluates it: the process's id."""


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
    # Figure 15 pits PPO against PPO with an exploration bonus (RND, ICM) at life limit 100
    # (section 4.1's setting). RND as entityrl ships it for Corridor (rnd.coef=1, the other
    # rnd.* at their defaults); ICM is not in entityrl. The plain-PPO runs are fig11's.
    fig15 = [
        Run(f"{reward} reward", label, (f"{ll}=100", f"env.kwargs.reward={reward}", *bonus))
        for reward in ("sparse", "very_sparse")
        for label, bonus in (("PPO", ()), ("PPO+RND", (f"rnd.coef={RND_COEF}",)))
    ]
    return {
        "fig8": Study("Figure 8, state sizes (dense reward)", tuple(fig8)),
        "fig10": Study("Figure 10, action expansions (life limit 300)", tuple(fig10)),
        "fig11": Study("Figure 11, three rewards at life limits 100, 150, 300", tuple(fig11)),
        "fig12": Study("Figure 12, deceptive reward vs very sparse (life limit 300)", tuple(fig12)),
        "fig13": Study("Figure 13, survival stress", tuple(fig13)),
        "full_meter": Study("Sparse reward at a full meter, paid or not", tuple(full_meter)),
        "four_season": Study("FourSeason until winter (life limit 300)", tuple(four_season)),
        "fig15": Study(
            "Figure 15, PPO and PPO+RND under the sparse rewards (life limit 100; no ICM)",
            tuple(fig15),
        ),
    }


STUDIES = _grid()


# ---------------------------------------------------------------------------- identity
UNLEARNED = ("log", "device", "torch_threads")
"""Config keys that say where a run is kept and what it runs on, not what it learns."""
WORLD_ARGUMENTS = ("config", "overrides", "life_limit", "horizon")
"""A survival world's arguments that together name its world."""


def identity(config: TrainConfig) -> str:
    """The experiment a config trains, as canonical json: the resolved config without its
    ``UNLEARNED`` keys, the environment's arguments completed with the constructor's defaults
    and, for a survival world, the world they resolve to (file, overrides and life limit) in
    place of its ``WORLD_ARGUMENTS``. Runs of one identity are one experiment, whichever
    study names them and however their overrides are written (an explicit default too)."""
    from entityrl.training.config import to_dict

    values = {k: v for k, v in to_dict(config).items() if k not in UNLEARNED}
    values["env"]["kwargs"] = _env_arguments(config.env.id, dict(config.env.kwargs))
    return json.dumps(values, sort_keys=True, default=str)


def _env_arguments(env_id: str, kwargs: dict) -> dict:
    from entityrl.envs import lookup
    from entityrl.envs.survival import SurvivalWorld

    cls = lookup(env_id)
    bound = inspect.signature(cls).bind(**kwargs)
    bound.apply_defaults()
    arguments = {k: v for k, v in bound.arguments.items() if k not in ("num_envs", "seed")}
    if isinstance(cls, type) and issubclass(cls, SurvivalWorld):
        world = cls(1, seed=0, **kwargs).rules.config
        arguments = {k: v for k, v in arguments.items() if k not in WORLD_ARGUMENTS}
        arguments["world"] = asdict(world)
    return arguments


def recorded_identity(run_dir: Path) -> str | None:
    """The identity of the run kept in ``run_dir`` (its ``config.yaml``, as the trainer wrote
    it), None if there is none or it no longer loads."""
    file = run_dir / "config.yaml"
    return _identity_of_file(file, file.stat().st_mtime_ns) if file.is_file() else None


@functools.cache
def _identity_of_file(file: Path, mtime_ns: int) -> str | None:
    # Cached per version of the file: every run of a sitting looks through all run directories.
    from entityrl.envs.survival import SurvivalConfigError
    from entityrl.training.config import ConfigError, load_config

    try:
        return identity(load_config(file))
    except (ConfigError, SurvivalConfigError, TypeError, ValueError):
        return None


# ---------------------------------------------------------------------------- one run
def run_dir_of(out: Path, study: str, run: Run, seed: int) -> Path:
    return out / study / f"{run.name}_seed{seed}"


class RunBusyError(RuntimeError):
    """Another process is training the run."""


def _twins(out: Path, wanted: str, besides: Path) -> list[Path]:
    """The run directories under ``out`` but ``besides`` that hold a run of identity
    ``wanted``."""
    return [d for d in sorted(out.glob("*/*")) if d != besides and recorded_identity(d) == wanted]


def home_of(wanted: str, own: Path, out: Path, steps: int, episodes: int) -> Path:
    """Where the run of identity ``wanted`` whose own directory is ``own`` is kept: ``own``,
    unless an identical run of any study under ``out`` got further (finished, or trained more
    steps) and no other process is training it now."""
    holder = _holder(own)
    if holder is not None:
        raise RunBusyError(f"{own}: process {holder} is training this run; wait for its end")
    twins = [d for d in _twins(out, wanted, besides=own) if _holder(d) is None]

    def progress(run_dir: Path) -> tuple[bool, int]:
        if recorded_identity(run_dir) != wanted:
            return False, 0  # own, if it holds nothing of this run: trained from scratch
        return finished_summary(run_dir, steps, episodes) is not None, _checkpoint_step(run_dir)

    return max([own, *twins], key=progress)  # own on a tie


def run_one(study: str, run: Run, seed: int, args: argparse.Namespace, out: Path) -> dict | None:
    """Train and evaluate one run, or take what an earlier sitting, of this study or of another
    with an identical run, left: its ``result.json`` if it was of ``args.steps`` steps and
    ``args.episodes`` episodes, else its checkpoint (training continues from there, or is
    evaluated again if it was complete). The run's summary is written to ``result.json``; None
    if the training was interrupted (Ctrl-C): its checkpoint is kept for the next sitting."""
    from entityrl.training.checkpoint import CheckpointError
    from entityrl.training.config import load_config
    from entityrl.training.runner import Trainer

    own = run_dir_of(out, study, run, seed)
    wanted = identity(load_config_of(run, seed, args, own))
    run_dir = home_of(wanted, own, out, args.steps, args.episodes)
    tag = f"{study}/{own.name}"
    if run_dir != own:
        tag += f" (shares {run_dir.relative_to(out)})"
    summary = finished_summary(run_dir, args.steps, args.episodes)
    if summary is not None:
        _say(f"{tag}: reused its {RESULT_FILE} ({args.steps:,} steps, {args.episodes} episodes)")
        return {**summary, "panel": run.panel, "label": run.label}
    started = time.time()
    trained = _trained_steps(run_dir, wanted, tag)
    seconds = 0.0
    with _claimed(run_dir):
        if trained < args.steps:
            # A run continues under its own recorded config, as `entityrl train --resume` does.
            config = (
                load_config(run_dir / "config.yaml", [f"log.run_dir={run_dir}"])
                if trained
                else load_config_of(run, seed, args, run_dir)
            )
            where = f"from its checkpoint of step {trained:,}" if trained else "from scratch"
            _say(f"{tag}: training {where} to {args.steps:,} steps")
            try:
                result = Trainer(config, resume=run_dir if trained else None).run()
            except CheckpointError as err:
                raise CheckpointError(
                    f"{run_dir}: {err}; remove that directory to train the run again"
                ) from None
            seconds = result.seconds
            if result.interrupted:
                _say(
                    f"{tag}: interrupted at step {result.steps:,} after {_clock(seconds)}; its "
                    "checkpoint is kept and the next sitting continues from it"
                )
                return None
        else:
            _say(f"{tag}: training was complete ({trained:,} steps); evaluating")
        summary = {
            "panel": run.panel,
            "label": run.label,
            "seed": seed,
            "steps": args.steps,
            "episodes": args.episodes,
            **_evaluate(run_dir, args.episodes),
            "resumed_from": trained,
            "seconds": seconds,
        }
        write_json(run_dir / RESULT_FILE, summary)
    _say(
        f"{tag}: finished in {_clock(time.time() - started)}: lifetime {summary['lifetime']:.1f} "
        f"(random {summary['random_lifetime']:.1f}), return {summary['return']:.2f}"
    )
    return summary


def finished_summary(run_dir: Path, steps: int, episodes: int) -> dict | None:
    """The run's ``result.json``, if it exists and is of these steps and episodes."""
    path = run_dir / RESULT_FILE
    if not path.is_file():
        return None
    summary = json.loads(path.read_text())
    return summary if (summary["steps"], summary["episodes"]) == (steps, episodes) else None


def finished_run(
    study: str, run: Run, seed: int, out: Path, args: argparse.Namespace
) -> dict | None:
    """The summary of the run, as a run of ``study``, if it or an identical run is finished."""
    own = run_dir_of(out, study, run, seed)
    wanted = identity(load_config_of(run, seed, args, own))
    mine = [own] if recorded_identity(own) == wanted else []
    twins = [*mine, *_twins(out, wanted, besides=own)]
    summary = next(
        filter(None, (finished_summary(d, args.steps, args.episodes) for d in twins)), None
    )
    return summary and {**summary, "panel": run.panel, "label": run.label}


def _checkpoint_step(run_dir: Path) -> int:
    from entityrl.training.checkpoint import CHECKPOINT_FILE, load_checkpoint

    return int(load_checkpoint(run_dir)["step"]) if (run_dir / CHECKPOINT_FILE).is_file() else 0


def _trained_steps(run_dir: Path, wanted: str, tag: str) -> int:
    """Steps the run's checkpoint has trained (0: none). A directory without a checkpoint, or
    holding a run of another identity (another ``--steps``: another learning-rate schedule;
    an edited ``base.yaml``), is cleared and the run starts over."""
    from entityrl.training.checkpoint import config_differences

    if not run_dir.exists():
        return 0
    recorded = recorded_identity(run_dir)
    step = _checkpoint_step(run_dir) if recorded == wanted else 0
    if step:
        return step
    if recorded is not None and recorded != wanted:
        differing = ", ".join(config_differences(json.loads(recorded), json.loads(wanted)))
        _say(f"{tag}: its directory holds a run of another config ({differing}): starting over")
    # What is left of a run that stopped before its first checkpoint (or of another config).
    shutil.rmtree(run_dir)
    return 0


def _holder(run_dir: Path) -> int | None:
    """The id of the live process training the run now, if any."""
    try:
        pid = int((run_dir / LOCK_FILE).read_text())
        os.kill(pid, 0)
    except PermissionError:  # a live process of another user
        return pid
    except (OSError, ValueError):  # no lock, a torn one, or its process has ended
        return None
    return pid


@contextmanager
def _claimed(run_dir: Path) -> Iterator[None]:
    """The run's directory, marked as being trained by this process meanwhile: a sitting of
    another study sharing the run does not continue it at the same time."""
    run_dir.mkdir(parents=True, exist_ok=True)
    lock = run_dir / LOCK_FILE
    lock.write_text(str(os.getpid()))
    try:
        yield
    finally:
        lock.unlink(missing_ok=True)


def _evaluate(run_dir: Path, episodes: int) -> dict:
    """The trained agent (sampled actions) and a uniformly random policy, each over
    ``episodes`` fresh episodes, and the run's learning curve."""
    from entityrl.env import RandomPolicy
    from entityrl.training import evaluate, load_agent, make_eval_env
    from entityrl.training.run_log import read_metrics

    agent = load_agent(run_dir, seed=0)
    with make_eval_env(agent, num_envs=32, seed=777) as env:
        trained = evaluate(agent, env, episodes)
        baseline = evaluate(RandomPolicy(env.action_space, seed=0), env, episodes)
    tasks = sorted(k for k in trained.metrics if k.startswith("task/"))
    return {
        "lifetime": trained.mean("episode_length"),
        "return": trained.mean("episode_return"),
        "died": trained.mean("died"),
        "tasks": {t.removeprefix("task/"): trained.mean(t) for t in tasks},
        "random_lifetime": baseline.mean("episode_length"),
        "random_return": baseline.mean("episode_return"),
        "curve": [
            (r["step"], r["episode/episode_length"], r.get("episode/episode_return"))
            for r in read_metrics(run_dir)
            if "episode/episode_length" in r
        ],
    }


def load_config_of(run: Run, seed: int, args: argparse.Namespace, run_dir: Path) -> TrainConfig:
    from entityrl.training.config import load_config

    return load_config(BASE, [*run.overrides, *_settings(args, seed, run_dir)])


def _settings(args: argparse.Namespace, seed: int, run_dir: Path | str) -> list[str]:
    return [
        f"seed={seed}",
        f"total_timesteps={args.steps}",
        f"log.run_dir={run_dir}",
        "log.tensorboard=false",
        "log.progress=false",
        f"torch_threads={args.threads}",
    ]


def _say(line: str) -> None:
    """A line of progress, with the time of day (runs of a study may take hours)."""
    # One write: the lines of runs trained in parallel processes do not interleave.
    sys.stdout.write(f"{time.strftime('%H:%M:%S')} {line}\n")
    sys.stdout.flush()


def _clock(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


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
        if axes[0, column].get_legend_handles_labels()[0]:  # a panel of unfinished runs has none
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
            rows.append(f"| {run.panel} | {run.label} | 0 | none finished yet | | | |")
            continue
        life = np.array([r["lifetime"] for r in mine])
        rows.append(
            f"| {run.panel} | {run.label} | {len(mine)} | {life.mean():.1f} ± {life.std():.1f} | "
            f"{np.mean([r['random_lifetime'] for r in mine]):.1f} | "
            f"{np.mean([r['return'] for r in mine]):.2f} | "
            f"{np.mean([r['died'] for r in mine]):.2f} |"
        )
    return "\n".join(rows)


def finished_results(name: str, out: Path, args: argparse.Namespace) -> list[dict]:
    """The summaries of the study's finished runs of ``args.steps`` and ``args.episodes``,
    whichever sitting (whichever ``--runs`` or ``--seeds``, whichever study sharing the run)
    trained them, in the study's order."""
    kept = (re.search(r"_seed(\d+)$", d.name) for d in out.glob("*/*"))
    seeds = sorted({*STUDY_SEEDS, *args.seeds, *(int(m[1]) for m in kept if m)})
    found = (
        finished_run(name, run, seed, out, args) for run in STUDIES[name].runs for seed in seeds
    )
    return [summary for summary in found if summary]


def section(name: str, results: list[dict], seeds: list[int], steps: int, episodes: int) -> str:
    """The study's "Results" section of docs/survival.md; it says how much of the study
    (every run at each of ``seeds``) it holds."""
    study = STUDIES[name]
    expected = len(study.runs) * len(seeds)
    grid = f"{len(study.runs)} runs × seeds {', '.join(map(str, seeds))}"
    coverage = (
        f"All {expected} runs of the study ({grid}) are in."
        if len(results) == expected
        else f"**Partial: {len(results)} of the study's {expected} runs ({grid}) are finished; "
        "the table and the figure show only those.**"
    )
    command = (
        f"python experiments/eden/run.py {name} --seeds {' '.join(map(str, seeds))} "
        f"--steps {steps} --episodes {episodes}"
    )
    return (
        f"### Results: {study.title}\n\nCommand: `{command}` (lifetime: mean ± std over the "
        f"seeds of each seed's mean over {episodes} episodes). {coverage}\n\n"
        f"{table(study, results)}\n\n![{study.title}](images/eden_{name}.png)\n"
    )


def report(name: str, out: Path, args: argparse.Namespace) -> None:
    """The study's results json, figure and docs section, from all its finished runs."""
    results = finished_results(name, out, args)
    if not results:
        print(f"no run of {name} is finished yet: no results, figure or docs written")
        return
    write_json(HERE / "results" / f"{name}.json", results)
    figure = DOCS / "images" / f"eden_{name}.png"
    figure.parent.mkdir(parents=True, exist_ok=True)
    plot(STUDIES[name], results, figure)
    seeds = sorted({*STUDY_SEEDS, *args.seeds, *(r["seed"] for r in results)})
    body = section(name, results, seeds, args.steps, args.episodes)
    doc = DOCS / "survival.md"
    text = doc.read_text()
    heading = body.split("\n", 1)[0]
    pattern = re.compile(rf"^{re.escape(heading)}\n.*?(?=^##|\Z)", re.S | re.M)
    text = pattern.sub(lambda _: body + "\n", text) if pattern.search(text) else text + "\n" + body
    tmp = doc.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, doc)
    print(
        f"wrote experiments/eden/results/{name}.json ({len(results)} runs), "
        f"docs/images/{figure.name}, docs/survival.md"
    )


def write_json(path: Path, data: object) -> None:
    """Written to a temporary file and renamed: a crash never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


# ---------------------------------------------------------------------------- main
def listing(args: argparse.Namespace) -> str:
    """Each study, its runs, how many of them other studies share, and the runs all of them
    train: a run shared by several studies is trained once."""
    seed = STUDY_SEEDS[0]  # a run shares at every seed or at none
    studies_of: dict[str, list[str]] = {}  # identity -> the studies with a run of it
    keys = {
        (name, run): identity(
            load_config_of(run, seed, args, run_dir_of(args.out, name, run, seed))
        )
        for name, study in STUDIES.items()
        for run in study.runs
    }
    for (name, _), key in keys.items():
        studies_of.setdefault(key, []).append(name)
    lines = []
    for name, study in STUDIES.items():
        sharers = [[s for s in studies_of[keys[name, run]] if s != name] for run in study.runs]
        shared = sum(bool(others) for others in sharers)
        with_whom = sorted({s for others in sharers for s in others}, key=list(STUDIES).index)
        lines.append(
            f"{name}: {study.title}: {len(study.runs)} runs per seed, "
            f"{len(study.runs) - shared} its own, {shared} shared"
            + (f" (with {', '.join(with_whom)})" if shared else "")
        )
    runs, unique, seeds = len(keys), len(studies_of), len(args.seeds)
    lines.append(
        f"all studies: {runs} runs per seed, {unique} of them different: at seeds "
        f"{' '.join(map(str, args.seeds))}, {unique * seeds} runs to train ({runs * seeds} named)"
    )
    return "\n".join(lines)


def train_all(name: str, study: Study, args: argparse.Namespace, out: Path) -> bool:
    """Every run of ``study`` at each seed; False if interrupted (Ctrl-C) before the end."""
    tasks = [(run, seed) for run in study.runs for seed in args.seeds]
    if args.jobs == 1:
        # all() stops at the first interrupted run: Ctrl-C ends the sitting.
        return all(run_one(name, run, seed, args, out) is not None for run, seed in tasks)
    # Workers ignore Ctrl-C except while training (the trainer's own handler ends the run
    # after its iteration and saves a checkpoint); the main process cancels what has not begun.
    with ProcessPoolExecutor(args.jobs, initializer=signal.signal,
                             initargs=(signal.SIGINT, signal.SIG_IGN)) as pool:  # fmt: skip
        futures = [pool.submit(run_one, name, run, seed, args, out) for run, seed in tasks]
        try:
            summaries = [future.result() for future in as_completed(futures)]
        except KeyboardInterrupt:
            pool.shutdown(cancel_futures=True)
            return False
    return all(summary is not None for summary in summaries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("study", nargs="?", choices=sorted(STUDIES))
    parser.add_argument("--list", action="store_true", help="list the studies and their runs")
    parser.add_argument("--commands", action="store_true", help="print the runs' train commands")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(STUDY_SEEDS))
    parser.add_argument("--steps", type=int, default=2_000_000, help="per run (default 2M)")
    parser.add_argument("--episodes", type=int, default=100, help="evaluation episodes")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per run")
    parser.add_argument("--jobs", type=int, default=1, help="runs trained at the same time")
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help=f"run directories go to OUT/STUDY/RUN_seedS (default {DEFAULT_OUT.relative_to(ROOT)})",
    )
    parser.add_argument(
        "--runs", metavar="TEXT", help="only the runs whose name contains TEXT (see --commands)"
    )
    parser.add_argument(
        "--no-report",
        action="store_true",
        help="only train and evaluate the runs (for smoke runs): no results/, docs/ or figure",
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="train nothing: write the results, figure and docs section from the finished runs",
    )
    args = parser.parse_args()
    for option in ("steps", "episodes", "threads", "jobs"):
        if getattr(args, option) < 1:
            parser.error(f"--{option} must be at least 1, got {getattr(args, option)}")
    args.out = args.out.resolve()  # before moving to the repository's root
    os.chdir(ROOT)
    if args.list or args.study is None:
        print(listing(args))
        return
    study = STUDIES[args.study]
    if args.runs:
        study = Study(study.title, tuple(r for r in study.runs if args.runs in r.name))
        if not study.runs:
            parser.error(f"--runs {args.runs}: no run of {args.study} has that in its name")
    if args.report_only and args.no_report:
        parser.error("--report-only and --no-report exclude each other")
    if args.report_only:
        report(args.study, args.out, args)
        return
    if args.commands:
        for run in study.runs:
            for seed in args.seeds:
                run_dir = run_dir_of(args.out, args.study, run, seed)
                shown = run_dir.relative_to(ROOT) if run_dir.is_relative_to(ROOT) else run_dir
                settings = _settings(args, seed, shown)[:3]
                print(
                    " ".join(
                        ["entityrl train", str(BASE.relative_to(ROOT)), *run.overrides, *settings]
                    )
                )
        return
    from entityrl.training.checkpoint import CheckpointError
    from entityrl.training.config import ConfigError

    total = len(study.runs) * len(args.seeds)
    seeds = " ".join(map(str, args.seeds))
    _say(f"{args.study}: {len(study.runs)} runs x seeds {seeds}, kept in {args.out / args.study}")
    started = time.time()
    try:
        complete = train_all(args.study, study, args, args.out)
    except KeyboardInterrupt:
        complete = False
    except (ConfigError, CheckpointError, RunBusyError) as err:
        sys.exit(f"experiments/eden/run.py: error: {err}")
    done = sum(
        finished_run(args.study, run, seed, args.out, args) is not None
        for run in study.runs
        for seed in args.seeds
    )
    _say(f"{args.study}: {done} of {total} runs finished, after {_clock(time.time() - started)}")
    if not complete:
        print("interrupted: run the same command again to continue where it stopped")
    if not args.no_report:
        report(args.study, args.out, args)
    if not complete:
        sys.exit(130)


if __name__ == "__main__":
    main()
