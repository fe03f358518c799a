"""``entityrl survival``: check a survival world config and measure how hard its tasks are.

- ``entityrl survival check WORLD``: validate a config (a preset name or a YAML file) and
  summarize the world it defines.
- ``entityrl survival metrics WORLD``: TTMN, TTMX and goal difficulty levels of its tasks under
  a uniformly random policy, measured (Monte-Carlo) and estimated by the paper's Eqs. 8-10.
- ``entityrl survival pic WORLD``: policy information capacity of its reward modes (and of its
  goal levels with ``--goals``) under random linear policies.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence

from entityrl.cli.arguments import USAGE_ERROR, error_line, positive_int
from entityrl.envs.survival.actions import ACTION_MODES
from entityrl.envs.survival.config import SurvivalConfigError, load_config
from entityrl.envs.survival.metrics import (
    LEVEL_ORDERS,
    TaskDifficulty,
    policy_information_capacity,
    task_difficulty,
)
from entityrl.envs.survival.observe import OBSERVATION_MODES
from entityrl.envs.survival.rules import Rules
from entityrl.envs.survival.task_times import TaskEstimate, estimate_task_times


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "survival",
        help="check survival world configs and measure task difficulty (TTMN/TTMX, PIC)",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="survival_command", metavar="COMMAND", required=True)

    check = commands.add_parser("check", help="validate a world config and summarize it")
    _world_argument(check)
    check.set_defaults(func=run_check)

    metrics = commands.add_parser(
        "metrics", help="TTMN, TTMX and goal levels of the world's tasks (random policy)"
    )
    _world_argument(metrics)
    metrics.add_argument(
        "--task",
        action="append",
        default=None,
        help="a task of the config (repeatable; default: all)",
    )
    metrics.add_argument(
        "--episodes", type=positive_int, default=500, help="random episodes (default 500)"
    )
    metrics.add_argument(
        "--threshold", type=_fraction, default=0.9, help="TTMX threshold th (default 0.9)"
    )
    metrics.add_argument(
        "--levels", type=positive_int, default=4, help="goal difficulty levels (default 4)"
    )
    metrics.add_argument(
        "--max-steps",
        type=positive_int,
        default=500,
        help="longest episode measured (default 500)",
    )
    metrics.add_argument(
        "--life-limit",
        type=positive_int,
        default=None,
        help="satiety/thirst limit (default: --max-steps)",
    )
    metrics.add_argument(
        "--actions", choices=ACTION_MODES, default="full", help="action space (default full)"
    )
    _level_order_argument(metrics)
    metrics.add_argument("--seed", type=int, default=0)
    metrics.set_defaults(func=run_metrics)

    pic = commands.add_parser(
        "pic", help="policy information capacity of the reward modes (random linear policies)"
    )
    _world_argument(pic)
    pic.add_argument(
        "--policies", type=positive_int, default=32, help="random policies (default 32)"
    )
    pic.add_argument(
        "--episodes", type=positive_int, default=32, help="episodes per policy (default 32)"
    )
    pic.add_argument(
        "--bins",
        type=positive_int,
        default=64,
        help="return bins B, more than --episodes (the paper's B > M; default 64)",
    )
    pic.add_argument(
        "--life-limit",
        type=positive_int,
        default=None,
        help="satiety/thirst limit (default: the config's)",
    )
    pic.add_argument(
        "--max-steps", type=positive_int, default=1000, help="longest episode (default 1000)"
    )
    pic.add_argument(
        "--observation",
        choices=[m for m in OBSERVATION_MODES if m != "entities"],
        default="nearest1",
        help="fixed-vector observation the policies read (default nearest1)",
    )
    pic.add_argument(
        "--goals",
        action="store_true",
        help="also the PIC of each task's goal levels (deadlines from a random-policy metrics run)",
    )
    pic.add_argument(
        "--levels", type=positive_int, default=4, help="goal levels with --goals (default 4)"
    )
    pic.add_argument(
        "--threshold", type=_fraction, default=0.9, help="TTMX threshold with --goals (default 0.9)"
    )
    _level_order_argument(pic)
    pic.add_argument("--seed", type=int, default=0)
    pic.set_defaults(func=run_pic)


def _world_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "world", metavar="WORLD", help="a preset name (DayAndNight, FourSeason) or a YAML file"
    )


def _level_order_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--level-order",
        choices=LEVEL_ORDERS,
        default="paper",
        help="goal level numbering: paper (level 1 = TTMN, the tightest deadline) or "
        "easiest_first (level 1 = TTMX) (default paper)",
    )


# ---------------------------------------------------------------------------- commands
def run_check(args: argparse.Namespace) -> int:
    try:
        rules = Rules(load_config(args.world))
    except SurvivalConfigError as err:
        return _usage_error(err)
    cfg = rules.config
    print(f"{cfg.name}: valid")
    print(f"  map {rules.width}x{rules.height}, terrain: {', '.join(rules.terrain_names)}")
    print(f"  creatures: {', '.join(rules.creatures.names)}")
    print(f"  items: {', '.join(rules.items.names)}")
    print(f"  recipes: {', '.join(rules.items.names[o] for o in rules.recipes.outputs) or 'none'}")
    print(f"  buffs: {', '.join(rules.buffs.names) or 'none'}")
    meters = [m for m, used in zip(rules.meter_names, rules.meters_used, strict=True) if used]
    print(f"  meters: {', '.join(meters)}")
    print(f"  life limit {cfg.agent.life_limit}, horizon {cfg.horizon}")
    print(f"  tasks: {', '.join(f'{n} ({e})' for n, e in cfg.tasks.items()) or 'none'}")
    return 0


def run_metrics(args: argparse.Namespace) -> int:
    try:
        results = task_difficulty(
            args.world,
            args.task,
            episodes=args.episodes,
            threshold=args.threshold,
            levels=args.levels,
            max_steps=args.max_steps,
            life_limit=args.life_limit,
            actions=args.actions,
            order=args.level_order,
            seed=args.seed,
        )
        estimates = estimate_task_times(
            args.world,
            args.task,
            actions=args.actions,
            threshold=args.threshold,
            seed=args.seed,
        )
    except (SurvivalConfigError, KeyError, ValueError) as err:
        return _usage_error(err)
    life_limit = args.life_limit if args.life_limit is not None else args.max_steps
    print(
        f"{args.world}: uniformly random policy ({args.actions} actions), {args.episodes} "
        f"episodes of at most {args.max_steps} steps, life limit {life_limit}, "
        f"threshold th = {args.threshold}, goal levels in {args.level_order} order"
    )
    print(format_difficulty(results, args.max_steps))
    print(
        f"\nthe paper's estimates (Eqs. 8-10; p* = 1/{estimates[0].choices if estimates else '-'})"
    )
    print(format_estimates(estimates))
    return 0


def format_estimates(estimates: Sequence[TaskEstimate]) -> str:
    """The table of the paper's estimators: one row per task."""
    rows = [["task", "g(T)", "e(T)", "TTMN^ = E(t_T)", "TTMX^"]]
    for e in estimates:
        rows.append([e.task, str(e.g), f"{e.e:.1f}", f"{e.ttmn:.1f}", _steps(e.ttmx, 10_000)])
    return format_table(rows)


