"""Self-play on two-player zero-sum matrix games whose only equilibrium is mixed and not
uniform: the NashConv of the learned strategies, per game and seed.

- the shipped MatrixGame config (``selfplay.mode=magnet``) on every game of
  :func:`entityrl.training.matrix_games.equilibrium_suite` (2x2 and 3x3, seed 0);
- the snapshot pool (``selfplay.mode=pool``) with the entropy weight that puts
  RockPaperScissorsDuel at its uniform equilibrium (``ppo.ent_coef=1``), the same steps, on
  the first ``--pool-games`` games and the first seed;
- RockPaperScissorsDuel with its shipped config (pool).

usage: python benchmarks/matrix_equilibria.py [--seeds 1 2 3] [--games 6] [--pool-games 1]
       [--runs DIR] [--only 1 3] [--set KEY=VALUE ...] [--screen-average 0.02 ...] [--no-rps]
       [--write]

With ``selfplay.average_rate`` the saved agent is the average and the last iterate's NashConv is
printed beside it; with ``selfplay.opponent_mix=nash`` (``--set selfplay.mode=pool ...``), the
NashConv of the pool's Nash mixture; ``--screen-average`` scores averages at other rates kept
beside each run.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from _peer import machine
from results import replace_section

from entityrl.algorithms.self_play.average import ParameterAverage
from entityrl.algorithms.self_play.meta_game import saved_mixture
from entityrl.nn.rogue_net import RogueNet
from entityrl.training import Callback, Trainer, load_agent, load_config, train
from entityrl.training.agent import make_eval_env
from entityrl.training.checkpoint import load_checkpoint
from entityrl.training.matrix_games import (
    NashConv,
    equilibrium_suite,
    matrix_game_nash_conv,
    mixture_nash_conv,
)

QUIET = ["log.tensorboard=false", "log.progress=false", "torch_threads=1"]
TARGET = 0.02
POOL = ["selfplay.mode=pool", "ppo.ent_coef=1.0", "selfplay.snapshot_every=2048",
        "selfplay.swap_every=1024"]  # fmt: skip


class ScreenAverages(Callback):
    """Polyak averages of a network's parameters at several rates, kept beside a run (after
    every update, as ``selfplay.average_rate`` keeps its own) without changing it: of the
    learner's, or of the network ``source`` gives (e.g. NFSP's average policy)."""

    def __init__(
        self, rates: list[float], source: Callable[[Trainer], RogueNet] | None = None
    ) -> None:
        self.rates = rates
        self.source = source or (lambda trainer: trainer.net)
        self.averages: dict[float, ParameterAverage] = {}

    def on_iteration(self, trainer: Trainer, metrics: dict[str, float]) -> None:
        net = self.source(trainer)
        if not self.averages:
            self.averages = {rate: ParameterAverage(net, rate) for rate in self.rates}
        for average in self.averages.values():
            average.follow(net)


def trained_nash_conv(
    env_id: str, run_dir: str, overrides: list[str], screen: list[float] | None = None
) -> tuple[NashConv, float]:
    """Train ``env_id`` with its shipped config and ``overrides``; the learned strategies'
    NashConv and the wall time in seconds. With ``selfplay.average_rate`` the agent is the
    average; the last iterate's NashConv (and the ``screen`` averages') are printed."""
    started = time.time()
    screened = ScreenAverages(screen or [])
    train(env_id, overrides=[f"log.run_dir={run_dir}", *QUIET, *overrides], callbacks=[screened])
    seconds = time.time() - started
    agent = load_agent(run_dir)
    with make_eval_env(agent) as env:
        result = matrix_game_nash_conv(agent.net, env, env_id)
        learner = load_checkpoint(run_dir)["selfplay"][0].get("learner")
        if learner is not None or screened.averages:
            others = {f"screen {r}": a.net for r, a in screened.averages.items()}
            if learner is not None:
                net = copy.deepcopy(agent.net)
                net.load_state_dict(learner)
                others["last iterate"] = net
            values = {k: matrix_game_nash_conv(n, env, env_id).total for k, n in others.items()}
            print(
                f"  agent {result.total:.4f}; "
                + ", ".join(f"{k} {v:.4f}" for k, v in values.items()),
                flush=True,
            )
        nets, weights = saved_mixture(agent.net, load_checkpoint(run_dir))
        if nets:  # selfplay.opponent_mix=nash
            mixed = mixture_nash_conv(nets, weights, env, env_id)
            print(
                f"  agent {result.total:.4f}; the pool's Nash mixture ({len(nets)} snapshots) "
                f"{mixed.total:.4f}",
                flush=True,
            )
        return result, seconds


def suite_table(
    seeds: list[int], games: int, pool_games: int, tmp: str, args: argparse.Namespace
) -> tuple[list[str], list[float]]:
    rows, shipped = [], []
    for index, (payoff, equilibrium) in enumerate(equilibrium_suite(games)):
        if args.only is not None and index not in args.only:
            continue
        runs = [("magnet (shipped)", seed, []) for seed in seeds]
        if index < pool_games:
            runs.append(("pool, ppo.ent_coef=1", seeds[0], POOL))
        for mode, seed, extra in runs:
            run_dir = f"{tmp}/game{index}-{mode.split()[0]}-{seed}"
            overrides = [f"env.kwargs={{game: {index}}}", f"seed={seed}", *args.set, *extra]
            result, seconds = trained_nash_conv(
                "MatrixGame", run_dir, overrides, args.screen_average
            )
            if not extra:
                shipped.append(result.total)
            eq = " / ".join(
                " ".join(f"{p:.3f}" for p in s) for s in (equilibrium.row, equilibrium.column)
            )
            rows.append(
                f"| {index} | {payoff.tolist()} | {eq} | {mode} | {seed} | {result.total:.4f} | "
                f"{result.half:.4f} | {seconds:.0f} |"
            )
            print(rows[-1], flush=True)
    return rows, shipped


def rps_table(seeds: list[int], tmp: str) -> list[str]:
    rows = []
    for seed in seeds:
        result, seconds = trained_nash_conv(
            "RockPaperScissorsDuel", f"{tmp}/rps-{seed}", [f"seed={seed}"]
        )
        rows.append(
            f"| shipped (pool, ppo.ent_coef=1) | {seed} | {result.half:.4f} | {seconds:.0f} |"
        )
        print(rows[-1], flush=True)
    return rows


def interval(values: list[float]) -> str:
    """Median and range."""
    return f"median {statistics.median(values):.4f}, range {min(values):.4f}-{max(values):.4f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", nargs="*", type=int, default=[1, 2, 3])
    parser.add_argument("--games", type=int, default=6, help="games of the suite")
    parser.add_argument(
        "--pool-games", type=int, default=1, help="games also trained with mode=pool"
    )
    parser.add_argument("--runs", type=Path, help="keep the runs in this directory")
    parser.add_argument("--only", nargs="*", type=int, help="run only these games of the suite")
    parser.add_argument("--set", nargs="*", default=[], help="MatrixGame overrides, KEY=VALUE")
    parser.add_argument(
        "--screen-average",
        nargs="*",
        type=float,
        default=[],
        help="also score Polyak averages of the parameters at these rates (kept beside the run)",
    )
    parser.add_argument("--no-rps", action="store_true", help="skip RockPaperScissorsDuel")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        runs = str(args.runs or tmp)
        Path(runs).mkdir(parents=True, exist_ok=True)
        suite, shipped = suite_table(args.seeds, args.games, args.pool_games, runs, args)
        rps = [] if args.no_rps else rps_table(args.seeds, runs)
    config = load_config("MatrixGame")
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    seeds = " ".join(map(str, args.seeds))
    body = "\n".join(
        [
            f"Command: `python benchmarks/matrix_equilibria.py --seeds {seeds} --games "
            f"{args.games} --pool-games {args.pool_games} --write`",
            "",
            f"Machine: 2-core shared box ({machine()}); torch threads 1; load at the end: {load}.",
            "",
            f"The suite: `equilibrium_suite({args.games})` (payoffs uniform in [-1, 1], 2x2 and "
            "3x3 in turn, kept if the only equilibrium plays every choice with probability >= "
            "0.1 and is >= 0.1 from uniform). NashConv: the sum of both seats' best-response "
            "gains against the learned strategies (exact; 0 at the equilibrium); NashConv/2 is "
            f"OpenSpiel's exploitability. Shipped config: {config.total_timesteps:,} steps, "
            f"selfplay.magnet_coef={config.selfplay.magnet_coef}, "
            f"magnet_rate={config.selfplay.magnet_rate}, {config.rollout.num_envs} games x "
            f"{config.rollout.steps} steps per rollout. Target: NashConv <= {TARGET} on every "
            "game.",
            "",
            "| game | payoff | equilibrium (row / column) | mode | seed | NashConv | NashConv/2 "
            "| wall time (s) |",
            "|---|---|---|---|---|---|---|---|",
            *suite,
            "",
            f"Shipped config over {len(shipped)} runs: NashConv {interval(shipped)}; "
            f"{sum(v <= TARGET for v in shipped)} of {len(shipped)} runs <= {TARGET}.",
            "",
            "RockPaperScissorsDuel (exploitability = NashConv/2, what a best response wins):",
            "",
            "| config | seed | exploitability | wall time (s) |",
            "|---|---|---|---|",
            *rps,
        ]
    )
    print(body)
    if args.write:
        replace_section(
            "Matrix-game equilibria by self-play (benchmarks/matrix_equilibria.py)", body
        )


if __name__ == "__main__":
    main()
