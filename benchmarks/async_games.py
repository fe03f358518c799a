"""Asynchronous sampling of multi-player games (``rollout.mode=async`` with ``algo=selfplay``,
issue #31): samples/s against synchronous sampling on a slow game, and learning at equal steps.

Throughput: CoinDuel by self-play on the slow game wrapper (``SlowGame``: each step of a game
first waits ``--step-ms`` milliseconds, as a remote game engine keeps its caller waiting), the
shipped config but ``--games`` games x ``--rollout-steps`` steps per rollout. Sync mode with the
games in the training process (1 worker) and in N worker processes (the policy still acts in
the training process, one round trip to the workers per step), against async mode with N
workers (each plays its games for the whole rollout while the learner updates). Samples/s: the
median ``perf/sps`` of the iterations after the first.

Learning: CoinDuel's shipped config for ``--steps`` steps per seed, sync and async with
``--processes`` workers; each agent (sampled actions) then plays ``--games-eval`` games against
a uniformly random player, seats alternating. Reported: wins/draws/losses, the score
((wins + draws / 2) / games), and the run's wall time.

MA-POCA (``--poca``): GuardedExit's shipped config for ``--steps`` steps per seed, sync and
async; the group return of ``--games-eval`` evaluation games.

Each run is a Trainer in this process, one torch thread (``torch_threads=1``), the runs one
after another. Prints a markdown section for RESULTS.md.

usage: python benchmarks/async_games.py --throughput [--workers 2 4 8] [--step-ms 2]
           [--learner ppo.update_epochs=8]
       python benchmarks/async_games.py --learning [--seeds 1 2 3] [--steps 200000]
       python benchmarks/async_games.py --poca [--seeds 1 2 3] [--steps 150000]
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import torch

from entityrl.envs import make_vec
from entityrl.envs.slow import SlowGame
from entityrl.nn.rogue_net import RogueNet
from entityrl.training import Agent, Trainer, load_agent, load_config
from entityrl.training.match import MatchResult, load_opponent, play_group, play_match
from entityrl.training.players import NetworkPlayer

EVAL_SEED = 12345
QUIET = ["log.tensorboard=false", "log.progress=false", "torch_threads=1"]


def sps(run_dir: Path) -> float:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return statistics.median(row["perf/sps"] for row in rows[1:])


def throughput(args: argparse.Namespace, tmp: Path) -> list[str]:
    game = functools.partial(SlowGame, "CoinDuel", args.step_ms)
    samples = args.games * args.rollout_steps
    settings = [("sync", 1)] + [(mode, n) for n in args.workers for mode in ("sync", "async")]
    lines = [
        f"CoinDuel by self-play in `SlowGame` (every step waits {args.step_ms} ms), "
        f"{args.games} games x {args.rollout_steps} steps ({samples} samples of the learner's "
        f"seats) per rollout, {args.iterations} iterations, seed 1"
        + (f", learner overrides `{' '.join(args.learner)}`" if args.learner else "")
        + "; samples/s: the median `perf/sps` of the iterations after the first.",
        "",
        "| mode | workers | samples/s | vs sync, same workers |",
        "|---|---|---|---|",
    ]
    measured: dict[tuple[str, int], float] = {}
    for mode, workers in settings:
        run = tmp / f"tp-{mode}-{workers}"
        overrides = [
            *QUIET, "algo=selfplay", f"rollout.num_envs={args.games}",
            f"rollout.steps={args.rollout_steps}", f"rollout.processes={workers}",
            f"rollout.mode={mode}", f"total_timesteps={samples * args.iterations}",
            "seed=1", f"log.run_dir={run}", *args.learner,
        ]  # fmt: skip
        config = load_config("CoinDuel", overrides)
        Trainer(config, game).run()
        measured[mode, workers] = value = sps(run)
        sync = measured.get(("sync", workers))
        ratio = f"{value / sync:.2f}x" if mode == "async" and sync else ""
        lines.append(f"| {mode} | {workers} | {value:,.0f} | {ratio} |")
        print(lines[-1], flush=True)
    return lines


def match(player: NetworkPlayer, games: int) -> MatchResult:
    """``player`` against a random player in CoinDuel, seats alternating."""
    env = make_vec("CoinDuel", 50, seed=EVAL_SEED)
    return play_match(player, load_opponent("random", env, EVAL_SEED), env, games)


def row(seed: int, mode: str, result: MatchResult, games: int, seconds: str) -> str:
    score = (result.wins + result.draws / 2) / games
    return f"| {seed} | {mode} | {result.wins}/{result.draws}/{result.losses} | {score:.3f} | {seconds} |"


def cooperative(args: argparse.Namespace, tmp: Path) -> list[str]:
    """MA-POCA on GuardedExit, sync against async: the group return over evaluation games."""
    lines = [
        f"GuardedExit by MA-POCA, shipped config, {args.steps:,} steps (all players' rows), "
        f"{args.processes} worker processes, one torch thread; then the group return over "
        f"{args.games_eval} games (sampled actions, every seat the agent's) from seed {EVAL_SEED}.",
        "",
        "| seed | mode | group return | wall s |",
        "|---|---|---|---|",
    ]
    for seed in args.seeds:
        for mode in ("sync", "async"):
            agent, seconds = train_timed(
                "GuardedExit", mode, seed, args, tmp / f"coop-{mode}-{seed}"
            )
            with make_vec("GuardedExit", 50, seed=EVAL_SEED) as env:
                group = play_group(NetworkPlayer(agent.net, agent.generator), env, args.games_eval)
            lines.append(f"| {seed} | {mode} | {group.mean():.3f} | {seconds:.0f} |")
            print(lines[-1], flush=True)
    return lines


def train_timed(
    env: str, mode: str, seed: int, args: argparse.Namespace, run: Path
) -> tuple[Agent, float]:
    """``env``'s shipped config trained in rollout ``mode`` into ``run``: its agent and the
    seconds the training took."""
    overrides = [
        *QUIET, f"rollout.processes={args.processes}", f"rollout.mode={mode}",
        f"total_timesteps={args.steps}", f"seed={seed}", f"log.run_dir={run}",
    ]  # fmt: skip
    started = time.perf_counter()
    Trainer(load_config(env, overrides)).run()
    return load_agent(run, seed=0), time.perf_counter() - started


def learning(args: argparse.Namespace, tmp: Path) -> list[str]:
    lines = [
        f"CoinDuel by self-play, shipped config, {args.steps:,} steps of the learner's seats, "
        f"{args.processes} worker processes, one torch thread; then {args.games_eval} games "
        "(sampled actions) against a uniformly random player, seats alternating, from seed "
        f"{EVAL_SEED}. Score: (wins + draws / 2) / games.",
        "",
        "| seed | mode | W/D/L vs random | score | wall s |",
        "|---|---|---|---|---|",
    ]
    for seed in args.seeds:
        # The network a run of this seed starts from (the trainer seeds torch with it).
        config = load_config("CoinDuel", QUIET)
        with make_vec("CoinDuel", 1) as env:
            torch.manual_seed(seed)
            net = RogueNet(env.obs_space, env.action_space, config.net)
        generator = torch.Generator()
        generator.manual_seed(0)
        untrained = match(NetworkPlayer(net, generator), args.games_eval)
        lines.append(row(seed, "untrained", untrained, args.games_eval, ""))
        print(lines[-1], flush=True)
        for mode in ("sync", "async"):
            agent, seconds = train_timed("CoinDuel", mode, seed, args, tmp / f"learn-{mode}-{seed}")
            result = match(NetworkPlayer(agent.net, agent.generator), args.games_eval)
            lines.append(row(seed, mode, result, args.games_eval, f"{seconds:.0f}"))
            print(lines[-1], flush=True)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--throughput", action="store_true")
    parser.add_argument("--learning", action="store_true")
    parser.add_argument("--poca", action="store_true", help="MA-POCA on GuardedExit")
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--step-ms", type=float, default=2.0)
    parser.add_argument("--games", type=int, default=64)
    parser.add_argument("--rollout-steps", type=int, default=16)
    parser.add_argument("--iterations", type=int, default=6)
    parser.add_argument(
        "--learner", nargs="*", default=[], help="overrides, e.g. ppo.update_epochs=8"
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--games-eval", type=int, default=400)
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # the async runs' note that they do not resume bit-exactly
    with tempfile.TemporaryDirectory() as tmp:
        if args.throughput:
            print("\n".join(throughput(args, Path(tmp))))
        if args.learning:
            print("\n".join(learning(args, Path(tmp))))
        if args.poca:
            print("\n".join(cooperative(args, Path(tmp))))


if __name__ == "__main__":
    main()
