"""Latency of one decision (one observation in, actions out) and the cost per observation of
a batched call, on one thread: the light runtime (entityrl.inference, onnxruntime) against the
torch Agent and rogue-net 0.1.9.

The observations: CherryPick with 24 cherries and the player (25 entities), a select-entity
action; the network: d_model 32, 2 layers, 2 heads (untrained: weights do not change the
time). Each path decides CALLS times per run after a warm-up (CALLS / 10 calls of BATCH
observations for batched calls), the paths alternating; p10, p50 and p99 are per run, and
the tables give the median over RUNS runs (on a shared machine the p10 is the time of the
quieter moments). The runtime's single decision is also timed in parts (validation, the
observation to the model's inputs, the model, choosing), with the padded one-observation
model instead of the unpadded one this observation takes (signature.UNPADDED_KEY), and
through the general path (the Batcher) with its parts. --baseline REV also times, in the same runs, the runtime of git
revision REV on the same network exported by that revision. With --browser, the same
decision also runs in the page of web/ (onnxruntime-web, WASM, one thread) in headless
Chromium, as the browser tests drive it (needs Chromium, `npm ci` in web/ and the 'web'
extra).

usage: python benchmarks/inference.py [--calls 3000] [--runs 5] [--batch 64] [--baseline REV]
                                      [--browser] [--write]
"""

from __future__ import annotations

import argparse
import base64
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np
import onnxruntime as ort
import torch

sys.path.insert(0, str(Path(__file__).parent))
from _peer import machine, note_if_peer_missing, peer_available, run_peer
from results import replace_section

from entityrl.env import Batcher, Observation
from entityrl.env.validator import validate_observation
from entityrl.envs import CherryPick
from entityrl.export import export_onnx
from entityrl.inference import load, signature
from entityrl.inference.runtime import batched_inputs, model_inputs
from entityrl.nn import RogueNet, RogueNetConfig
from entityrl.nn.precision import Precision, compute_dtype
from entityrl.training.agent import Agent
from entityrl.training.config import EnvConfig, TrainConfig

CHERRIES = 24
D_MODEL = 32


Figures = tuple[float, float, float]
"""p10, p50 and p99 of a run, in seconds (p10 NaN where the peer does not give it)."""


def percentiles(fn: Callable[[], object], calls: int) -> Figures:
    """p10, p50 and p99 of ``calls`` timed calls after ``calls // 10`` untimed ones."""
    for _ in range(calls // 10):
        fn()
    times = np.empty(calls)
    for i in range(calls):
        start = time.perf_counter()
        fn()
        times[i] = time.perf_counter() - start
    p10, p50, p99 = np.percentile(times, [10, 50, 99])
    return float(p10), float(p50), float(p99)


def cherry_pick_observations(count: int) -> list[Observation]:
    """``count`` CherryPick observations of ``CHERRIES`` cherries, from the starts of seeded
    episodes."""
    env = CherryPick(num_cherries=CHERRIES)
    found = []
    for seed in range(count):
        env.seed(seed)
        found.append(env.reset())
    return found


def torch_agent(precision: Precision = "auto") -> Agent:
    """The timed network (the same weights for every ``precision``)."""
    torch.manual_seed(0)
    env = CherryPick(num_cherries=CHERRIES)
    config = RogueNetConfig(d_model=D_MODEL, precision=precision)
    net = RogueNet(env.obs_space(), env.action_space(), config)
    return Agent(net, TrainConfig(env=EnvConfig(id="CherryPick")), seed=0)


EXPORT_AT_REVISION = f"""
import sys
sys.path.insert(0, sys.argv[1])
import torch
from entityrl.envs import CherryPick
from entityrl.export import export_onnx
from entityrl.nn import RogueNet, RogueNetConfig
from entityrl.training.agent import Agent
from entityrl.training.config import EnvConfig, TrainConfig
torch.manual_seed(0)
env = CherryPick(num_cherries={CHERRIES})
net = RogueNet(env.obs_space(), env.action_space(), RogueNetConfig(d_model={D_MODEL}))
export_onnx(Agent(net, TrainConfig(env=EnvConfig(id="CherryPick"))), sys.argv[2])
"""
"""The network of :func:`torch_agent`, exported by the entityrl in ``argv[1]`` to ``argv[2]``
(standalone: this module's imports need the entityrl of now)."""


def baseline(revision: str, model: Path) -> ModuleType:
    """The runtime of git ``revision`` (its ``entityrl/inference/runtime.py`` as a module of
    its own, which imports the rest of entityrl as it is now), after writing to ``model`` the
    same network as :func:`torch_agent` exported by that revision's entityrl (in a process of
    its own)."""
    root = Path(__file__).parents[1]
    archive = subprocess.run(
        ["git", "archive", revision, "entityrl"], cwd=root, capture_output=True, check=True
    ).stdout
    with tempfile.TemporaryDirectory() as tree:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tree, filter="data")
        subprocess.run([sys.executable, "-c", EXPORT_AT_REVISION, tree, str(model)], check=True)
        source = (Path(tree) / "entityrl" / "inference" / "runtime.py").read_text()
    module = ModuleType(f"runtime_at_{revision}")
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(source, f"runtime.py@{revision}", "exec"), module.__dict__)
    return module


