"""Train every shipped config to its step budget; compare the return reached with its target.

Each config in entityrl/configs/ states `target_return` (the mean episode return it reaches)
within `total_timesteps`. This script trains each one with its own seed, evaluates the final
agent on 400 fresh episodes (sampled actions), and writes a table to benchmarks/RESULTS.md.

usage: python benchmarks/learning.py [--only NAME ...] [--threads 1] [--write]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).parent))
from _peer import machine
from results import replace_section

from entityrl.training import evaluate, load_agent, make_eval_env
from entityrl.training.callbacks import Callback
from entityrl.training.config import CONFIG_DIR, load_config
from entityrl.training.runner import Trainer

EPISODES = 400


def run(
    path: Path | None,
    threads: int,
    overrides: Sequence[str] = (),
    callbacks: Sequence[Callback] = (),
    episodes: int = EPISODES,
) -> dict[str, Any]:
    """Train ``path``'s config (None: the defaults) and evaluate the final agent on ``episodes`` episodes: its mean
    return (``reached``), its success rate when the environment reports ``success``, and the
    mean of every metric (``metrics``); ``steps`` as trained (a run may stop before
    ``total_timesteps``)."""
    with tempfile.TemporaryDirectory() as run_dir:
        config = load_config(
            path,
            [f"log.run_dir={run_dir}", "log.tensorboard=false", "log.progress=false",
             f"torch_threads={threads}", *overrides],
        )  # fmt: skip
        started = time.time()
        result = Trainer(config, callbacks=callbacks).run()
        seconds = time.time() - started
        agent = load_agent(run_dir, seed=0)
        with make_eval_env(agent, num_envs=16, seed=12345) as env:
            evaluation = evaluate(agent, env, episodes)
    success = evaluation.mean("success") if "success" in evaluation.metrics else float("nan")
    return {
        "env": config.env.id,
        "config": path.name if path else "(defaults)",
        "steps": result.steps,
        "target": config.target_return if config.target_return is not None else float("nan"),
        "reached": evaluation.mean(),
        "success": success,
        "seconds": seconds,
        "metrics": {name: evaluation.mean(name) for name in evaluation.metrics},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", help="config file names (without .yaml)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per run")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    paths = sorted(CONFIG_DIR.glob("*.yaml"))
    if args.only:
        paths = [p for p in paths if p.stem in args.only]
    lines = [
        "| env | config | steps | target return | reached | met | wall time (s) |",
        "|---|---|---|---|---|---|---|",
    ]
    for path in paths:
        r = run(path, args.threads)
        met = "yes" if r["reached"] >= r["target"] else "**no**"
        lines.append(
            f"| {r['env']} | {r['config']} | {r['steps']:,} | {r['target']:.3g} "
            f"| {r['reached']:.3f} | {met} | {r['seconds']:.0f} |"
        )
        print(lines[-1], flush=True)
    table = "\n".join(lines)
    if args.write:
        replace_section(
            "Learning: every shipped config",
            f"Command: `python benchmarks/learning.py --threads {args.threads} --write`\n\n"
            f"Machine: {machine()}; torch threads {args.threads}.\n\nEach config is trained "
            f"with its own seed to its step budget; the final agent is then evaluated on "
            f"{EPISODES} fresh episodes with sampled actions.\n\n{table}\n",
        )


if __name__ == "__main__":
    main()
