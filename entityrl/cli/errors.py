"""How the command reports a failure: one line, ``entityrl COMMAND: error: ...``.

Errors that entityrl raises on purpose (a broken environment, a bad config or checkpoint, a
dead worker, a run that diverged) say everything in their message. Where the user's own code
failed (an environment's ``__init__`` that raises, a module with a syntax error), the line is
followed by that code's frames, and only those: entityrl's frames would bury them. Any other
exception is a bug in entityrl and keeps its full traceback.
"""

from __future__ import annotations

import sys
import sysconfig
import traceback
from pathlib import Path

from entityrl.cli.arguments import RUNTIME_ERROR, error_line
from entityrl.env.process_vec_env import EnvWorkerError
from entityrl.env.validator import EnvValidationError
from entityrl.nn.device import DeviceError
from entityrl.nn.rogue_net import ObservationTooLargeError
from entityrl.training.agent import AgentError
from entityrl.training.checkpoint import CheckpointError
from entityrl.training.config import ConfigError
from entityrl.training.finite import NonFiniteError

# Raised on purpose, with a complete message.
OWN_ERRORS = (
    EnvValidationError,
    CheckpointError,
    ConfigError,
    DeviceError,
    AgentError,
    NonFiniteError,
    EnvWorkerError,
    ObservationTooLargeError,
)

_PACKAGE = Path(__file__).resolve().parent.parent
_PYTHON_DIRS = tuple(
    str(Path(p).resolve())
    for p in {sysconfig.get_path(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
)


def report(command: str, err: BaseException) -> int | None:
    """Print ``err`` for people and return the exit code; None if it is entityrl's own bug
    (the caller re-raises it, traceback and all)."""
    if isinstance(err, OWN_ERRORS):
        print(error_line(command, str(err)), file=sys.stderr)
        return RUNTIME_ERROR
    if isinstance(err, SyntaxError) and err.filename and is_users(err.filename):
        print(
            error_line(command, f"{err.filename}, line {err.lineno}: {type(err).__name__}")
            + "\n"
            + "".join(traceback.format_exception_only(err)),
            file=sys.stderr,
            end="",
        )
        return RUNTIME_ERROR
    frames = traceback.extract_tb(err.__traceback__)
    if frames and is_users(frames[-1].filename):
        yours = [f for f in frames if is_users(f.filename)]
        print(
            error_line(command, f"{type(err).__name__}: {err} (raised by your code:)\n")
            + "".join(traceback.format_list(yours)),
            file=sys.stderr,
            end="",
        )
        return RUNTIME_ERROR
    return None


def is_users(filename: str) -> bool:
    """Whether code from ``filename`` is the user's: neither entityrl's, Python's, nor an
    installed package's."""
    if filename.startswith("<"):  # <frozen importlib._bootstrap>, <string>
        return False
    path = Path(filename).resolve()
    return not (path.is_relative_to(_PACKAGE) or str(path).startswith(_PYTHON_DIRS))
