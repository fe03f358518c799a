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

The study ``bench`` is the survival world as an evaluation standard: algorithm families (PPO,
recurrent PPO, DQN, SAC, PPO+RND, PPO+ICM, behaviour cloning of a scripted survivor, meta-RL
by RL^2) x worlds x rewards x observations at a ``--budget`` (smoke, small, paper: steps per
run, seeds, episodes), through the same runs, sharing and sittings as the studies. Meta-RL
trains on trials of several episodes of one task (entityrl.envs.meta.Trials): of each cell's
world, its map the task, and of river navigation (the paper's Figure 16 task family); it is
evaluated on held-out tasks, per episode of a trial.
Its report adds random play and the scripted survivor to every cell, the lifetime's IQM with
a 95% stratified bootstrap interval over the seeds (``entityrl.stats``), performance profiles
(``docs/images/eden_bench_<budget>.png``), ``results/bench_<budget>.json`` and the section
"Results: Survival bench, <budget> budget".

usage: python experiments/eden/run.py STUDY [--seeds 1 2 3] [--steps 2000000] [--episodes 100]
       [--jobs 1] [--threads 1] [--out DIR] [--runs TEXT] [--no-report | --report-only]
       python experiments/eden/run.py STUDY --commands   (the equivalent ``entityrl train`` lines)
       python experiments/eden/run.py bench [--budget smoke|small|paper] [--families ...]
       [--worlds ...] [--rewards dense] [--observations entities] [--seeds ...] [--out DIR]
       [--no-report | --report-only]
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
    from entityrl.training import Agent
    from entityrl.training.config import TrainConfig

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
DOCS = ROOT / "docs"
BASE = HERE / "base.yaml"
WORLDS = HERE / "worlds"
REWARDS = ("dense", "sparse", "very_sparse")
EXPANSIONS = ("3pig", "5pig", "expand_consume", "expand_pickup", "expand_collect", "expand_all")
META_CONFIG = HERE / "meta_rl.yaml"
"""The bench's meta-RL family (RL^2): PPO with memory on trials of river navigation."""
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
    config: Path = BASE
    """The config file the overrides apply to (the bench's DQN and SAC start from theirs)."""

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

    agent = load_agent(run_dir, seed=0)
    # A run is judged by the policy its algorithm trains: DQN's is greedy (its config says
    # eval.deterministic), PPO's sampled.
    agent.deterministic = agent.config.eval.deterministic
    if agent.config.env.id == "Trials":
        return _evaluate_trials(agent, run_dir, episodes)
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
        "curve": _curve(run_dir),
    }


def _curve(run_dir: Path) -> list[tuple[int, float, float | None]]:
    """The run's learning curve: (step, episode length, episode return) per log line."""
    from entityrl.training.run_log import read_metrics

    return [
        (r["step"], r["episode/episode_length"], r.get("episode/episode_return"))
        for r in read_metrics(run_dir)
        if "episode/episode_length" in r
    ]


def _evaluate_trials(agent: Agent, run_dir: Path, episodes: int) -> dict:
    """A meta-RL run (its environment: trials of one task each): the agent on ``episodes``
    trials of held-out tasks and of its meta-training tasks, and a uniformly random policy on
    the held-out ones; per episode of a trial, the mean return and length of each. Its
    lifetime and return are the agent's on the held-out tasks, per episode (over all of a
    trial's); its learning curve is per trial."""
    import numpy as np

    kwargs = dict(agent.config.env.kwargs)
    per_episode = {
        name: trial_returns(agent if name != "random" else None, kwargs, split, episodes)
        for name, split in (("test", "test"), ("train", "train"), ("random", "test"))
    }
    held_out, random = per_episode["test"], per_episode["random"]
    return {
        "lifetime": float(np.mean(held_out["length"])),
        "return": float(np.mean(held_out["return"])),
        "random_lifetime": float(np.mean(random["length"])),
        "random_return": float(np.mean(random["return"])),
        "per_episode": per_episode,
        "curve": _curve(run_dir),
    }


