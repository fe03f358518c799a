"""``entityrl eval CHECKPOINT_OR_RUN_DIR``: play complete episodes with a trained agent and
report the mean and spread of their return, length and the environment's own metrics."""

from __future__ import annotations

import argparse
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from entityrl.cli.arguments import (
    USAGE_ERROR,
    add_record_argument,
    error_line,
    positive_int,
    recording_env,
)
from entityrl.training.agent import DEFAULT_MAX_EPISODE_STEPS, Evaluation
from entityrl.training.threads import INFERENCE_THREADS

SAMPLED = "sampled actions"
"""How ``entityrl eval`` labels its evaluation of actions sampled from the policy."""
GREEDY = "most probable actions (greedy, as Stable-Baselines3 evaluates)"
"""How it labels its evaluation of every actor's most probable action."""

APPROXIMATE_STEPS = 100_000
"""``--br-steps`` by default: each seat's response trains this many steps."""
APPROXIMATE_GAMES = 2000
"""``--episodes`` by default with ``--approximate``: games per match."""
APPROXIMATE_HINT = (
    "if the game is zero-sum, add --approximate to estimate it with learned best responses (a "
    "fresh learner trained against the agent in each seat)"
)

if TYPE_CHECKING:
    from entityrl.env import VecEnv
    from entityrl.nn.rogue_net import RogueNet
    from entityrl.training.agent import Agent


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "eval",
        help="evaluate a trained agent over complete episodes",
        description=(
            "Load the agent of a checkpoint (a checkpoint.pt file or the run directory holding "
            "it), let it play complete episodes of the environment it was trained on (built "
            "from the run's config), and print the mean, standard deviation, minimum and "
            "maximum of every episode metric: for a single-player environment with actions "
            "sampled from the policy (as it trained) and with every actor's most probable "
            "action (greedy, as Stable-Baselines3 evaluates), each table labelled."
        ),
    )
    parser.add_argument("checkpoint", metavar="CHECKPOINT_OR_RUN_DIR")
    parser.add_argument(
        "--episodes",
        type=positive_int,
        default=None,
        metavar="N",
        help="episodes to play (default: 100; with --exploitability --approximate, games per "
        f"match, default {APPROXIMATE_GAMES:,})",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        metavar="S",
        help="seed of the environments and of sampling (default: 0)",
    )
    parser.add_argument(
        "--deterministic",
        action="store_true",
        help="take every actor's most probable action (greedy) only; without it both "
        "sampled and most probable actions are evaluated (one of them with --record or "
        "--replay: sampled)",
    )
    parser.add_argument(
        "--num-envs",
        type=positive_int,
        default=16,
        metavar="K",
        help="environments played side by side (default: 16, at most --episodes)",
    )
    parser.add_argument(
        "--device",
        default="cpu",
        metavar="D",
        help="where the agent runs: cpu (default), cuda, cuda:N, mps or auto, whichever "
        "device it trained on",
    )
    parser.add_argument(
        "--max-steps",
        type=positive_int,
        default=DEFAULT_MAX_EPISODE_STEPS,
        metavar="T",
        help="give up on an episode that lasts longer than this "
        f"(default: {DEFAULT_MAX_EPISODE_STEPS:,})",
    )
    parser.add_argument(
        "--opponent",
        metavar="RUN|random|MODULE:FUNCTION",
        help="in a multi-player game, play a match against this opponent (a trained agent's "
        "run directory or checkpoint, uniformly random moves, or a scripted player) and report "
        "win/draw/loss rates, the Elo difference and the mean return per seat; --episodes "
        "counts games",
    )
    parser.add_argument(
        "--exploitability",
        action="store_true",
        help="in a two-player zero-sum matrix game (MatrixGame, RockPaperScissorsDuel) or a "
        "small OpenSpiel game (openspiel:kuhn_poker), report the exact NashConv of the agent's "
        "strategies in both seats (what best responses gain against them, added; 0 at an "
        "equilibrium) and NashConv/2 instead of playing; with --approximate, an estimate in any "
        "two-player zero-sum game",
    )
    parser.add_argument(
        "--approximate",
        action="store_true",
        help="with --exploitability, in any two-player zero-sum game (one too large for an "
        "exact best response, or not a matrix or OpenSpiel game): estimate NashConv by training "
        "a fresh learner against the frozen agent in each seat (--br-steps steps, the agent's "
        "own config) and playing it there (--episodes games per match); a lower bound of the "
        "true value, with 95%% intervals",
    )
    parser.add_argument(
        "--br-steps",
        type=positive_int,
        metavar="N",
        help=f"with --approximate: training steps of each seat's response (default: "
        f"{APPROXIMATE_STEPS:,})",
    )
    parser.add_argument(
        "--br-set",
        action="append",
        metavar="KEY=VALUE",
        help="with --approximate: change a setting of the responses' config (repeatable; "
        "ppo.ent_coef=0.01, net.d_model=64); by default the agent's own",
    )
    parser.add_argument(
        "--br-dir",
        type=Path,
        metavar="DIR",
        help="with --approximate: keep the responses' runs in DIR/response_<player> (default: "
        "a temporary directory, removed)",
    )
    parser.add_argument(
        "--seat",
        action="append",
        metavar="PLAYER",
        help="with --opponent: the player the agent plays (repeat for several, taken in turn "
        "game by game; default: every player in turn)",
    )
    add_record_argument(parser, "the agent")
    parser.add_argument(
        "--replay",
        type=Path,
        metavar="FILE",
        help="also write the evaluated episodes, step by step, as JSON lines for the replay "
        "viewer of web/ (format: entityrl/export/replay.py)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import torch

    try:
        check_approximate_flags(args)
    except ValueError as err:
        print(error_line("eval", str(err)), file=sys.stderr)
        return USAGE_ERROR
    if args.episodes is None:
        args.episodes = APPROXIMATE_GAMES if args.approximate else 100

    from entityrl.nn.device import DeviceError
    from entityrl.training.agent import AgentError, evaluate, load_agent, make_eval_env
    from entityrl.training.checkpoint import CheckpointError

    # Batches of a few rows gain nothing from more threads; on a busy machine they wait on
    # each other.
    torch.set_num_threads(INFERENCE_THREADS)
    try:
        agent = load_agent(
            args.checkpoint,
            device=args.device,
            deterministic=args.deterministic,
            seed=args.seed,
        )
        if args.exploitability:
            return report_exploitability(agent, args)
        env = make_eval_env(agent, min(args.num_envs, args.episodes), args.seed)
        recording = None
        if args.record is not None:
            env = recording = recording_env(
                env, args.record, agent.config.env.id, agent.config.env.kwargs
            )
        if args.opponent is not None or args.seat:
            with env:
                return run_match(agent, env, args)
        with env:
            if args.replay is None:
                result = evaluate(agent, env, args.episodes, args.max_steps)
            else:
                result = evaluate_replayed(agent, env, args)
        results = {GREEDY if args.deterministic else SAMPLED: result}
        if not args.deterministic and recording is None and args.replay is None:
            results[GREEDY] = evaluate_greedy(agent, args)
    except (CheckpointError, AgentError, DeviceError, ValueError) as err:
        print(f"entityrl eval: error: {err}", file=sys.stderr)
        return USAGE_ERROR
    for mode, result in results.items():
        print(
            f"{agent.config.env.id} agent trained {agent.step:,} steps ({agent.path}): "
            f"{result.episodes} episodes, {mode}, seed {args.seed}"
        )
        print(format_table(result))
    if recording is not None:
        print(f"recorded {recording.writer.episodes} complete episodes into {args.record}")
    return 0


def evaluate_greedy(agent: Agent, args: argparse.Namespace) -> Evaluation:
    """The agent's most probable actions over the same episodes (fresh environments, the same
    seed) as its sampled ones."""
    from entityrl.training.agent import evaluate, make_eval_env

    agent.deterministic = True
    with make_eval_env(agent, min(args.num_envs, args.episodes), args.seed) as env:
        return evaluate(agent, env, args.episodes, args.max_steps)


def run_match(agent: Agent, env: VecEnv, args: argparse.Namespace) -> int:
    """``--opponent``: a match of the agent against an opponent in a multi-player game."""
    from entityrl.env.multiplayer_vec import MultiPlayerVecEnv
    from entityrl.training.match import load_opponent, play_match
    from entityrl.training.players import NetworkPlayer, ScriptedPlayer

    if not isinstance(env, MultiPlayerVecEnv):
        raise ValueError(
            f"--opponent and --seat need a multi-player game; {agent.config.env.id} has one player"
        )
    if args.opponent is None:
        raise ValueError("--seat needs --opponent (whom the agent plays against)")
    unknown = [p for p in args.seat or [] if p not in env.players]
    if unknown:
        raise ValueError(f"--seat: unknown players {unknown}; the game's players: {env.players}")
    seats = None if not args.seat else [env.players.index(p) for p in args.seat]
    opponent = load_opponent(args.opponent, env, args.seed, args.deterministic)
    if isinstance(opponent, ScriptedPlayer):
        check_scripted(opponent.function, args.opponent)
    player = NetworkPlayer(agent.net, agent.generator, deterministic=args.deterministic)
    result = play_match(player, opponent, env, args.episodes, seats, args.max_steps)
    print(
        f"{agent.config.env.id} agent trained {agent.step:,} steps ({agent.path}) against "
        f"{args.opponent}: {result.summary()}"
    )
    return 0


def check_approximate_flags(args: argparse.Namespace) -> None:
    """``--approximate`` belongs to ``--exploitability``, the ``--br-*`` flags to it."""
    if args.approximate and not args.exploitability:
        raise ValueError("--approximate estimates --exploitability: give both")
    if args.approximate and args.deterministic:
        raise ValueError(
            "--approximate scores the agent's strategy, its sampled actions, as the responses "
            "train against them: it takes no --deterministic"
        )
    given = [
        flag
        for flag, value in [("--br-steps", args.br_steps), ("--br-set", args.br_set),
                            ("--br-dir", args.br_dir)]
        if value is not None
    ]  # fmt: skip
    if given and not args.approximate:
        raise ValueError(
            f"{', '.join(given)} set the learned best responses of --exploitability "
            "--approximate: give it too"
        )


def report_exploitability(agent: Agent, args: argparse.Namespace) -> int:
    """``--exploitability``: the exact NashConv of the agent's strategies (a matrix game's, or
    an OpenSpiel game's through OpenSpiel's best responses); with ``--approximate``, one
    estimated with learned best responses."""
    others = [
        flag
        for flag, given in [
            ("--opponent", args.opponent is not None),
            ("--seat", bool(args.seat)),
            ("--record", args.record is not None),
            ("--replay", args.replay is not None),
        ]
        if given
    ]
    if others:
        raise ValueError(
            f"--exploitability is computed from the agent's strategies, without playing: it "
            f"takes no {', '.join(others)}"
        )
    if args.approximate:
        return report_approximate(agent, args)
    env_id = agent.config.env.id
    if env_id.startswith("openspiel:"):
        from entityrl.interop.openspiel import exploitability, mixture_exploitability

        # Its refusals of a game too large or of simultaneous moves point to --approximate.
        half = exploitability(agent, env_id, **agent.config.env.kwargs)
        print(
            f"{env_id} agent trained {agent.step:,} steps ({agent.path}): exploitability "
            f"(NashConv/2, OpenSpiel's exact best responses) {half:.4f}; NashConv {2 * half:.4f}"
        )
        nets, weights = pool_mixture(agent)
        if nets:  # selfplay.opponent_mix=nash: what policy-space response oracles output
            mixed = mixture_exploitability(nets, weights, env_id, **agent.config.env.kwargs)
            print(f"{mixture_label(nets)}: exploitability {mixed:.4f}; NashConv {2 * mixed:.4f}")
        return 0
    from entityrl.env.multiplayer_vec import MultiPlayerVecEnv
    from entityrl.training.agent import make_eval_env
    from entityrl.training.matrix_games import (
        NotAMatrixGameError,
        matrix_game_nash_conv,
        mixture_nash_conv,
    )

    with make_eval_env(agent, 1, args.seed) as env:
        try:
            result = matrix_game_nash_conv(agent.net, env, env_id)
        except NotAMatrixGameError as err:
            if not isinstance(env, MultiPlayerVecEnv) or len(env.players) != 2:
                raise
            raise ValueError(f"{err}; {APPROXIMATE_HINT}") from None
        print(
            f"{env_id} agent trained {agent.step:,} steps ({agent.path}): NashConv "
            f"{result.total:.4f} (row player's best response gains {result.row_gain:.4f}, "
            f"column player's {result.column_gain:.4f}); NashConv/2 {result.half:.4f}"
        )
        nets, weights = pool_mixture(agent)
        if nets:
            mixed = mixture_nash_conv(nets, weights, env, env_id)
            print(f"{mixture_label(nets)}: NashConv {mixed.total:.4f}; NashConv/2 {mixed.half:.4f}")
    return 0


def pool_mixture(agent: Agent) -> tuple[list[RogueNet], list[float]]:
    """The pool's Nash mixture of a self-play run with selfplay.opponent_mix=nash (none for
    other runs): its snapshots as networks and their weights."""
    from entityrl.algorithms.self_play.meta_game import saved_mixture
    from entityrl.training.checkpoint import load_checkpoint

    assert agent.path is not None, "a loaded agent has its checkpoint"
    return saved_mixture(agent.net, load_checkpoint(agent.path))


def mixture_label(nets: list[RogueNet]) -> str:
    return f"the pool's Nash mixture ({len(nets)} snapshots, one drawn per game)"


def report_approximate(agent: Agent, args: argparse.Namespace) -> int:
    """``--exploitability --approximate``: NashConv estimated with learned best responses
    (:mod:`entityrl.training.best_response`), a line per seat as its response trains."""
    from entityrl.training.best_response import approximate_nash_conv

    steps = args.br_steps or APPROXIMATE_STEPS
    print(
        f"{agent.config.env.id} agent trained {agent.step:,} steps ({agent.path}): "
        f"approximate exploitability, a learned best response per seat ({steps:,} steps each), "
        f"{args.episodes:,} games per match, seed {args.seed}",
        flush=True,
    )
    result = approximate_nash_conv(
        agent,
        steps,
        args.episodes,
        seed=args.seed,
        overrides=args.br_set or (),
        work_dir=args.br_dir,
        num_envs=args.num_envs,
        train_device=args.device,
        progress=True,
        report=lambda line: print(line, flush=True),
        max_steps=args.max_steps,
    )
    print(result.summary())
    return 0


def check_scripted(function: Callable[..., Any], spec: str) -> None:
    """A scripted opponent is called with one Observation. One that cannot be is refused
    before the match: called inside the match loop, it would fail there with a TypeError
    whose traceback is entityrl's."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return  # a callable that does not describe its parameters: the match will tell
    try:
        signature.bind(None)
    except TypeError:
        name = getattr(function, "__name__", type(function).__name__)
        raise ValueError(
            f"--opponent {spec}: expected a function of one argument (the player's "
            f"Observation), got {name}{signature}"
        ) from None


def evaluate_replayed(agent: Agent, env: VecEnv, args: argparse.Namespace) -> Evaluation:
    """:func:`evaluate`, writing the episodes for the replay viewer to ``args.replay``
    (through a temporary file)."""
    from entityrl.export.replay import RecordingEnv
    from entityrl.training.agent import evaluate
    from entityrl.training.checkpoint import atomic_write

    env_config = {"id": agent.config.env.id, "kwargs": dict(agent.config.env.kwargs)}
    result: list[Evaluation] = []

    def play(out: IO[str]) -> None:
        recording = RecordingEnv(env, out, env_config)
        result.append(evaluate(agent, recording, args.episodes, args.max_steps))  # type: ignore[arg-type]

    atomic_write(args.replay, play, mode="w")
    return result[0]


def format_table(result: Evaluation) -> str:
    """One line per metric (return and length first): mean, std, min, max, episodes counted."""
    first = ["episode_return", "episode_length"]
    names = [n for n in first if n in result.metrics] + sorted(
        n for n in result.metrics if n not in first
    )
    width = max(len("metric"), *(len(n) for n in names))
    header = f"{'metric':<{width}}  {'mean':>10}  {'std':>10}  {'min':>10}  {'max':>10}  episodes"
    lines = [header]
    for name in names:
        values = result.metrics[name]
        stats = (values.mean(), values.std(), values.min(), values.max())
        cells = "  ".join(f"{_number(v):>10}" for v in stats)
        lines.append(f"{name:<{width}}  {cells}  {values.shape[0]:>8}")
    return "\n".join(lines)


def _number(value: np.floating) -> str:
    return f"{float(value):.4g}"
