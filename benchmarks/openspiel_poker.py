"""Self-play on OpenSpiel's Kuhn and Leduc poker, scored by exact exploitability.

Per game and seed: ``entityrl train openspiel:<game>`` with the shipped config (or
``--config``, plus ``--set`` overrides such as ``algo=...``), the exploitability of the
learner's policy (OpenSpiel's exact best responses, :func:`entityrl.interop.openspiel.
exploitability`) every ``--every`` steps, with the training's wall time (measurement time left
out). With ``selfplay.opponent_mix=nash``, also the exploitability of the pool's Nash mixture
(one snapshot drawn per game with the meta-game's weights, :func:`entityrl.interop.openspiel.
mixture_exploitability`: what policy-space response oracles output) and the steps of the
meta-game's games (outside the run's steps, inside its training time). In the same run, the
reference: OpenSpiel's own CFR+ (tabular, full tree traversals),
its exploitability after as many iterations as fit in comparable wall time.

Targets (issue #36): Kuhn <= 0.02, Leduc <= 0.3.

usage: python benchmarks/openspiel_poker.py [--games kuhn_poker leduc_poker] [--seeds 1 2 3]
       [--steps N] [--every N] [--config PATH] [--set KEY=VALUE ...] [--threads 1] [--write]
       [--no-cfr] [--section TITLE]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyspiel
import scipy.stats
import torch
from open_spiel.python.algorithms import cfr
from open_spiel.python.algorithms import exploitability as openspiel_exploitability

sys.path.insert(0, str(Path(__file__).parent))
from _peer import machine
from matrix_equilibria import ScreenAverages
from results import replace_section

from entityrl.algorithms.self_play.meta_game import mixture_members
from entityrl.interop.openspiel import exploitability, mixture_exploitability
from entityrl.nn.rogue_net import RogueNet
from entityrl.training import Callback, Trainer, load_config, train

QUIET = ["log.tensorboard=false", "log.progress=false"]
CFR_ITERATIONS = (1, 3, 10, 30, 100, 300, 1000)
SECTION = "OpenSpiel poker: self-play scored by exact exploitability"
NASH_MIXTURE = "pool's Nash mixture"
NFSP_AVERAGE = "NFSP average policy"
NFSP_FITTED = "NFSP fitted network"
TARGETS = {"kuhn_poker": 0.02, "leduc_poker": 0.3}


class ExploitabilityCurve(Callback):
    """Every ``every`` steps: (step, training seconds, exploitability of the learner); and of
    self-play's parameter average (``selfplay.average_rate``) and of the averages at the
    ``screen`` rates, kept here beside the run without changing it, in ``averages``."""

    def __init__(self, game: str, every: int, screen: tuple[float, ...] = ()) -> None:
        self.game = pyspiel.load_game(game)
        self.every = every
        self.next = every
        self.started = time.perf_counter()
        self.measuring = 0.0  # seconds spent measuring, left out of the training time
        self.points: list[tuple[int, float, float]] = []
        # With selfplay.mode=nfsp, of the average policy's network (the run's agent).
        self.screened = ScreenAverages(list(screen), screened_net)
        self.averages: list[dict[str, float]] = []  # per point: label -> exploitability
        self.meta_steps = 0  # the meta-game's steps (selfplay.opponent_mix=nash)

    def on_iteration(self, trainer: Trainer, metrics: dict[str, float]) -> None:
        self.screened.on_iteration(trainer, metrics)
        if trainer.step < self.next:
            return
        began = time.perf_counter()
        value = exploitability(trainer.net, self.game)
        self.points.append((trainer.step, began - self.started - self.measuring, value))
        nets = {f"screen {rate}": a.net for rate, a in self.screened.averages.items()}
        own = getattr(trainer.algorithm, "average", None)
        if own is not None:
            nets[f"average {own.rate}"] = own.net
        nfsp = getattr(trainer.algorithm, "nfsp", None)
        if nfsp is not None:  # selfplay.mode=nfsp: the average policy, the run's agent
            nets[NFSP_AVERAGE] = nfsp.agent
            if nfsp.smoothed is not None:  # the agent is its Polyak average: also the fitted
                nets[NFSP_FITTED] = nfsp.net
        self.averages.append({k: exploitability(net, self.game) for k, net in nets.items()})
        if getattr(trainer.algorithm, "meta_game", None) is not None:
            self.averages[-1][NASH_MIXTURE] = self.nash_mixture(trainer)
            self.meta_steps = trainer.algorithm.meta_game.steps
        self.measuring += time.perf_counter() - began
        self.next += self.every
        extra = "".join(f", {k} {v:.4f}" for k, v in self.averages[-1].items())
        print(f"  step {trainer.step:,}: exploitability {value:.4f}{extra}", flush=True)

    def nash_mixture(self, trainer: Trainer) -> float:
        """The exploitability of the pool's snapshots drawn with its Nash mixture's weights (those
        above 1e-4)."""
        pool = trainer.algorithm.pool
        nets, weights = mixture_members(trainer.net, pool.snapshots, pool.mixture)
        return mixture_exploitability(nets, weights, self.game)


def screened_net(trainer: Trainer) -> RogueNet:
    """The network whose parameters ``--screen-average`` averages: NFSP's average policy (the
    fitted network) with selfplay.mode=nfsp, else the learner."""
    nfsp = getattr(trainer.algorithm, "nfsp", None)
    return trainer.net if nfsp is None else nfsp.net


def interval(values: list[float]) -> str:
    """Mean +- the half width of its 95% t-interval."""
    mean = float(np.mean(values))
    if len(values) < 2:
        return f"{mean:.4f}"
    half = scipy.stats.t.ppf(0.975, len(values) - 1) * np.std(values, ddof=1) / len(values) ** 0.5
    return f"{mean:.4f} +- {half:.4f}"


def self_play(
    game: str, args: argparse.Namespace, tmp: str
) -> tuple[list[list[tuple[int, float, float]]], list[list[dict[str, float]]], list[int]]:
    """Per seed, the exploitability curve of one training run, its averages' (one dict a
    point), and its meta-game's steps."""
    curves, averages, meta_steps = [], [], []
    for seed in args.seeds:
        print(f"{game}, seed {seed}", flush=True)
        curve = ExploitabilityCurve(game, args.every, tuple(args.screen_average))
        overrides = [f"seed={seed}", f"log.run_dir={tmp}/{game}-{seed}",
                     f"torch_threads={args.threads}", *QUIET, *args.set]  # fmt: skip
        if args.steps:
            overrides.append(f"total_timesteps={args.steps}")
        train(f"openspiel:{game}", config=args.config, overrides=overrides, callbacks=[curve])
        curves.append(curve.points)
        averages.append(curve.averages)
        meta_steps.append(curve.meta_steps)
    return curves, averages, meta_steps