def trial_returns(
    policy: Agent | None, kwargs: dict, split: str, trials: int
) -> dict[str, list[float]]:
    """Per episode of a trial: the mean return and length of ``policy`` (None: uniformly random
    play) over ``trials`` trials (``Trials`` with ``kwargs``) of tasks drawn from ``split``,
    always the same ones (seeded by EVAL_SEED)."""
    from entityrl.env import RandomPolicy
    from entityrl.envs.meta import Trials
    from entityrl.training import evaluate

    with Trials(32, seed=EVAL_SEED, **{**kwargs, "split": split}) as env:
        player = policy if policy is not None else RandomPolicy(env.action_space, seed=0)
        played = evaluate(player, env, trials)
        inner = range(1, env.per_trial + 1)
    return {
        field: [played.mean(f"episode{i}/{field}") for i in inner] for field in ("return", "length")
    }


def load_config_of(run: Run, seed: int, args: argparse.Namespace, run_dir: Path) -> TrainConfig:
    from entityrl.training.config import load_config

    return load_config(run.config, [*run.overrides, *_settings(args, seed, run_dir)])


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
    replace_section(DOCS / "survival.md", section(name, results, seeds, args.steps, args.episodes))
    print(
        f"wrote experiments/eden/results/{name}.json ({len(results)} runs), "
        f"docs/images/{figure.name}, docs/survival.md"
    )


def replace_section(doc: Path, body: str) -> None:
    """``body`` (its first line a heading) in place of ``doc``'s section of that heading, up to
    the next heading of level 2 or deeper, or at the end of ``doc`` if it has none."""
    text = doc.read_text()
    heading = body.split("\n", 1)[0]
    pattern = re.compile(rf"^{re.escape(heading)}\n.*?(?=^##|\Z)", re.S | re.M)
    text = pattern.sub(lambda _: body + "\n", text) if pattern.search(text) else text + "\n" + body
    tmp = doc.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, doc)


def write_json(path: Path, data: object) -> None:
    """Written to a temporary file and renamed: a crash never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


# ---------------------------------------------------------------------------- the bench
@dataclass(frozen=True)
class Budget:
    """How much a bench sitting trains: steps per run, seeds per cell, evaluation episodes,
    and the scripted survivor's episodes behaviour cloning learns from."""

    steps: int
    seeds: tuple[int, ...]
    episodes: int
    demos: int


BUDGETS = {
    "smoke": Budget(2048, (1,), 4, 4),  # one PPO iteration: the pipeline, not a result
    "small": Budget(100_000, (1, 2, 3, 4, 5), 100, 200),
    "paper": Budget(2_000_000, (1, 2, 3, 4, 5), 100, 1000),  # base.yaml's steps, every family
}
CONFIGS = ROOT / "entityrl" / "configs"
FAMILIES: dict[str, tuple[Path, tuple[str, ...]] | None] = {
    "ppo": (BASE, ()),
    "recurrent_ppo": (BASE, ("net.memory=true",)),
    # The shipped DayAndNight settings of the off-policy algorithms (benchmarks/RESULTS.md,
    # "The survival world against random play"); base.yaml's are PPO's.
    "dqn": (CONFIGS / "dqn" / "day_and_night.yaml", ()),
    "sac": (CONFIGS / "sac" / "day_and_night.yaml", ()),
    "ppo_rnd": (BASE, (f"rnd.coef={RND_COEF}",)),
    "ppo_icm": (BASE, ("icm.coef=1.0",)),  # icm.* as corridor.yaml ships it
    "bc": (BASE, ("algo=bc", "bc.eval_episodes=0")),  # bc.demos: the bench's recording
    # RL^2: PPO with memory on trials (a cell's world moves inside them, see trial_overrides).
    "meta_rl": (META_CONFIG, ()),
}
"""Each algorithm family: its config file and overrides, None for a family not built."""
META = "meta_rl"
"""The family trained on trials of one task (its runs are evaluated per episode of a trial)."""
NAVIGATION = "RiverNavigation"
"""The meta-RL family's panel of its own: river navigation (meta_rl.yaml's task family)."""
TRIAL_EPISODES = {"navigation": 4, "survival": 3}
"""Episodes per trial: of river navigation (at most 20 steps each) and of a survival world."""
BENCH_WORLDS = {
    "DayAndNight": ("env.id=DayAndNight",),
    "FourSeasonGentle": _world("four_season_gentle.yaml"),
}
"""The worlds of the bench, all at ``--life-limit`` (100: the paper's setting of Figs. 14-16)."""
OBSERVATIONS = ("entities", "nearest1", "nearest10_prey", "nearest10")
"""The observations the bench takes: the scripted survivor reads every one but ``raw``."""
EVAL_SEED = 777
"""The evaluation episodes' seed, as ``_evaluate``'s: the references play at EVAL_SEED + seed."""


