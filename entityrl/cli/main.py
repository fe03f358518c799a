"""Entry point of the ``entityrl`` command: one subcommand per module in this package
(:mod:`entityrl.cli.arguments` holds what they share).

Each command module exposes ``add_parser(subparsers)``, which registers its subparser and sets
``func`` (called with the parsed arguments, returning an exit code).
"""

from __future__ import annotations

import argparse
import importlib
import sys

# Command modules, in the order ``entityrl --help`` lists them.
COMMANDS = ["train", "eval", "play", "plot", "survival"]


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
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