def cfr_reference(game: str) -> list[tuple[int, float, float]]:
    """OpenSpiel's CFR+: (iterations, seconds, exploitability of the average policy)."""
    loaded = pyspiel.load_game(game)
    solver = cfr.CFRPlusSolver(loaded)
    points, seconds, done = [], 0.0, 0
    for iterations in CFR_ITERATIONS:
        began = time.perf_counter()
        for _ in range(iterations - done):
            solver.evaluate_and_update_policy()
        seconds += time.perf_counter() - began
        done = iterations
        value = openspiel_exploitability.exploitability(loaded, solver.average_policy())
        points.append((iterations, seconds, value))
    return points


def report(game: str, args: argparse.Namespace, tmp: str) -> str:
    curves, averages, meta_steps = self_play(game, args, tmp)
    reference = [] if args.no_cfr else cfr_reference(game)
    config = load_config(f"openspiel:{game}" if args.config is None else args.config, args.set)
    lines = [
        f"### {game}",
        "",
        f"Config: {args.config or 'shipped'} (algo={config.algo}, "
        f"{config.total_timesteps if not args.steps else args.steps:,} steps"
        + (f", overrides {' '.join(args.set)}" if args.set else "")
        + f"); exploitability every {args.every:,} steps.",
        "",
        "| step | " + " | ".join(f"seed {s}: expl. (train s)" for s in args.seeds) + " | mean |",
        "|---|" + "---|" * (len(args.seeds) + 1),
    ]
    for i, (step, _, _) in enumerate(curves[0]):
        cells = [f"{c[i][2]:.4f} ({c[i][1]:.0f})" for c in curves if i < len(c)]
        values = [c[i][2] for c in curves if i < len(c)]
        lines.append(f"| {step:,} | " + " | ".join(cells) + f" | {interval(values)} |")
    finals = [c[-1][2] for c in curves]
    best = [min(v for _, _, v in c) for c in curves]
    target = TARGETS.get(game)
    lines += [
        "",
        f"Final exploitability: {interval(finals)} (95% t-interval over {len(finals)} seeds; "
        f"per seed {', '.join(f'{v:.4f}' for v in finals)}); best point of each curve "
        f"{', '.join(f'{v:.4f}' for v in best)}."
        + (
            f" Target <= {target}: {'met' if max(finals) <= target else 'not met'}."
            if target
            else ""
        ),
        *(
            f"Final exploitability of the {label}: "
            + ", ".join(f"{a[-1][label]:.4f}" for a in averages)
            + "."
            for label in (averages[0][-1] if averages[0] else {})
        ),
        *(
            [
                f"Curve of the {NASH_MIXTURE} (per point, seeds in order): "
                + "; ".join(
                    f"{point[0]:,}: "
                    + " / ".join(f"{a[i][NASH_MIXTURE]:.4f}" for a in averages if i < len(a))
                    for i, point in enumerate(curves[0])
                )
                + ".",
                "The meta-game's games took "
                + ", ".join(f"{n:,}" for n in meta_steps)
                + " steps (per seed; not counted in the run's steps, inside its training time).",
            ]
            if any(meta_steps)
            else []
        ),
        *(
            [
                "",
                "Reference, OpenSpiel CFR+ in the same run (iterations: exploitability, seconds): "
                + "; ".join(f"{n}: {v:.4f} ({s:.1f} s)" for n, s, v in reference)
                + ".",
            ]
            if reference
            else []
        ),
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", nargs="*", default=list(TARGETS), choices=list(TARGETS))
    parser.add_argument("--seeds", nargs="*", type=int, default=[1, 2, 3])
    parser.add_argument("--steps", type=int, default=None, help="steps per run (default: config's)")
    parser.add_argument("--every", type=int, default=20_000, help="steps between measurements")
    parser.add_argument("--config", default=None, help="a config file (default: the shipped one)")
    parser.add_argument("--set", nargs="*", default=[], help="config overrides, KEY=VALUE")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument(
        "--screen-average",
        nargs="*",
        type=float,
        default=[],
        help="also score Polyak averages of the parameters at these rates (kept beside the run; "
        "with selfplay.mode=nfsp of the average policy's)",
    )
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    parser.add_argument(
        "--no-cfr", action="store_true", help="leave out the CFR+ reference (Leduc's takes ~4 min)"
    )
    parser.add_argument("--section", default=SECTION, help="the RESULTS.md section --write sets")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        sections = [report(game, args, tmp) for game in args.games]
    command = " ".join(["python benchmarks/openspiel_poker.py", *sys.argv[1:]])
    body = "\n".join(
        [
            f"Command: `{command}`",
            "",
            f"Machine: {machine()} (2-core shared box); load average at the end "
            f"{'/'.join(f'{v:.1f}' for v in os.getloadavg())}; torch threads {args.threads}.",
            "",
            "\n\n".join(sections),
        ]
    )
    print(body)
    if args.write:
        replace_section(args.section, body)


if __name__ == "__main__":
    main()