@dataclass(frozen=True)
class Cell:
    """One world of the bench under one reward and observation: a row group of its table."""

    world: str
    reward: str
    observation: str

    @property
    def name(self) -> str:
        return f"{self.world}, {self.reward}, {self.observation}"


def bench_cells(args: argparse.Namespace) -> list[Cell]:
    return [Cell(w, r, o) for w in args.worlds for r in args.rewards for o in args.observations]


def cell_overrides(cell: Cell, args: argparse.Namespace) -> tuple[str, ...]:
    """The cell's world, as overrides of a family's config."""
    return (
        *BENCH_WORLDS[cell.world],
        f"env.kwargs.life_limit={args.life_limit}",
        f"env.kwargs.reward={cell.reward}",
        f"env.kwargs.observation={cell.observation}",
        "env.kwargs.actions=simple",
    )


def bench_study(args: argparse.Namespace, out: Path) -> Study:
    """The families that are built x the cells, as a study (panel: the cell; label: the
    family), and meta-RL's river navigation (panel NAVIGATION) when the families have it."""
    runs = []
    for cell in bench_cells(args):
        world = cell_overrides(cell, args)
        for family in args.families:
            built = FAMILIES[family]
            if built is None:
                continue
            config, overrides = built
            if family == "bc":
                overrides = (*overrides, f"bc.demos=[{demos_of(out, cell, args.demos)}]")
                if args.budget == "smoke":
                    overrides = (*overrides, "bc.epochs=1")
            where = trial_overrides(world) if family == META else world
            runs.append(Run(cell.name, family, (*where, *overrides), config))
    if META in args.families:
        episodes = f"env.kwargs.episodes={TRIAL_EPISODES['navigation']}"
        runs.append(Run(NAVIGATION, META, (episodes,), META_CONFIG))
    return Study(f"Survival bench, {args.budget} budget", tuple(runs))


def trial_overrides(world: tuple[str, ...]) -> tuple[str, ...]:
    """A cell's world (:func:`cell_overrides`) as the task family of meta-RL's trials: its
    environment and arguments moved into ``env.kwargs.env`` and ``env.kwargs.env_kwargs``."""
    moved = []
    for override in world:
        key, value = override.split("=", 1)
        if key == "env.id":
            moved.append(f"env.kwargs.env={value}")
        elif key.startswith("env.kwargs."):
            moved.append(f"env.kwargs.env_kwargs.{key.removeprefix('env.kwargs.')}={value}")
        else:
            raise ValueError(f"a cell's world sets env.id and env.kwargs.*, got {override!r}")
    return (*moved, f"env.kwargs.episodes={TRIAL_EPISODES['survival']}")


def bench_dir(args: argparse.Namespace) -> str:
    """The folder of ``--out`` that keeps the runs of the budget: a budget's runs never
    overwrite another's (runs of equal configs are still shared, as between studies)."""
    return f"bench_{args.budget}"


