"""Latency of one decision (one observation in, actions out) on one thread: the light runtime
(entityrl.inference, onnxruntime) against the torch Agent and rogue-net 0.1.9.

The observation: CherryPick with 24 cherries and the player (25 entities), a select-entity
action; the network: d_model 32, 2 layers, 2 heads (untrained: weights do not change the
time). Each path decides CALLS times per run after a warm-up; p50 and p99 are per run, and the
table gives the median over RUNS runs. With --browser, the same decision also runs in the page
of web/ (onnxruntime-web, WASM, one thread) in headless Chromium, as the browser tests drive
it (needs Chromium, `npm ci` in web/ and the 'web' extra).

usage: python benchmarks/inference.py [--calls 3000] [--runs 5] [--browser] [--write]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))
from _peer import machine, note_if_peer_missing, peer_available, run_peer
from results import replace_section

from entityrl.env import Batcher
from entityrl.envs import CherryPick
from entityrl.export import export_onnx
from entityrl.inference import load
from entityrl.inference.runtime import model_inputs
from entityrl.nn import RogueNet, RogueNetConfig
from entityrl.training.agent import Agent
from entityrl.training.config import EnvConfig, TrainConfig

CHERRIES = 24
D_MODEL = 32


def percentiles(fn: Callable[[], object], calls: int) -> tuple[float, float]:
    """p50 and p99 of ``calls`` timed calls after ``calls // 10`` untimed ones, in seconds."""
    for _ in range(calls // 10):
        fn()
    times = np.empty(calls)
    for i in range(calls):
        start = time.perf_counter()
        fn()
        times[i] = time.perf_counter() - start
    return float(np.percentile(times, 50)), float(np.percentile(times, 99))


def paths(model: Path) -> dict[str, Callable[[], object]]:
    """Each way of deciding for the same observation, by row label."""
    env = CherryPick(num_cherries=CHERRIES)
    env.seed(0)
    obs = env.reset()
    torch.manual_seed(0)
    net = RogueNet(env.obs_space(), env.action_space(), RogueNetConfig(d_model=D_MODEL))
    agent = Agent(net, TrainConfig(env=EnvConfig(id="CherryPick")), seed=0)
    batcher = Batcher(env.obs_space(), env.action_space())
    batch = batcher.batch([obs])
    checked, unchecked = load(model, seed=0), load(model, seed=0, check=False)
    session = unchecked.session
    feeds = {
        name: value
        for name, value in model_inputs(batch, 0, unchecked.action_space).items()
        if name in unchecked.input_names
    }
    return {
        "torch `Agent.act` (VecObs in, ragged actions out)": lambda: agent.act(batch),
        "torch: Observation -> Batcher -> `Agent.act` -> Actions": lambda: batcher.unbatch(
            agent.act(batcher.batch([obs])), [obs]
        ),
        "`entityrl.inference` `policy.act(obs)` (validated)": lambda: checked.act(obs),
        "  of which: Observation -> model inputs (validation, `Batcher`, `model_inputs`)": lambda: (
            model_inputs(checked._batch([obs]), 0, checked.action_space)
        ),
        "  of which: onnxruntime `session.run` alone (inputs ready)": lambda: session.run(
            None, feeds
        ),
        "`entityrl.inference` `policy.act(obs)`, check=False": lambda: unchecked.act(obs),
    }


def browser_runs(model: Path, calls: int, runs: int) -> list[tuple[float, float]]:
    """p50 and p99 (seconds) of each run of ``calls`` decisions in the page."""
    sys.path.insert(0, str(Path(__file__).parents[1] / "tests" / "web"))
    from browser import browser_page, missing_requirements, serve

    missing = missing_requirements()
    if missing:
        sys.exit(f"--browser: {missing}")
    env = CherryPick(num_cherries=CHERRIES)
    env.seed(0)
    obs = env.reset()
    observation = {
        "features": {name: np.asarray(rows).tolist() for name, rows in obs.features.items()},
        "actions": {"Pick Cherry": {"actor_types": ["Player"], "actee_types": ["Cherry"]}},
    }
    figures = []
    with serve(model.parent) as url, browser_page() as page:
        page.goto(f"{url}/index.html?model=/files/{model.name}")
        page.wait_for_selector("body[data-ready=true]")
        for _ in range(runs):
            times = page.evaluate(
                "([obs, calls]) => window.entityrl.timeDecisions(obs, calls)", [observation, calls]
            )
            ms = np.array(times)
            figures.append((np.percentile(ms, 50) / 1e3, np.percentile(ms, 99) / 1e3))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--browser", action="store_true", help="also time the page of web/")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    torch.set_num_threads(1)
    note_if_peer_missing()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "agent.onnx"
        env = CherryPick(num_cherries=CHERRIES)
        torch.manual_seed(0)
        net = RogueNet(env.obs_space(), env.action_space(), RogueNetConfig(d_model=D_MODEL))
        export_onnx(Agent(net, TrainConfig(env=EnvConfig(id="CherryPick"))), model)
        runs: dict[str, list[tuple[float, float]]] = {}
        for _ in range(args.runs):
            for label, fn in paths(model).items():
                runs.setdefault(label, []).append(percentiles(fn, args.calls))
        if args.browser:
            label = "browser: onnxruntime-web (WASM, 1 thread) `policy.decide(obs)` in Chromium"
            runs[label] = browser_runs(model, args.calls, args.runs)
    if peer_available():
        peer = run_peer("inference_peer.py", CHERRIES, D_MODEL, args.calls, args.runs)
        runs["rogue-net 0.1.9: Observation -> `batch_obs` -> `get_action_and_auxiliary`"] = [
            tuple(r) for r in peer["runs"]
        ]
    lines = ["| path | p50 (us) | p99 (us) |", "|---|---|---|"]
    for label, figures in runs.items():
        p50, p99 = np.median(np.array(figures), axis=0) * 1e6
        lines.append(f"| {label} | {p50:,.0f} | {p99:,.0f} |")
    table = "\n".join(lines)
    print(table)
    if args.write:
        replace_section(
            "Inference latency: one decision (benchmarks/inference.py)",
            f"Command: `python benchmarks/inference.py --calls {args.calls} --runs {args.runs} "
            f"{'--browser ' if args.browser else ''}--write`\n\nMachine: {machine()}; "
            f"onnxruntime and torch on 1 thread; load average {load_before:.1f} before and "
            f"{os.getloadavg()[0]:.1f} after the run (the machine is shared: the figures of "
            "one run are comparable with each other, not with other runs).\n\n"
            f"One CherryPick observation ({CHERRIES} cherries and the player: "
            f"{CHERRIES + 1} entities, a select-entity action), d_model {D_MODEL}, 2 layers, "
            f"2 heads. p50 and p99 of {args.calls:,} decisions per run, median over "
            f"{args.runs} runs; the peer in its own venv, same run.\n\n{table}\n",
        )


if __name__ == "__main__":
    main()
