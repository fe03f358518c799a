"""``entityrl play ENV``: play a registered environment in the terminal, or watch an agent play.

The interactive loop lives in :mod:`entityrl.play`; this module only turns arguments into an
environment and a controller.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from entityrl.env import RandomPolicy
from entityrl.envs import make_vec
from entityrl.play import Controller, HumanPlayer, make_console, play

USAGE_ERROR = 2


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "play",
        help="play an environment in the terminal (or watch an agent play it)",
        description=(
            "Play a registered environment step by step: each step shows the entities and "
            "asks every acting entity for one of its legal choices (a number picks, Enter "
            "picks a random legal choice, q quits)."
        ),
    )
    parser.add_argument("env", metavar="ENV", help="registered environment name")
    parser.add_argument(
        "--kwargs",
        default="{}",
        metavar="JSON",
        help="constructor arguments as a JSON object, e.g. '{\"width\": 4}'",
    )
    parser.add_argument("--seed", type=int, default=None, help="seed of the environment")
    parser.add_argument(
        "--random-agent",
        action="store_true",
        help="watch an agent that picks uniformly among the legal actions",
    )
    parser.add_argument(
        "--steps", type=_positive_int, default=None, help="stop after this many steps"
    )
    parser.add_argument(
        "--delay",
        type=_non_negative_float,
        default=0.5,
        metavar="SECONDS",
        help="pause after each step when an agent plays (default: 0.5)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        kwargs = parse_kwargs(args.kwargs)
        env = make_vec(args.env, 1, seed=args.seed, **kwargs)
    except (KeyError, TypeError, ValueError) as error:
        # KeyError's str() adds quotes around the message; print the message itself.
        print(f"entityrl play: error: {error.args[0]}", file=sys.stderr)
        return USAGE_ERROR
    console = make_console(sys.stdout)
    controller: Controller
    if args.random_agent:
        controller, delay = RandomPolicy(env.action_space, seed=args.seed), args.delay
    else:
        # A person sets the pace by answering; no pause needed.
        controller = HumanPlayer(console, env.obs_space, env.action_space, seed=args.seed)
        delay = 0.0
    with env:
        play(env, controller, console, steps=args.steps, delay=delay)
    return 0


def parse_kwargs(text: str) -> dict[str, Any]:
    """The ``--kwargs`` JSON object as a dict; a ValueError that says what is wrong otherwise."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(
            f"--kwargs is not valid JSON ({error.msg} at column {error.colno}): {text!r}; "
            "expected an object such as '{\"width\": 4}'"
        ) from None
    if not isinstance(value, dict):
        raise ValueError(
            f"--kwargs must be a JSON object such as '{{\"width\": 4}}', got {type(value).__name__}: {text!r}"
        )
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:  # also rejects nan
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0, got {text!r}")
    return value
