"""What the command modules share: the exit code of a usage error, the form of an error line,
and argument types that argparse reports in one line (``error: argument --steps: expected
...``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from entityrl.env.vec_env import VecEnv

if TYPE_CHECKING:
    from entityrl.recording import RecordingVecEnv
    from entityrl.training.config import TrainConfig

USAGE_ERROR = 2
"""Exit code of a command given arguments it cannot use (argparse's own code for them)."""

RUNTIME_ERROR = 1
"""Exit code of a command that failed while working (a broken environment, a dead worker)."""


def error_line(command: str, message: str) -> str:
    """How every command reports a failure: ``entityrl COMMAND: error: MESSAGE``, as argparse
    reports a bad argument."""
    return f"entityrl {command}: error: {message}"


def positive_int(text: str) -> int:
    """A whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def add_record_argument(parser: argparse.ArgumentParser, who: str) -> None:
    """``--record FILE``: keep the complete episodes played as a recording."""
    parser.add_argument(
        "--record",
        metavar="FILE",
        help=f"record every complete episode played by {who} into FILE, an Arrow recording for "
        "entityrl bc and Arrow tools (docs/recording.md; needs pip install "
        "'entityrl[recording]'); the replay viewer of web/ reads --replay FILE instead; an "
        "existing FILE is replaced",
    )


def recording_env(
    env: VecEnv, path: str, env_id: str, env_kwargs: dict[str, Any]
) -> RecordingVecEnv:
    """``env``, recording its complete episodes into ``path``; ValueError (one line, ``env``
    closed) when recordings cannot be written here."""
    try:
        from entityrl.recording import RecordingVecEnv

        return RecordingVecEnv(env, path, env_id=env_id, env_kwargs=env_kwargs)
    except ImportError:
        env.close()
        raise ValueError(
            "--record needs pyarrow, which is not installed: pip install 'entityrl[recording]'"
        ) from None
    except OSError as err:
        env.close()
        raise ValueError(f"--record: cannot write {path!r}: {err.strerror or err}") from None


def load_train_config(source: str | None, overrides: list[str]) -> TrainConfig:
    """The config of a training command (:func:`entityrl.training.config.load_config`), with
    an environment named by a file path (``../envs/x:Y``, as ENV_OR_CONFIG or ``env.id=``)
    refused as a ConfigError: importlib would take it for a relative import and fail with a
    TypeError."""
    from entityrl.training.config import ConfigError, load_config

    named = [o.partition("=")[2] for o in overrides if o.partition("=")[0].strip() == "env.id"]
    for name in [source or "", *named]:
        module, colon, cls = name.partition(":")
        is_path = module.startswith(".") or "/" in module or "\\" in module
        if colon and is_path and not Path(name).exists():
            stem = Path(module).stem
            raise ConfigError(
                f"environment {name!r}: expected module:Class with a module importable by name "
                f"(from the current directory or PYTHONPATH), got the path {module!r}; run from "
                f"the folder of {stem}.py with {stem}:{cls}"
            )
    return load_config(source, overrides)
