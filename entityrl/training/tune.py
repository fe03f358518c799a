"""Hyperparameter search with Optuna (``entityrl tune``; needs ``pip install 'entityrl[tune]'``).

A study lives in a directory: ``study.db`` (Optuna's SQLite storage, so running the same
command again resumes it, after a crash or Ctrl-C), one run directory per trial
(``trial-0007/``) and, after every finished trial, ``best.yaml``: the complete config of the
best trial so far, ready for ``entityrl train best.yaml``.

Each trial trains the base config with the sampled values (TPE sampler, seeded) and reports
the mean return of the last episodes after every iteration; the median pruner stops trials
that fall behind the others at the same step. A finished trial's value is the mean return of
its final agent over ``episodes`` fresh evaluation episodes.

The search space is a mapping from config keys to distributions, in YAML::

    optim.lr: {type: float, low: 1.0e-4, high: 1.0e-2, log: true}
    ppo.update_epochs: {type: int, low: 1, high: 6}
    net.d_model: {type: categorical, choices: [16, 32, 64]}
"""

from __future__ import annotations

import functools
import math
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from entityrl.training.callbacks import Callback
from entityrl.training.checkpoint import atomic_write
from entityrl.training.config import ConfigError, TrainConfig, load_config, to_yaml

if TYPE_CHECKING:
    import optuna

    from entityrl.training.runner import Trainer

DEFAULT_SPACE: dict[str, dict[str, Any]] = {
    "optim.lr": {"type": "float", "low": 3e-4, "high": 1e-2, "log": True},
    "ppo.ent_coef": {"type": "float", "low": 1e-4, "high": 1e-1, "log": True},
    "ppo.gamma": {"type": "categorical", "choices": [0.9, 0.95, 0.99, 0.995]},
    "ppo.update_epochs": {"type": "int", "low": 1, "high": 6},
    "net.d_model": {"type": "categorical", "choices": [16, 32, 64]},
}
STUDY_FILE = "study.db"
NAME = "entityrl"
BEST_FILE = "best.yaml"


class TuneError(ValueError):
    """A search space, study directory or base config that cannot be tuned."""


@dataclass(frozen=True)
class Param:
    """One dimension of the search space."""

    key: str
    kind: str  # float, int or categorical
    low: float = 0.0
    high: float = 0.0
    log: bool = False
    choices: tuple[Any, ...] = ()

    def suggest(self, trial: optuna.Trial) -> Any:
        if self.kind == "float":
            return trial.suggest_float(self.key, self.low, self.high, log=self.log)
        if self.kind == "int":
            return trial.suggest_int(self.key, int(self.low), int(self.high), log=self.log)
        return trial.suggest_categorical(self.key, list(self.choices))


def parse_space(space: Mapping[str, Any], where: str = "the search space") -> list[Param]:
    """The parameters of a search space mapping; :class:`TuneError` naming the key and field
    that is wrong."""
    if not isinstance(space, Mapping) or not space:
        raise TuneError(f"{where} must map config keys to distributions; got {space!r}")
    params = []
    for key, spec in space.items():
        if not isinstance(spec, Mapping) or spec.get("type") not in ("float", "int", "categorical"):
            raise TuneError(
                f"{where}: {key} needs a mapping with type float, int or categorical; got {spec!r}"
            )
        kind = spec["type"]
        allowed = {"type", "choices"} if kind == "categorical" else {"type", "low", "high", "log"}
        unknown = sorted(set(spec) - allowed)
        if unknown:
            raise TuneError(f"{where}: {key} ({kind}) does not take {', '.join(unknown)}")
        if kind == "categorical":
            choices = spec.get("choices")
            if not isinstance(choices, list) or not choices:
                raise TuneError(
                    f"{where}: {key} needs a non-empty list of choices; got {choices!r}"
                )
            params.append(Param(key, kind, choices=tuple(choices)))
            continue
        low, high = spec.get("low"), spec.get("high")
        if not all(isinstance(v, int | float) for v in (low, high)) or not low < high:
            raise TuneError(f"{where}: {key} needs numbers low < high; got low={low}, high={high}")
        if spec.get("log") and low <= 0:
            raise TuneError(f"{where}: {key} with log: true needs low > 0; got {low}")
        params.append(Param(key, kind, float(low), float(high), bool(spec.get("log", False))))
    return params


def load_space(path: str | Path | None) -> list[Param]:
    """The search space of a YAML file (None: :data:`DEFAULT_SPACE`)."""
    if path is None:
        return parse_space(DEFAULT_SPACE)
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as err:
        raise TuneError(f"cannot read the search space {path}: {err}") from None
    return parse_space(data, where=str(path))


def check_space(source: str, overrides: list[str], params: list[Param]) -> None:
    """Before any trial: every key of the space is a config key and its extreme values (or
    choices) are valid settings of the base config."""
    for param in params:
        values = param.choices or (param.low, param.high)
        for value in values:
            setting = f"{param.key}={int(value) if param.kind == 'int' else value}"
            try:
                load_config(source, [*overrides, setting])
            except ConfigError as err:
                raise TuneError(f"search space: {setting} is not a valid setting: {err}") from None


class _InterruptedError(Exception):
    """A trial's training stopped by Ctrl-C."""


