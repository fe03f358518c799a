"""``entityrl bc DEMOS... [key=value ...]``: train an agent by behaviour cloning on recordings."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from entityrl.cli.arguments import USAGE_ERROR, load_train_config
from entityrl.nn.device import DeviceError
from entityrl.training.agent import AgentError
from entityrl.training.checkpoint import CheckpointError
from entityrl.training.config import ConfigError, TrainConfig, to_yaml


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bc",
        help="train an agent by behaviour cloning on recorded episodes",
        description=(
            "Train a RogueNet agent to take the actions of recorded episodes (see "
            "docs/recording.md): the negative log-likelihood of every recorded action under "
            "the recorded masks is minimized, with a held-out share of the episodes for "
            "early stopping. The environment (and its shipped config) is the one named in the "
            "first recording, unless --config or env.id says otherwise. The run directory is "
            "like a PPO run's: entityrl eval/play use it, and PPO starts from it with "
            "init_from=RUN_DIR. Any parameter can be overridden as key=value (bc.*, optim.*, "
            "net.*, ...; entityrl train --help lists them)."
        ),
    )
    parser.add_argument("items", nargs="+", metavar="DEMOS... [key=value]")
    parser.add_argument(
        "--config",
        metavar="ENV_OR_CONFIG",
        help="a registered environment name or YAML config to start from (default: the "
        "first recording's environment)",
    )
    parser.add_argument(
        "--show-config", action="store_true", help="print the resolved config and exit"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    demos = [item for item in args.items if "=" not in item or Path(item).exists()]
    overrides = [item for item in args.items if item not in demos]
    try:
        config = bc_config(demos, overrides, args.config)
    except (ConfigError, ValueError) as err:
        print(f"entityrl bc: error: {err}", file=sys.stderr)
        return USAGE_ERROR
    if args.show_config:
        print(to_yaml(config), end="")
        return 0
    from entityrl.training.runner import Trainer

    try:
        trainer = Trainer(config, on_iteration=_report if config.log.progress else None)
    except (CheckpointError, ConfigError, DeviceError, AgentError, ValueError) as err:
        print(f"entityrl bc: error: {err}", file=sys.stderr)
        return USAGE_ERROR
    result = trainer.run()
    shown = "n/a" if result.mean_return is None else f"{result.mean_return:.3f}"
    print(
        f"finished after {trainer.iteration} epochs ({result.steps:,} samples) in "
        f"{result.seconds:.0f}s; mean return of the last evaluation: {shown}\n"
        f"run directory: {result.run_dir}\n"
        f"  evaluate: entityrl eval {result.run_dir}\n"
        f"  continue with PPO: entityrl train {config.env.id} init_from={result.run_dir}"
    )
    return 0


def bc_config(demos: list[str], overrides: list[str], source: str | None) -> TrainConfig:
    """The config of a behaviour-cloning run on ``demos``: ``source``'s (default: the
    environment recorded in the first demo, with its arguments), ``algo=bc``, the demos, then
    ``overrides``."""
    if not demos:
        raise ValueError("give at least one recording (a file written with --record)")
    try:
        from entityrl.recording import Recording
    except ImportError:
        raise ValueError(
            "entityrl bc reads recordings with pyarrow, which is not installed: "
            "pip install 'entityrl[recording]'"
        ) from None
    header = Recording(demos[0]).header
    recorded_env: list[str] = []
    if source is None:
        if header.env_id is None:
            raise ValueError(
                f"{demos[0]} does not name its environment: give --config ENV_OR_CONFIG"
            )
        source = header.env_id
        recorded_env = [f"env.kwargs={json.dumps(header.env_kwargs)}"]
    return load_train_config(
        source, [*recorded_env, "algo=bc", f"bc.demos={json.dumps(demos)}", *overrides]
    )


def _report(metrics: dict[str, float]) -> None:
    shown = metrics.get("episode/episode_return")
    episode = "" if shown is None else f"  return {shown:.3f}"
    print(
        f"epoch {metrics['epoch']:.0f}  train nll {metrics['loss/train_nll']:.4f}  "
        f"val nll {metrics['loss/val_nll']:.4f}{episode}",
        flush=True,
    )