def demos_of(out: Path, cell: Cell, episodes: int) -> Path:
    name = re.sub(r"[^a-z0-9]+", "_", cell.name.lower()).strip("_")
    return out / "bench" / "demos" / f"{name}_{episodes}.arrow"


def record_demos(study: Study, args: argparse.Namespace, out: Path) -> None:
    """The scripted survivor's recording of each cell behaviour cloning learns from, made once
    (a finished file is kept; it is written whole or not at all)."""
    from entityrl.envs import make_vec
    from entityrl.envs.experts import SurvivalExpert
    from entityrl.recording import record

    for run in study.runs:
        if run.label != "bc":
            continue
        # The recording depends on the cell alone: any seed's config names it.
        config = load_config_of(run, args.seeds[0], args, out / bench_dir(args))
        path = Path(config.bc.demos[0])
        if path.is_file():
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp.arrow")
        kwargs = dict(config.env.kwargs)
        env = make_vec(config.env.id, 16, seed=EVAL_SEED - 1, **kwargs)
        expert = SurvivalExpert(env.obs_space, env.action_space)
        record(expert, env, tmp, args.demos, env_id=config.env.id, env_kwargs=kwargs)
        os.replace(tmp, path)
        _say(f"bench: recorded {args.demos} episodes of the scripted survivor in {path.name}")


def references(args: argparse.Namespace) -> list[dict]:
    """Random play (uniformly random legal actions) and the scripted survivor in every cell,
    ``args.episodes`` episodes per seed, each seed on its own evaluation worlds."""
    from entityrl.env import RandomPolicy
    from entityrl.envs import make_vec
    from entityrl.envs.experts import SurvivalExpert
    from entityrl.training import evaluate
    from entityrl.training.config import load_config

    rows = []
    for cell in bench_cells(args):
        config = load_config(BASE, list(cell_overrides(cell, args)))
        for seed in args.seeds:
            for label in ("random", "scripted"):
                started = time.time()
                with make_vec(config.env.id, 32, seed=EVAL_SEED + seed, **config.env.kwargs) as env:
                    policy = (
                        RandomPolicy(env.action_space, seed=seed)
                        if label == "random"
                        else SurvivalExpert(env.obs_space, env.action_space)
                    )
                    played = evaluate(policy, env, args.episodes)
                rows.append(
                    {
                        "panel": cell.name,
                        "label": label,
                        "seed": seed,
                        "lifetime": played.mean("episode_length"),
                        "return": played.mean("episode_return"),
                        "seconds": time.time() - started,
                    }
                )
    return rows


def bench_results(study: Study, args: argparse.Namespace, out: Path) -> list[dict]:
    """The finished runs of the bench's cells at its seeds, steps and episodes."""
    found = (
        finished_run(bench_dir(args), run, seed, out, args)
        for run in study.runs
        for seed in args.seeds
    )
    return [summary for summary in found if summary]


def bench_table(args: argparse.Namespace, results: list[dict]) -> str:
    """Per cell, a row per reference and family: lifetime per seed, its IQM with a 95%
    stratified bootstrap interval over the seeds, the IQM normalized (random play 0, the
    scripted survivor 1) and the seconds per run (a family's training, a reference's play)."""
    from entityrl import stats

    rows = [
        "| world, reward, observation | family | seeds | lifetime per seed | IQM [95% CI] | "
        "normalized IQM | s per run |",
        "|---|---|---|---|---|---|---|",
    ]
    for cell in bench_cells(args):
        lifetimes = _lifetimes(results, cell.name)
        for label in ("random", "scripted", *args.families):
            if FAMILIES.get(label, ()) is None:
                rows.append(f"| {cell.name} | {label} | | not built | | | |")
                continue
            if label not in lifetimes:
                rows.append(f"| {cell.name} | {label} | 0 | none finished yet | | | |")
                continue
            life = lifetimes[label]
            estimate = stats.interval([life])
            normalized = _normalize(lifetimes, [estimate.value])
            mine = [r for r in results if (r["panel"], r["label"]) == (cell.name, label)]
            seconds = sum(r["seconds"] for r in mine) / len(mine)
            rows.append(
                f"| {cell.name} | {label} | {len(life)} | {', '.join(f'{x:.1f}' for x in life)} "
                f"| {estimate.value:.1f} [{estimate.low:.1f}, {estimate.high:.1f}] | "
                f"{'-' if normalized is None else f'{normalized[0]:.2f}'} | "
                f"{seconds:.0f} |"
            )
    return "\n".join(rows)


