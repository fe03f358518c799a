"""The approximate best response against the exact exploitability, on Kuhn and Leduc poker.

Per game, agents from untrained to well trained (``entityrl train`` with the shipped configs);
for each, the exact exploitability (NashConv/2, OpenSpiel's best responses,
:func:`entityrl.interop.openspiel.exploitability`) and the approximate one
(:func:`entityrl.training.best_response.approximate_nash_conv`: a fresh learner per seat
trained against the frozen agent for each response budget, then matches of ``--games`` games)
with its 95% interval and wall times. The approximate value is a lower bound up to the noise:
how far under the exact one it stays says how good a response the budget buys.

usage: python benchmarks/approximate_best_response.py [--games N] [--kuhn-budgets 10000 ...]
       [--leduc-budgets ...] [--leduc-steps N] [--seed S] [--threads 1] [--write]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from _peer import machine
from results import replace_section

from entityrl.interop.openspiel import exploitability
from entityrl.training import Trainer, load_config, train
from entityrl.training.best_response import approximate_nash_conv

TITLE = "Approximate best response against exact exploitability (issue #36)"
CONFIGS = Path(__file__).parent.parent / "entityrl" / "configs"


@dataclass
class AgentSpec:
    """An agent to score: its label, the config it trains with, and overrides."""

    label: str
    config: Path
    overrides: list[str]
    trained: bool = True
    """False: the config's initial network, saved before any update (an agent whose config
    froze its learning rate instead would hand that config to its responders too)."""


def agents(game: str, args: argparse.Namespace) -> list[AgentSpec]:
    if game == "kuhn_poker":
        return [
            AgentSpec("untrained (initial network)", CONFIGS / "openspiel_kuhn_poker.yaml", [],
                      trained=False),
            AgentSpec("briefly trained (pool config, 20k steps)",
                      CONFIGS / "openspiel_kuhn_poker.yaml", ["total_timesteps=20000"]),
            AgentSpec("openspiel_kuhn_poker_magnet.yaml (600k steps)",
                      CONFIGS / "openspiel_kuhn_poker_magnet.yaml", []),
        ]  # fmt: skip
    return [
        AgentSpec("untrained (initial network)", CONFIGS / "openspiel_leduc_poker.yaml", [],
                  trained=False),
        AgentSpec(f"openspiel_leduc_poker.yaml ({args.leduc_steps:,} steps)",
                  CONFIGS / "openspiel_leduc_poker.yaml",
                  [f"total_timesteps={args.leduc_steps}"]),
    ]  # fmt: skip


def initial_agent(config: Path, overrides: list[str]) -> int:
    """Save the config's initial network as a run's checkpoint; its steps (0)."""
    trainer = Trainer(load_config(config, overrides))
    try:
        trainer.save()
    finally:
        trainer.env.close()
        if trainer.lock is not None:
            trainer.lock.release()
    return 0


def score(game: str, budgets: list[int], args: argparse.Namespace, tmp: str) -> list[str]:
    """The table rows of one game: every agent, every response budget."""
    quiet = ["log.tensorboard=false", "log.progress=false", f"torch_threads={args.threads}"]
    rows = []
    for number, spec in enumerate(agents(game, args)):
        run_dir = f"{tmp}/{game}-{number}"
        began = time.perf_counter()
        overrides = [*quiet, f"seed={args.seed}", f"log.run_dir={run_dir}", *spec.overrides]
        if spec.trained:
            steps = train(f"openspiel:{game}", config=spec.config, overrides=overrides).steps
        else:
            steps = initial_agent(spec.config, overrides)
        training = time.perf_counter() - began
        began = time.perf_counter()
        exact = exploitability(run_dir, f"openspiel:{game}")
        exact_seconds = time.perf_counter() - began
        print(f"{game}, {spec.label}: exact {exact:.4f} ({exact_seconds:.1f} s)", flush=True)
        for budget in budgets:
            began = time.perf_counter()
            result = approximate_nash_conv(
                run_dir, budget, args.games, seed=args.seed, overrides=quiet
            )
            seconds = time.perf_counter() - began
            half = result.half
            low, high = half.interval()
            trainings = " + ".join(f"{s.seconds:.0f}" for s in result.seats)
            print(f"  {budget:,} steps: {half.mean:.4f} ({low:.4f} to {high:.4f}), {seconds:.0f} s",
                  flush=True)  # fmt: skip
            rows.append(
                f"| {game} | {spec.label} | {steps:,} ({training:.0f} s) | "
                f"{exact:.4f} ({exact_seconds:.1f} s) | {budget:,} | {half.mean:.4f} "
                f"({low:.4f} to {high:.4f}) | {half.mean - exact:+.4f} | {trainings} | "
                f"{seconds:.0f} |"
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", type=int, default=4000, help="games per match")
    parser.add_argument("--kuhn-budgets", nargs="*", type=int, default=[10_000, 50_000])
    parser.add_argument("--leduc-budgets", nargs="*", type=int, default=[50_000, 200_000])
    parser.add_argument("--leduc-steps", type=int, default=300_000, help="the Leduc agent's")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [
            *(score("kuhn_poker", args.kuhn_budgets, args, tmp) if args.kuhn_budgets else []),
            *(score("leduc_poker", args.leduc_budgets, args, tmp) if args.leduc_budgets else []),
        ]
    command = " ".join(["python benchmarks/approximate_best_response.py", *sys.argv[1:]])
    body = "\n".join(
        [
            f"Command: `{command}` ({time.perf_counter() - started:.0f} s in all)",
            "",
            f"Machine: {machine()} (2-core shared box); load average at the end "
            f"{'/'.join(f'{v:.1f}' for v in os.getloadavg())}; torch threads {args.threads}; "
            f"seed {args.seed}; {args.games:,} games per match.",
            "",
            "| game | agent | trained steps (s) | exact NashConv/2 (s) | response steps per "
            "seat | approximate NashConv/2 (95% interval) | approx. - exact | response "
            "training s (seat 0 + 1) | approximate s in all |",
            "|---|---|---|---|---|---|---|---|---|",
            *rows,
        ]
    )
    print(body)
    if args.write:
        replace_section(TITLE, body)


if __name__ == "__main__":
    main()