Baseline = tuple[ModuleType, Path]
"""A revision's runtime and the model its exporter wrote."""


def paths(model: Path, before: Baseline | None) -> dict[str, Callable[[], object]]:
    """Each way of deciding for the same observation, and the parts of the runtime's way, by
    row label."""
    (obs,) = cherry_pick_observations(1)
    agent = torch_agent()
    batcher = Batcher(agent.obs_space, agent.action_space)
    batch = batcher.batch([obs])
    checked, unchecked = load(model, seed=0), load(model, seed=0, check=False)
    general = load(model, seed=0, check=False)
    general.single = None  # the path through the Batcher
    padded = load(model, seed=0, check=False)
    single, padded_single = unchecked.single, padded.single
    assert single is not None and padded_single is not None
    padded_single.unpadded = None  # every observation through the one-observation model
    session = unchecked.unpadded_session  # the model of the common observation, as this one
    outputs = unchecked._run([obs], False)[1]
    prepared = single.prepare(obs)
    assert not prepared.padded
    feeds = prepared.feeds
    padded_feeds = padded_single.prepare(obs).feeds
    run_options = unchecked.run_options  # as the runtime calls its sessions
    rows = {
        "torch `Agent.act` (VecObs in, ragged actions out)": lambda: agent.act(batch),
        "torch: Observation -> Batcher -> `Agent.act` -> Actions": lambda: batcher.unbatch(
            agent.act(batcher.batch([obs])), [obs]
        ),
        "`entityrl.inference` `policy.act(obs)` (validated)": lambda: checked.act(obs),
        "`entityrl.inference` `policy.act(obs)`, check=False": lambda: unchecked.act(obs),
        "  the same with the padded model (`policy.single.unpadded = None`)": lambda: padded.act(
            obs
        ),
        "  of which: validation (`validate_observation`)": lambda: validate_observation(
            obs, checked.obs_space, checked.action_space
        ),
        "  of which: Observation -> model inputs (`SingleObservation.prepare`)": lambda: (
            single.prepare(obs)
        ),
        "  of which: onnxruntime `session.run` alone (inputs ready)": lambda: session.run(
            None, feeds, run_options
        ),
        "  the padded model's `session.run` alone": lambda: padded.session.run(
            None, padded_feeds, run_options
        ),
        "  `prepare` then `session.run`": lambda: session.run(
            None, single.prepare(obs).feeds, run_options
        ),
        "  of which: choosing and building the actions (`SingleObservation.actions_of`)": (
            lambda: single.actions_of(obs, prepared, outputs, unchecked._choose, unchecked._sample)
        ),
        "through the Batcher (`policy.single = None`): `policy.act(obs)`, check=False": lambda: (
            general.act(obs)
        ),
        "  of which: `Batcher.batch([obs])`": lambda: general.batcher.batch([obs]),
        "  of which: `model_inputs` (VecObs -> model inputs)": lambda: model_inputs(
            batch, 0, general.action_space
        ),
        "  of which: choosing and `Batcher.unbatch`": lambda: general._actions(
            batch, outputs, [obs]
        ),
    }
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    basic = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    rows["  variant: the padded model's `session.run`, onnxruntime's basic optimizations"] = (
        lambda: basic.run(None, padded_feeds)
    )
    rows["  variant: `session.run` through an IO binding (bound every call)"] = lambda: _bound_run(
        session, feeds
    )
    if before is not None:
        runtime, old_model = before
        old = runtime.OnnxPolicy(old_model, seed=0, check=False)
        old_feeds = {k: v for k, v in padded_feeds.items() if k in old.input_names}
        rows["baseline: `policy.act(obs)`, check=False"] = lambda: old.act(obs)
        rows["baseline: `session.run` alone"] = lambda: old.session.run(None, old_feeds)
    return rows