def _lifetimes(results: list[dict], panel: str) -> dict[str, list[float]]:
    """Per label (reference or family), the lifetimes of the cell's seeds."""
    by_label: dict[str, list[float]] = {}
    for r in results:
        if r["panel"] == panel:
            by_label.setdefault(r["label"], []).append(r["lifetime"])
    return by_label


def _normalize(lifetimes: dict[str, list[float]], values: list[float]) -> list[float] | None:
    """``values`` on the cell's scale: random play's IQM 0, the scripted survivor's 1 (None
    where the two are equal: no scale)."""
    from entityrl import stats

    floor, top = (stats.iqm([lifetimes[r]]) for r in ("random", "scripted"))
    return None if top == floor else [(x - floor) / (top - floor) for x in values]


def normalized_scores(
    args: argparse.Namespace, results: list[dict]
) -> dict[str, list[list[float]]]:
    """Per label, one list per cell (a task, for entityrl.stats) of its seeds' normalized
    lifetimes; a label with a cell unfinished is left out (every label needs the same tasks)."""
    scores: dict[str, list[list[float]]] = {}
    for label in ("random", "scripted", *args.families):
        tasks = []
        for cell in bench_cells(args):
            lifetimes = _lifetimes(results, cell.name)
            normalized = _normalize(lifetimes, lifetimes.get(label, []))
            if not normalized:
                break
            tasks.append(normalized)
        else:
            scores[label] = tasks
    return scores


