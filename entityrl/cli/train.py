"""``entityrl train ENV_OR_CONFIG [key=value ...]``: train an agent (PPO by default)."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from entityrl.cli.arguments import RUNTIME_ERROR, USAGE_ERROR, load_train_config
from entityrl.env.process_vec_env import EnvWorkerError
from entityrl.env.validator import EnvValidationError
from entityrl.nn.device import DeviceError
from entityrl.nn.kernels import build
from entityrl.nn.rogue_net import ObservationTooLargeError
from entityrl.training.checkpoint import (
    CHECKPOINT_FILE,
    CheckpointError,
    CheckpointWriteError,
    load_checkpoint,
)
from entityrl.training.config import ConfigError, TrainConfig, describe, to_yaml
from entityrl.training.finite import NonFiniteError
from entityrl.training.periodic_eval import BEST_FILE

if TYPE_CHECKING:
    from entityrl.training.runner import TrainResult


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train an agent on an environment (PPO, or the algorithm algo= names)",
        description=(
            "Train a RogueNet agent with PPO, or with the algorithm algo= names (a built-in one, "
            "or your own as algo=module:Class, whose settings --help then lists). ENV_OR_CONFIG is a registered environment name "
            "(its shipped config is used) or a YAML config file. Any parameter can be "
            "overridden as key=value, before or after the options, e.g. ppo.gamma=0.9 "
            "rollout.num_envs=64."
        ),
        epilog="parameters (default values):\n" + describe(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        add_help=False,
    )
    # Handled in run(): the parameters shown are those of the config the arguments resolve to,
    # so `entityrl train ENV algo=my_module:MyAlgo --help` lists that algorithm's settings.
    parser.add_argument(
        "-h", "--help", action="store_true", help="show this help (with the given config) and exit"
    )
    parser.add_argument("source", nargs="?", metavar="ENV_OR_CONFIG")
    parser.add_argument("overrides", nargs="*", metavar="key=value")
    parser.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR")
    parser.add_argument(
        "--show-config", action="store_true", help="print the resolved config and exit"
    )
    parser.set_defaults(func=run, parser=parser)


def run(args: argparse.Namespace) -> int:
    from entityrl.training.distributed import PeerLostError, is_rank_zero
    from entityrl.training.runner import default_run_dir, train

    source = args.source
    overrides = list(args.overrides)
    # "entityrl train ppo.gamma=0.9 --resume DIR": the first override lands in `source`.
    if source is not None and "=" in source and not Path(source).exists():
        overrides.insert(0, source)
        source = None
    if args.help:
        return show_help(args.parser, source, overrides)
    if args.resume and not (Path(args.resume) / CHECKPOINT_FILE).is_file():
        print(
            f"entityrl train: error: --resume {args.resume}: not a run directory (expected a "
            f"directory holding {CHECKPOINT_FILE} and config.yaml, as entityrl train writes)",
            file=sys.stderr,
        )
        return USAGE_ERROR
    if source is None and args.resume:
        source = str(Path(args.resume) / "config.yaml")
    if source is None:
        print("entityrl train: error: give an environment name or a config file", file=sys.stderr)
        return USAGE_ERROR
    try:
        config = load_train_config(source, overrides)
    except ConfigError as err:
        print(f"entityrl train: error: {err}", file=sys.stderr)
        return USAGE_ERROR
    if args.show_config:
        print(to_yaml(config), end="")
        return 0
    if not args.resume and config.log.run_dir is None:
        # Chosen here, so that an error can name it (every rank of a launcher chooses alike).
        config.log.run_dir = str(default_run_dir(config))
    run_dir = Path(args.resume or config.log.run_dir)
    if is_rank_zero():
        # A first run compiles the kernels for half a minute or more before any progress.
        build.announce = lambda line: print(f"entityrl train: {line}", file=sys.stderr, flush=True)
    try:
        # One process, world_size=N processes here, or one rank of a launcher's (torchrun).
        result = train(config=config, resume=args.resume)
    except CheckpointWriteError as err:  # a full disk, say: not the user's input
        print(f"entityrl train: error: {err}", file=sys.stderr)
        return RUNTIME_ERROR
    except (CheckpointError, ConfigError, DeviceError) as err:
        print(f"entityrl train: error: {err}", file=sys.stderr)
        return USAGE_ERROR
    except PeerLostError as err:
        print(f"entityrl train: error: {err}", file=sys.stderr)
        return RUNTIME_ERROR
    except (EnvWorkerError, EnvValidationError, NonFiniteError, ObservationTooLargeError) as err:
        # The message's first line says what failed; a worker's error follows it with the
        # environment's frames, after which the checkpoint's line would be lost.
        headline, _, frames = str(err).partition("\n")
        print(
            f"entityrl train: error: {headline}; {last_checkpoint(run_dir)}"
            + (f"\n{frames}" if frames else ""),
            file=sys.stderr,
        )
        return RUNTIME_ERROR
    if not is_rank_zero():
        return 0
    state = "interrupted" if result.interrupted else "finished"
    if result.stop_reason:
        state = f"stopped early ({result.stop_reason})"
    print(
        f"{state} after {result.steps:,} steps in {result.seconds:.0f}s; {returns(config, result)}\n"
        f"run directory: {result.run_dir}\n" + next_commands(config, result)
    )
    return 0


def returns(config: TrainConfig, result: TrainResult) -> str:
    """The summary's returns: the last evaluation's, when periodic evaluation ran (sampled or
    most probable actions, as eval.deterministic says), then the last training episodes'."""
    training = "n/a" if result.mean_return is None else f"{result.mean_return:.3f}"
    if result.eval_return is None:
        return f"mean return of the last training episodes: {training}"
    mode = "most probable" if config.eval.deterministic else "sampled"
    return (
        f"mean return of the last evaluation ({config.eval.episodes} episodes, {mode} actions): "
        f"{result.eval_return:.3f} (of the last training episodes: {training})"
    )


def show_help(parser: argparse.ArgumentParser, source: str | None, overrides: list[str]) -> int:
    """The usage, then every parameter of the config the arguments give (with its value)."""
    try:
        config = load_train_config(source, overrides)
    except ConfigError as err:
        print(f"entityrl train: error: {err}", file=sys.stderr)
        return USAGE_ERROR
    parser.epilog = "parameters (values of this config):\n" + describe(config)
    parser.print_help()
    return 0


def last_checkpoint(run_dir: Path) -> str:
    """Where a failed run can continue from, for its error line."""
    try:
        step = load_checkpoint(run_dir)["step"]
    except CheckpointError:
        return f"no checkpoint was written to {run_dir}"
    return (
        f"the last checkpoint, of step {step:,}, is kept: continue with "
        f"`entityrl train --resume {shlex.quote(str(run_dir))}`"
    )


def next_commands(config: TrainConfig, result: TrainResult) -> str:
    """Commands that evaluate, watch and continue the run, each ready to paste into a shell
    started in the current directory."""
    run = shlex.quote(str(result.run_dir))
    ended = result.interrupted or result.stop_reason
    more = "" if ended else f" total_timesteps={2 * config.total_timesteps}"
    best = result.run_dir / BEST_FILE
    return (
        (f"  best:     entityrl eval {shlex.quote(str(best))}\n" if best.exists() else "")
        + f"  evaluate: entityrl eval {run}\n"
        f"  watch:    entityrl play {shlex.quote(config.env.id)} --agent {run}\n"
        f"  continue: entityrl train --resume {run}{more}"
    )
