"""``entityrl play ENV``: play a registered environment in the terminal, or watch an agent play.

The interactive loop lives in :mod:`entityrl.play`; this module only turns arguments into an
environment and a controller.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from entityrl.cli.arguments import (
    USAGE_ERROR,
    add_record_argument,
    positive_int,
    recording_env,
)
from entityrl.env import RandomPolicy, VecEnv, VecObs
from entityrl.env.multiplayer_vec import MultiPlayerVecEnv
from entityrl.env.stacking import stacking
from entityrl.envs import make_vec
from entityrl.play import Controller, HumanPlayer, make_console, play
from entityrl.ragged import RaggedArray

if TYPE_CHECKING:
    from rich.console import Console

    from entityrl.play.seat import OneSeat
    from entityrl.training.agent import Agent
    from entityrl.training.players import Player


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
        metavar="JSON",
        help="constructor arguments as a JSON object, e.g. '{\"width\": 4}' (default: none; "
        "with --agent on the environment it trained on, the run's own arguments)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed of the environment (and of the agent's sampling)",
    )
    parser.add_argument(
        "--random-agent",
        action="store_true",
        help="watch an agent that picks uniformly among the legal actions",
    )
    parser.add_argument(
        "--agent",
        metavar="CHECKPOINT_OR_RUN_DIR",
        help="watch the trained agent of a checkpoint (or run directory) play",
    )
    parser.add_argument(
        "--agent-actions",
        metavar="NAME[,NAME]",
        help="with --agent: the agent takes only these actions, you take the others",
    )
    parser.add_argument(
        "--seat",
        metavar="PLAYER",
        help="in a multi-player game, the player you (or --random-agent) play (default: the "
        "first); --agent then plays every other seat (random moves without it)",
    )
    parser.add_argument(
        "--steps", type=positive_int, default=None, help="stop after this many steps"
    )
    parser.add_argument(
        "--delay",
        type=_non_negative_float,
        default=0.5,
        metavar="SECONDS",
        help="pause after each step when an agent plays (default: 0.5)",
    )
    add_record_argument(parser, "you (or the agent)")
    parser.add_argument(
        "--replay",
        type=Path,
        metavar="FILE",
        help="write every complete episode played, step by step, as JSON lines for the replay "
        "viewer of web/ (format: entityrl/export/replay.py); an existing FILE is replaced",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        agent = _load_agent(args)
        kwargs = parse_kwargs(args.kwargs)
        if args.kwargs is None and agent is not None and agent.config.env.id == args.env:
            kwargs = dict(agent.config.env.kwargs)
        # An agent trained on stacked observations (env.stack) sees them stacked here too.
        stack = 1 if agent is None else agent.config.env.stack
        env = make_vec(args.env, 1, seed=args.seed, wrap=stacking(stack), **kwargs)
        if isinstance(env, MultiPlayerVecEnv):
            env, agent = _seated(env, agent, args), None
        elif args.seat is not None:
            raise ValueError(f"--seat: {args.env} is not a multi-player game")
        recording = None
        if args.record is not None:
            env = recording = recording_env(env, args.record, args.env, kwargs)
    except (KeyError, TypeError, ValueError) as error:
        # KeyError's str() adds quotes around the message; print the message itself.
        print(f"entityrl play: error: {error.args[0]}", file=sys.stderr)
        return USAGE_ERROR
    console = make_console(sys.stdout)
    with env:
        try:
            controller, delay = _controller(args, env, agent, console)
        except ValueError as error:
            print(f"entityrl play: error: {error}", file=sys.stderr)
            return USAGE_ERROR
        if args.replay is None:
            play(env, controller, console, steps=args.steps, delay=delay)
        else:
            from entityrl.export.replay import RecordingEnv

            try:
                # As `entityrl eval --replay` (atomic_write), missing folders are made.
                args.replay.parent.mkdir(parents=True, exist_ok=True)
                out = open(args.replay, "w")  # noqa: SIM115 (closed by the with below)
            except OSError as err:
                print(
                    f"entityrl play: error: --replay: cannot write {str(args.replay)!r}: "
                    f"{err.strerror or err}",
                    file=sys.stderr,
                )
                return USAGE_ERROR
            # Each episode is written as it ends: those finished before a Ctrl-C stay in FILE.
            with out:
                replay = RecordingEnv(env, out, {"id": args.env, "kwargs": kwargs})
                # RecordingEnv passes all but reset() and act() on to the environment it wraps.
                play(replay, controller, console, steps=args.steps, delay=delay)  # type: ignore[arg-type]
            console.print(
                f"wrote {replay.episodes} complete episodes for the replay viewer into "
                f"{args.replay}",
                soft_wrap=True,
            )
    if recording is not None:
        # Unwrapped, so that the path can be copied whole.
        console.print(
            f"recorded {recording.writer.episodes} complete episodes into {args.record}",
            soft_wrap=True,
        )
    return 0


def _load_agent(args: argparse.Namespace) -> Agent | None:
    """The agent of ``--agent`` (None without it); ValueError for conflicting options or a
    checkpoint that cannot be read."""
    if args.agent is None:
        if args.agent_actions is not None:
            raise ValueError("--agent-actions needs --agent (the agent that takes those actions)")
        return None
    if args.random_agent:
        raise ValueError("choose one of --agent and --random-agent")
    import torch

    from entityrl.training.agent import load_agent

    # One row per step: more threads only wait on each other.
    torch.set_num_threads(1)
    return load_agent(args.agent, seed=args.seed)


def _seated(env: MultiPlayerVecEnv, agent: Agent | None, args: argparse.Namespace) -> OneSeat:
    """The seat of a multi-player game that the controller plays; ``agent`` (or random
    moves) plays the others."""
    from entityrl.play.seat import OneSeat
    from entityrl.training.players import NetworkPlayer, RandomPlayer

    seat = args.seat if args.seat is not None else env.players[0]
    if seat not in env.players:
        raise ValueError(f"--seat: unknown player {seat!r}; {args.env}'s players: {env.players}")
    if args.agent_actions is not None:
        raise ValueError("--agent-actions: in a multi-player game the agent plays other seats")
    if agent is None:
        others: Player = RandomPlayer(env.action_space, args.seed)
    else:
        agent.check_env(env)
        others = NetworkPlayer(agent.net, agent.generator)
    return OneSeat(env, env.players.index(seat), others)


def _controller(
    args: argparse.Namespace, env: VecEnv, agent: Agent | None, console: Console
) -> tuple[Controller, float]:
    """Who acts, and the pause after each step."""
    if args.random_agent:
        return RandomPolicy(env.action_space, seed=args.seed), args.delay
    if agent is None:
        # A person sets the pace by answering; no pause needed.
        return HumanPlayer(console, env.obs_space, env.action_space, seed=args.seed), 0.0
    agent.check_env(env)
    if args.agent_actions is None:
        return agent, args.delay
    names = [name.strip() for name in args.agent_actions.split(",") if name.strip()]
    unknown = [name for name in names if name not in env.action_space]
    if unknown or not names:
        raise ValueError(
            f"--agent-actions: expected names of {args.env}'s actions "
            f"({', '.join(env.action_space)}), got {args.agent_actions!r}"
        )
    person = HumanPlayer(console, env.obs_space, env.action_space, seed=args.seed)
    return SharedControl(agent, person, names), args.delay


class SharedControl:
    """An agent takes some actions and a person the others, in the same step.

    The person is asked only when one of their actions has actors this step; steps that are
    the agent's alone go by like watched ones.
    """

    def __init__(
        self, agent: Controller, person: Controller, agent_actions: Collection[str]
    ) -> None:
        self.agent = agent
        self.person = person
        self.agent_actions = set(agent_actions)

    def act(self, obs: VecObs) -> dict[str, RaggedArray]:
        chosen = self.agent.act(obs)
        persons = {
            name: mask for name, mask in obs.action_masks.items() if name not in self.agent_actions
        }
        if any(mask.actors.items for mask in persons.values()):
            # The person sees only the choices that are theirs to make.
            return {
                **self.person.act(dataclasses.replace(obs, action_masks=persons)),
                **{name: chosen[name] for name in self.agent_actions},
            }
        return {name: chosen[name] for name in self.agent_actions}


def parse_kwargs(text: str | None) -> dict[str, Any]:
    """The ``--kwargs`` JSON object as a dict (empty if not given); a ValueError that says what
    is wrong otherwise."""
    if text is None:
        return {}
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


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:  # also rejects nan
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0, got {text!r}")
    return value