def plot_profiles(scores: dict[str, list[list[float]]], path: Path) -> None:
    """Performance profiles (Agarwal et al. 2021): per family, the share of runs whose
    normalized lifetime exceeds each threshold, with its 95% bootstrap band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from entityrl import stats

    every = np.concatenate([np.concatenate(tasks) for tasks in scores.values()])
    taus = np.linspace(min(every.min(), 0.0) - 0.1, max(every.max(), 1.0) + 0.1, 101)
    fig, ax = plt.subplots(figsize=(7, 4.5), constrained_layout=True)
    for label, tasks in scores.items():
        share, low, high = stats.performance_profile(tasks, taus)
        ax.plot(
            taus, share, label=label, linestyle="--" if label in ("random", "scripted") else "-"
        )
        ax.fill_between(taus, low, high, alpha=0.15)
    ax.set(
        xlabel="normalized lifetime τ (random play 0, scripted survivor 1)",
        ylabel="fraction of runs with score > τ",
        title="Survival bench: performance profiles",
    )
    ax.legend(fontsize=8)
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    os.replace(tmp, path)


def bench_section(
    args: argparse.Namespace, out: Path, results: list[dict], wall: float | None
) -> str:
    """The bench's "Results" section of docs/survival.md; ``wall``: the seconds of the sitting
    that wrote it (None: written with ``--report-only``)."""
    import platform

    from entityrl import stats

    budget = BUDGETS[args.budget]
    command = (
        f"python experiments/eden/run.py bench --budget {args.budget} --worlds "
        f"{' '.join(args.worlds)} --rewards {' '.join(args.rewards)} --observations "
        f"{' '.join(args.observations)} --families {' '.join(args.families)} --seeds "
        f"{' '.join(map(str, args.seeds))} --life-limit {args.life_limit}"
    )
    trained = [r for r in results if r["label"] in FAMILIES]
    expected = len(bench_study(args, out).runs) * len(args.seeds)
    coverage = (
        f"All {expected} training runs are in."
        if len(trained) == expected
        else f"**Partial: {len(trained)} of the bench's {expected} training runs are finished; "
        "the table and the figure show only those.**"
    )
    scores = normalized_scores(args, results)
    aggregate = "\n".join(
        f"- {label}: IQM of the normalized lifetime over every cell and seed "
        f"{stats.interval(tasks)}"
        for label, tasks in scores.items()
    )
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"### Results: Survival bench, {args.budget} budget\n\n"
        f"Command: `{command}`. Budget `{args.budget}`: {args.steps:,} environment steps per "
        f"run, seeds {', '.join(map(str, args.seeds))}, {args.episodes} evaluation episodes "
        f"per run (behaviour cloning: {budget.demos} episodes of the scripted survivor). Life "
        f"limit {args.life_limit}, simple actions. Lifetime: mean episode length over the "
        "episodes (sampled actions; DQN and SAC greedy, as their configs evaluate; meta_rl: "
        "an episode of a trial on held-out maps); IQM and "
        "its 95% stratified bootstrap interval over the seeds (`entityrl.stats`); s per run: "
        "a family's training (its last sitting's, if continued), a reference's play. Machine: "
        f"{platform.machine()}, {os.cpu_count()} cores, load average {load} when written; "
        + ("written with --report-only" if wall is None else f"this sitting took {_clock(wall)}")
        + f". {coverage}\n\n"
        f"{bench_table(args, results)}\n\nOver the cells:\n\n{aggregate}\n\n"
        f"![Survival bench performance profiles](images/eden_bench_{args.budget}.png)\n"
        + (f"\n{meta_section(args, results)}" if META in args.families else "")
    )


def meta_section(args: argparse.Namespace, results: list[dict]) -> str:
    """Meta-RL's table: per task family and policy, the return and length of each episode of a
    trial (means over the seeds), and how much the last episode's return gains on the
    first's."""
    import numpy as np

    rows = [
        "| task family | seeds | policy, tasks | return per episode of a trial | last - first "
        "(per seed) | length per episode |",
        "|---|---|---|---|---|---|",
    ]
    policies = {
        "test": "RL^2, held-out tasks",
        "train": "RL^2, meta-training tasks",
        "random": "random play, held-out tasks",
    }
    for panel in dict.fromkeys(r["panel"] for r in results if r["label"] == META):
        mine = [r for r in results if (r["panel"], r["label"]) == (panel, META)]
        for name, what in policies.items():
            returns = np.array([r["per_episode"][name]["return"] for r in mine])
            lengths = np.array([r["per_episode"][name]["length"] for r in mine])
            gain = returns[:, -1] - returns[:, 0]
            rows.append(
                f"| {panel} | {len(mine)} | {what} | {' / '.join(f'{x:.3g}' for x in returns.mean(0))} "
                f"| {gain.mean():+.3g} ({', '.join(f'{g:+.3g}' for g in gain)}) | "
                f"{' / '.join(f'{x:.1f}' for x in lengths.mean(0))} |"
            )
    return (
        "Meta-RL (RL^2, `experiments/eden/meta_rl.yaml`): PPO with memory trained on trials of "
        f"{TRIAL_EPISODES['navigation']} episodes of one river-navigation task and of "
        f"{TRIAL_EPISODES['survival']} episodes on one map of each cell's world; evaluated on "
        f"{args.episodes} trials of held-out tasks (task ids disjoint from the meta-training "
        "ones) and of meta-training tasks, sampled actions; means over the seeds.\n\n"
        + "\n".join(rows)
        + "\n"
    )


def bench_report(
    args: argparse.Namespace, out: Path, docs: Path, results_dir: Path, wall: float | None
) -> None:
    """The bench's results json, performance profiles and docs section, from its finished
    runs and the references played now."""
    study = bench_study(args, out)
    results = [*references(args), *bench_results(study, args, out)]
    write_json(results_dir / f"bench_{args.budget}.json", results)
    figure = docs / "images" / f"eden_bench_{args.budget}.png"
    figure.parent.mkdir(parents=True, exist_ok=True)
    plot_profiles(normalized_scores(args, results), figure)
    replace_section(docs / "survival.md", bench_section(args, out, results, wall))
    print(f"wrote the bench's results, {figure.name} and its section of {docs / 'survival.md'}")


