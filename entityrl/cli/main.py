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
from collections.abc import Sequence

# Command modules, in the order ``entityrl --help`` lists them.
COMMANDS = ["train", "bc", "eval", "play", "plot", "survival", "export", "tune"]


class CommandParser(argparse.ArgumentParser):
    """A command's parser, whose positionals may come among its options: ``entityrl train ENV
    --resume DIR seed=1``. Plain argparse takes a command's positionals all at once where the
    first one stands, and refuses those after an option as "unrecognized arguments"."""

    _intermixing = False

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        # parse_known_intermixed_args parses by calling parse_known_args (twice, with the
        # positionals then the options switched off): those calls parse plainly. A parser of
        # subcommands (entityrl survival) cannot be parsed intermixed, and is parsed plainly.
        if self._intermixing:
            return super().parse_known_args(args, namespace)
        if any(
            a.nargs in (argparse.PARSER, argparse.REMAINDER) for a in self._get_positional_actions()
        ):
            parsed, unknown = super().parse_known_args(args, namespace)
        else:
            self._intermixing = True
            try:
                parsed, unknown = self.parse_known_intermixed_args(args, namespace)
            finally:
                self._intermixing = False
        if unknown:  # refused here, so that the message names the command and its help
            self.error(
                f"unrecognized argument {unknown[0]!r} (options: {self.prog} --help; overrides "
                "are key=value, without dashes)"
            )
        return parsed, unknown


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="entityrl",
        description="Reinforcement learning on entity-based environments.",
    )
    subparsers = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, parser_class=CommandParser
    )
    for name in COMMANDS:
        importlib.import_module(f"entityrl.cli.{name}").add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    importable_from_current_directory()
    announce_start(sys.argv[1:] if argv is None else argv)
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


def announce_start(argv: Sequence[str]) -> None:
    """Say at once what a training command is doing: loading torch and the command's modules
    takes seconds before the first line of its own (a kernel build or the progress bar). To a
    terminal only: a log or a pipe gets the command's output alone."""
    quiet = {"-h", "--help", "--show-config"}
    if argv[:1] in (["train"], ["bc"], ["tune"]) and not quiet & set(argv) and sys.stderr.isatty():
        print(
            f"entityrl {argv[0]}: starting (loading torch and the environment)...",
            file=sys.stderr,
            flush=True,
        )


def importable_from_current_directory() -> None:
    """Let ``module:Class`` environments name modules of the current directory, as they can
    under ``python -m``; the installed command's own path holds only its script. Appended, so
    that a file here never shadows an installed module."""
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.append(here)


if __name__ == "__main__":
    sys.exit(main())