def _bound_run(session: ort.InferenceSession, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    binding = session.io_binding()
    for name, value in feeds.items():
        binding.bind_cpu_input(name, value)
    for output in session.get_outputs():
        binding.bind_output(output.name)
    session.run_with_iobinding(binding)
    return binding.copy_outputs_to_cpu()


def batched_paths(
    model: Path, count: int, before: Baseline | None
) -> dict[str, Callable[[], object]]:
    """Each way of acting for ``count`` observations in one call, by row label."""
    observations = cherry_pick_observations(count)
    agent, float32 = torch_agent(), torch_agent("float32")
    batcher = Batcher(agent.obs_space, agent.action_space)
    policy = load(model, seed=0, check=False)
    batch = batcher.batch(observations)
    session, wanted = policy._batched_session()
    feeds = {k: v for k, v in batched_inputs(batch, policy.action_space).items() if k in wanted}
    rows = {
        "torch: Observations -> Batcher -> `Agent.act` -> Actions": lambda: batcher.unbatch(
            agent.act(batcher.batch(observations)), observations
        ),
        "  of which: torch `Agent.act` alone (VecObs in)": lambda: agent.act(batch),
        "the same, net.precision=float32": lambda: batcher.unbatch(
            float32.act(batcher.batch(observations)), observations
        ),
        "  of which: torch `Agent.act` alone (VecObs in), float32": lambda: float32.act(batch),
        "`entityrl.inference` `policy.act_batch`, check=False": lambda: policy.act_batch(
            observations
        ),
        "  of which: `batched_inputs` (VecObs -> model inputs)": lambda: batched_inputs(
            batch, policy.action_space
        ),
        "  of which: the batched model's `session.run` alone": lambda: session.run(None, feeds),
    }
    if before is not None:
        runtime, old_model = before
        old = runtime.OnnxPolicy(old_model, seed=0, check=False)
        rows["baseline: `policy.act_batch`, check=False"] = lambda: old.act_batch(observations)
    return rows


def browser_runs(model: Path, calls: int, runs: int) -> list[Figures]:
    """The figures of each run of ``calls`` decisions in the page."""
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
            p10, p50, p99 = np.percentile(ms, [10, 50, 99]) / 1e3
            figures.append((p10, p50, p99))
    return figures


def optimized_nodes(model: Path | bytes) -> int:
    """The nodes of ``model``'s graph (a file, or a serialized model) after onnxruntime's
    optimizations (those it runs)."""
    import onnx

    with tempfile.TemporaryDirectory() as tmp:
        options = ort.SessionOptions()
        options.optimized_model_filepath = str(Path(tmp) / "optimized.onnx")
        options.log_severity_level = 3  # the note that the file is for this machine only
        source = model if isinstance(model, bytes) else str(model)
        ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
        return len(onnx.load(options.optimized_model_filepath).graph.node)


def timed(
    make: Callable[[], dict[str, Callable[[], object]]], calls: int, runs: int, per: int = 1
) -> dict[str, list[Figures]]:
    """The figures per run of every path ``make`` gives (made afresh each run, the paths
    alternating), divided by ``per``."""
    figures: dict[str, list[Figures]] = {}
    for _ in range(runs):
        for label, fn in make().items():
            p10, p50, p99 = percentiles(fn, calls)
            figures.setdefault(label, []).append((p10 / per, p50 / per, p99 / per))
    return figures


def table(runs: dict[str, list[Figures]]) -> str:
    lines = ["| path | p10 (us) | p50 (us) | p99 (us) |", "|---|---|---|---|"]
    for label, figures in runs.items():
        cells = [f"{x:,.1f}" for x in np.median(np.array(figures), axis=0) * 1e6]
        lines.append(f"| {label} | {' | '.join(cells).replace('nan', '-')} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--batch", type=int, default=64, help="observations per act_batch call")
    parser.add_argument(
        "--baseline", metavar="REV", help="also time the exporter and runtime of revision REV"
    )
    parser.add_argument("--browser", action="store_true", help="also time the page of web/")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    torch.set_num_threads(1)
    note_if_peer_missing()
    load_before = os.getloadavg()
    batch_calls = max(args.calls // 10, 50)
    with tempfile.TemporaryDirectory() as tmp:
        model = export_onnx(torch_agent(), Path(tmp) / "agent.onnx")
        before = None
        if args.baseline is not None:
            args.baseline = subprocess.run(
                ["git", "rev-parse", "--short", args.baseline],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
            old_model = Path(tmp) / "baseline.onnx"
            before = baseline(args.baseline, old_model), old_model
        unpadded = base64.b64decode(load(model).metadata[signature.UNPADDED_KEY])
        nodes = f"{optimized_nodes(unpadded)} nodes; the padded one {optimized_nodes(model)}"
        if before is not None:
            nodes += f" ({optimized_nodes(before[1])} for the baseline)"
        single = timed(lambda: paths(model, before), args.calls, args.runs)
        batched = timed(
            lambda: batched_paths(model, args.batch, before), batch_calls, args.runs, args.batch
        )
        if args.browser:
            label = "browser: onnxruntime-web (WASM, 1 thread) `policy.decide(obs)` in Chromium"
            single[label] = browser_runs(model, args.calls, args.runs)
    if peer_available():
        peer = run_peer("inference_peer.py", CHERRIES, D_MODEL, args.calls, args.runs)
        single["rogue-net 0.1.9: Observation -> `batch_obs` -> `get_action_and_auxiliary`"] = [
            (np.nan, p50, p99) for p50, p99 in peer["runs"]
        ]
    load_after = os.getloadavg()
    report = (
        f"One decision (the graph for the common observation: {nodes} after onnxruntime's "
        f"optimizations):\n\n{table(single)}\n\n"
        f"{args.batch} observations in one call, per observation:\n\n{table(batched)}"
    )
    print(report)
    if args.write:
        options = [f"--calls {args.calls}", f"--runs {args.runs}", f"--batch {args.batch}"]
        if args.baseline:
            options.append(f"--baseline {args.baseline}")
        if args.browser:
            options.append("--browser")
        replace_section(
            "Inference: batched calls and single-decision latency (issue #33, "
            "benchmarks/inference.py)",
            f"Command: `nice -n 5 python benchmarks/inference.py {' '.join(options)} --write`"
            f"\n\nMachine: {machine()}; onnxruntime and torch on 1 thread; load average "
            f"(1, 5, 15 min) {_loads(load_before)} before and {_loads(load_after)} after the "
            "run (the machine is shared: the figures of one run are comparable with each "
            "other, not with other runs).\n\n"
            f"CherryPick observations ({CHERRIES} cherries and the player: {CHERRIES + 1} "
            f"entities, a select-entity action), d_model {D_MODEL}, 2 layers, 2 heads. p10, p50 "
            f"and p99 of {args.calls:,} single decisions per run ({batch_calls:,} calls of "
            f"{args.batch}), median over {args.runs} runs, the paths alternating within each "
            f"run{_baseline_note(args.baseline)}; the torch agent's linear layers in "
            f"{compute_dtype('auto')} (net.precision=auto on this CPU) unless float32 is "
            f"named.\n\n{report}\n",
        )


def _baseline_note(revision: str | None) -> str:
    return "" if revision is None else f"; the baseline is the exporter and runtime of {revision}"


def _loads(loads: tuple[float, float, float]) -> str:
    return ", ".join(f"{x:.1f}" for x in loads)


if __name__ == "__main__":
    main()
