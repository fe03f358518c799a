"""``entityrl tune ENV_OR_CONFIG [key=value ...] --trials N``: hyperparameter search (Optuna)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from entityrl.cli.arguments import USAGE_ERROR, load_train_config
from entityrl.training.config import ConfigError


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "tune",
        help="search hyperparameters with Optuna (resumable)",
        description=(
            "Train --trials runs of ENV_OR_CONFIG (with key=value overrides) with values drawn "
            "from a search space, prune the ones that fall behind, and write the best config "
            "to STUDY/best.yaml. Running the same command again resumes the study. Needs "
            "pip install 'entityrl[tune]'."
        ),
    )
    parser.add_argument("source", metavar="ENV_OR_CONFIG")
    parser.add_argument("overrides", nargs="*", metavar="key=value")
    parser.add_argument("--trials", type=int, default=20, help="finished trials wanted (20)")
    parser.add_argument(
        "--study", metavar="DIR", help="the study's directory (default tune/<env>-<date>-<time>)"
    )
    parser.add_argument(
        "--space", metavar="YAML", help="search space (default: lr, ent_coef, gamma, epochs, width)"
    )
    parser.add_argument(
        "--episodes", type=int, default=64, help="evaluation episodes per trial (64)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the sampler (0)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        import optuna
    except ImportError:
        print("entityrl tune: error: needs Optuna: pip install 'entityrl[tune]'", file=sys.stderr)
        return USAGE_ERROR
    from entityrl.training.run_dir import safe_name
    from entityrl.training.tune import TuneError, Tuner, check_space, load_space

    if args.trials < 1 or args.episodes < 1:
        print("entityrl tune: error: --trials and --episodes must be >= 1", file=sys.stderr)
        return USAGE_ERROR
    try:
        base = load_train_config(args.source, list(args.overrides))
        params = load_space(args.space)
        check_space(args.source, list(args.overrides), params)
    except (ConfigError, TuneError) as err:
        print(f"entityrl tune: error: {err}", file=sys.stderr)
        return USAGE_ERROR
    study_dir = Path(
        args.study or f"tune/{safe_name(base.env.id)}-{time.strftime('%Y%m%d-%H%M%S')}"
    )
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # one line per trial is ours
    tuner = Tuner(study_dir, args.source, list(args.overrides), params, args.episodes, args.seed)
    try:
        study = tuner.run(args.trials)
    except KeyboardInterrupt:
        print(
            f"\ninterrupted; the finished trials are kept in {study_dir}. Resume with the same "
            f"command and --study {study_dir}",
            file=sys.stderr,
        )
        return 130
    best = tuner.write_best(study)
    if best is None:
        print("no trial finished: every one was pruned or failed", file=sys.stderr)
        return 1
    print(f"best: trial {study.best_trial.number}, mean return {study.best_value:.4f} "
          f"{study.best_params}\nbest config: {best}\n  train it: entityrl train {best}")  # fmt: skip
    return 0
