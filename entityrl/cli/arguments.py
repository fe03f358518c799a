"""What the command modules share: the exit code of a usage error and argument types that
argparse reports in one line (``error: argument --steps: expected ...``)."""

from __future__ import annotations

import argparse

USAGE_ERROR = 2
"""Exit code of a command given arguments it cannot use (argparse's own code for them)."""

RUNTIME_ERROR = 1
"""Exit code of a command that failed while working (a broken environment, a dead worker)."""


def positive_int(text: str) -> int:
    """A whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value
