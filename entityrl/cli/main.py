"""Entry point of the ``entityrl`` command: one subcommand per module in this package
(:mod:`entityrl.cli.arguments` holds what they share).

Each command module exposes ``add_parser(subparsers)``, which registers its subparser and sets
``func`` (called with the parsed arguments, returning an exit code).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

# Command modules, in the order ``entityrl --help`` lists them.
COMMANDS = ["train", "bc", "eval", "play", "plot", "survival", "export", "tune"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="entityrl",
        description="Reinforcement learning on entity-based environments.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        importlib.import_module(f"entityrl.cli.{name}").add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    importable_from_current_directory()
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    except Exception as err:
        from entityrl.cli.errors import report

        code = report(args.command, err)
        if code is None:
            raise
        return code


def importable_from_current_directory() -> None:
    """Let ``module:Class`` environments name modules of the current directory, as they can
    under ``python -m``; the installed command's own path holds only its script. Appended, so
    that a file here never shadows an installed module."""
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.append(here)


if __name__ == "__main__":
    sys.exit(main())