def run_bench(
    args: argparse.Namespace, out: Path, docs: Path = DOCS, results_dir: Path = HERE / "results"
) -> bool:
    """Train (or take) every run of the bench, then report (unless ``args.no_report``) to
    ``docs`` (its survival.md and images/) and ``results_dir``; False if interrupted."""
    study = bench_study(args, out)
    started = time.time()
    seeds = " ".join(map(str, args.seeds))
    _say(
        f"bench ({args.budget}): {len(study.runs)} runs x seeds {seeds}, in {out / bench_dir(args)}"
    )
    record_demos(study, args, out)
    try:
        complete = train_all(bench_dir(args), study, args, out)
    except KeyboardInterrupt:
        complete = False
    if META in args.families:  # its figures, with --no-report too
        print(meta_section(args, bench_results(study, args, out)))
    if not args.no_report:
        bench_report(args, out, docs, results_dir, time.time() - started)
    return complete


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
    parser.add_argument("study", nargs="?", choices=[*sorted(STUDIES), "bench"])
    parser.add_argument("--list", action="store_true", help="list the studies and their runs")
    parser.add_argument("--commands", action="store_true", help="print the runs' train commands")
    parser.add_argument(
        "--seeds", type=int, nargs="+", help="default 1 2 3 (bench: the budget's seeds)"
    )
    parser.add_argument("--steps", type=int, help="per run (default 2M; bench: the budget's)")
    parser.add_argument(
        "--episodes", type=int, help="evaluation episodes (default 100; bench: the budget's)"
    )
    bench = parser.add_argument_group("bench (study 'bench': families x worlds)")
    bench.add_argument("--budget", choices=list(BUDGETS), default="small")
    bench.add_argument("--families", nargs="+", choices=list(FAMILIES), default=list(FAMILIES))
    bench.add_argument(
        "--worlds", nargs="+", choices=list(BENCH_WORLDS), default=list(BENCH_WORLDS)
    )
    bench.add_argument("--rewards", nargs="+", choices=REWARDS, default=["dense"])
    bench.add_argument("--observations", nargs="+", choices=OBSERVATIONS, default=["entities"])
    bench.add_argument("--life-limit", type=int, default=100)
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
    if args.study == "bench":
        budget = BUDGETS[args.budget]
        if args.steps is not None or args.episodes is not None:
            parser.error(f"bench: --budget sets the steps and episodes; got --steps "
                         f"{args.steps}, --episodes {args.episodes}")  # fmt: skip
        args.steps, args.episodes, args.demos = budget.steps, budget.episodes, budget.demos
        args.seeds = args.seeds or list(budget.seeds)
    args.seeds = args.seeds or list(STUDY_SEEDS)
    args.steps = args.steps or 2_000_000
    args.episodes = args.episodes or 100
    for option in ("steps", "episodes", "threads", "jobs", "life_limit"):
        if getattr(args, option) < 1:
            parser.error(f"--{option} must be at least 1, got {getattr(args, option)}")
    args.out = args.out.resolve()  # before moving to the repository's root
    os.chdir(ROOT)
    if args.list or args.study is None:
        print(listing(args))
        return
    if args.study == "bench":
        if args.runs or args.commands or (args.report_only and args.no_report):
            parser.error("bench: --runs, --commands and --report-only with --no-report do not "
                         "apply; choose runs with --families and --worlds")  # fmt: skip
        if args.report_only:
            bench_report(args, args.out, DOCS, HERE / "results", None)
        elif not run_bench(args, args.out):
            print("interrupted: run the same command again to continue where it stopped")
            sys.exit(130)
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
                config = str(run.config.relative_to(ROOT))
                print(" ".join(["entityrl train", config, *run.overrides, *settings]))
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