def format_difficulty(results: Sequence[TaskDifficulty], max_steps: int) -> str:
    """The metrics table: one row per task."""
    rows = [["task", "event", "done", "TTMN", "mean", "TTMX", "goal deadlines (level 1..n)"]]
    for r in results:
        deadlines = ", ".join(
            f"{d} ({100 * p:.0f}%)" for d, p in zip(r.deadlines, r.success, strict=True)
        )
        rows.append(
            [
                r.task,
                r.event,
                f"{100 * r.completed:.0f}%",
                _steps(r.ttmn, max_steps),
                _steps(r.mean, max_steps),
                _steps(r.ttmx, max_steps),
                deadlines or "-",
            ]
        )
    return format_table(rows)


def run_pic(args: argparse.Namespace) -> int:
    try:
        goals = None
        if args.goals:
            # Deadlines measured in the setting the policies play: same life limit, same actions.
            life_limit = args.life_limit or load_config(args.world).agent.life_limit
            difficulty = task_difficulty(
                args.world,
                threshold=args.threshold,
                levels=args.levels,
                max_steps=args.max_steps,
                life_limit=life_limit,
                actions="simple",
                order=args.level_order,
                seed=args.seed,
            )
            goals = {r.task: r.deadlines for r in difficulty if r.deadlines}
        report = policy_information_capacity(
            args.world,
            policies=args.policies,
            episodes=args.episodes,
            bins=args.bins,
            goals=goals,
            life_limit=args.life_limit,
            max_steps=args.max_steps,
            observation=args.observation,
            seed=args.seed,
        )
    except (SurvivalConfigError, KeyError, ValueError) as err:
        return _usage_error(err)
    print(
        f"{args.world}: {report.policies} random linear policies ({args.observation}, simple "
        f"actions) x {report.episodes} episodes, B = {report.bins} bins, mean episode length "
        f"{report.mean_length:.1f}"
    )
    rows = [["return", "PIC (nats)"]]
    rows += [[mode, f"{value:.4f}"] for mode, value in report.returns.items()]
    print(format_table(rows))
    if args.goals and not report.goals:
        print(
            "\nno goal levels: no task reached the threshold under random play; lower "
            "--threshold or raise --life-limit"
        )
    if report.goals:
        print()
        goal_rows = [["goal", "level", "deadline", "PIC (nats)"]]
        for task, deadlines in (goals or {}).items():
            for level, d in enumerate(deadlines, start=1):
                goal_rows.append([task, str(level), str(d), f"{report.goals[(task, d)]:.4f}"])
        print(format_table(goal_rows))
    return 0


# ---------------------------------------------------------------------------- formatting
def format_table(rows: Sequence[Sequence[str]]) -> str:
    """Rows of text as aligned columns (the first row is the header)."""
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _usage_error(err: Exception) -> int:
    """A world, task or option the command cannot use: one line, exit code 2 (as the other
    commands report a bad config)."""
    # A KeyError's message is its first argument (str() would add quotes).
    message = err.args[0] if isinstance(err, KeyError) else err
    print(error_line("survival", str(message)), file=sys.stderr)
    return USAGE_ERROR


def _steps(value: float, max_steps: int) -> str:
    if math.isinf(value):
        return f">{max_steps}"
    return f"{value:.0f}" if value == int(value) else f"{value:.1f}"


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan  # refused below, with the message a number out of range gets
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text}")
    return value