class _Report(Callback):
    """Reports the running mean return to the trial; stops the run if the pruner says so, or
    if Ctrl-C came while the trainer was not yet listening for it (during its setup)."""

    def __init__(self, trial: optuna.Trial, interrupted: Callable[[], bool]) -> None:
        self.trial = trial
        self.interrupted = interrupted
        self.pruned = False

    def on_iteration(self, trainer: Trainer, metrics: dict[str, float]) -> None:
        if self.interrupted():
            trainer.request_stop("interrupted")
            return
        value = trainer.mean_return
        if value is None:
            return
        self.trial.report(value, trainer.step)
        if self.trial.should_prune():
            self.pruned = True
            trainer.request_stop("pruned by the study")


@dataclass
class Tuner:
    """A study over ``params`` around the config built from ``source`` + ``overrides``."""

    study_dir: Path
    source: str
    overrides: list[str]
    params: list[Param]
    episodes: int = 64
    seed: int = 0
    announce: Callable[[str], None] = field(default=functools.partial(print, flush=True))
    stop_requested: bool = False

    def study(self) -> optuna.Study:
        import optuna

        self.study_dir.mkdir(parents=True, exist_ok=True)
        storage = f"sqlite:///{self.study_dir / STUDY_FILE}"
        # A resumed study must not draw the first session's values again: the sampler's
        # seed moves on with the number of trials already in the study.
        known = 0
        if (self.study_dir / STUDY_FILE).exists():
            known = len(optuna.load_study(study_name=NAME, storage=storage).trials)
        warmup = load_config(self.source, self.overrides).total_timesteps // 4
        return optuna.create_study(
            study_name=NAME,
            storage=storage,
            load_if_exists=True,
            direction="maximize",
            sampler=optuna.samplers.TPESampler(seed=self.seed + known),
            pruner=optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=warmup),
        )

    def config_for(self, values: Mapping[str, Any], run_dir: Path | None = None) -> TrainConfig:
        sampled = [f"{key}={value}" for key, value in values.items()]
        extra = [f"log.run_dir={run_dir}", "log.progress=false"] if run_dir else []
        return load_config(self.source, [*self.overrides, *sampled, *extra])

    def objective(self, trial: optuna.Trial) -> float:
        import optuna

        from entityrl.training.runner import train

        values = {p.key: p.suggest(trial) for p in self.params}
        run_dir = self.study_dir / f"trial-{trial.number:04d}"
        report = _Report(trial, lambda: self.stop_requested)
        result = train(config=self.config_for(values, run_dir), callbacks=[report])
        if result.interrupted or self.stop_requested:
            self.stop_requested = True
            raise _InterruptedError  # recorded as failed: a resumed study runs it again
        if report.pruned:
            self.announce(f"trial {trial.number}: pruned at step {result.steps:,} {values}")
            raise optuna.TrialPruned()
        value = self.score(run_dir)
        self.announce(f"trial {trial.number}: mean return {value:.4f} {values}")
        return value

    def score(self, run_dir: Path) -> float:
        """A finished trial's value: the mean return of the run's final agent over
        ``episodes`` evaluation episodes (the same episodes for every trial)."""
        from entityrl.training.agent import evaluate, load_agent, make_eval_env

        agent = load_agent(run_dir, seed=self.seed)
        with make_eval_env(agent, num_envs=8, seed=self.seed + 12345) as env:
            return float(evaluate(agent, env, self.episodes).mean())

    def run(self, trials: int) -> optuna.Study:
        """Run trials until the study holds ``trials`` finished (complete or pruned) ones."""
        from optuna.trial import TrialState

        study = self.study()
        done = [t for t in study.trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
        if done:
            self.announce(f"resuming the study in {self.study_dir}: {len(done)} trial(s) done")

        def after_trial(finished: optuna.Study, _trial: optuna.trial.FrozenTrial) -> None:
            self.write_best(finished)
            if self.stop_requested:
                finished.stop()

        # Ctrl-C ends the study between trials (inside one, the trainer stops after its
        # current iteration): never in the middle of Optuna's own bookkeeping.
        self.stop_requested = False
        previous = signal.signal(signal.SIGINT, lambda *_: setattr(self, "stop_requested", True))
        try:
            study.optimize(self.objective, n_trials=max(0, trials - len(done)),
                           callbacks=[after_trial], catch=(_InterruptedError,))  # fmt: skip
        finally:
            signal.signal(signal.SIGINT, previous)
        if self.stop_requested:
            raise KeyboardInterrupt
        return study

    def write_best(self, study: optuna.Study) -> Path | None:
        """``best.yaml``: the base config with the best trial's values (atomically)."""
        from optuna.trial import TrialState

        # Only complete trials were evaluated: Optuna gives a pruned trial its last running
        # training return as value, which is not comparable with an evaluation's mean.
        complete = [
            t
            for t in study.trials
            if t.state == TrialState.COMPLETE and t.value is not None and math.isfinite(t.value)
        ]
        if not complete:
            return None
        best = max(complete, key=lambda t: t.value)
        config = self.config_for(best.params)
        header = (f"# Best of {len(complete)} trial(s) of the study in {self.study_dir}: trial "
                  f"{best.number}, mean return {best.value:.4f} over {self.episodes} episodes.\n")  # fmt: skip
        path = self.study_dir / BEST_FILE
        atomic_write(path, lambda f: f.write(header + to_yaml(config)), "w")
        return path
