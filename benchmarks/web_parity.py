"""How far the browser page's decisions are from the Python runtime's, for the policy kinds the
page learnt last: continuous actions (with and without memory) and stacked observations.

Untrained policies (random weights and input statistics, as the export tests use), whole
episodes fed one observation after another to the page (onnxruntime-web, WASM, in headless
Chromium, as tests/web drives it) and to ``entityrl.inference``, each episode started afresh;
prints per model the observations compared and the largest absolute difference of each
output (probabilities, Gaussian means and standard deviations, the value).

    python benchmarks/web_parity.py [--episodes 20]

Needs what tests/web needs (Chromium, ``npm ci`` in web/, playwright).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "web")]

from browser import browser_page, missing_requirements, observation_json, serve  # noqa: E402
from export.torch_reference import untrained_agent  # noqa: E402
from stacking_envs import Blinking, Drift  # noqa: E402

from entityrl.env.stacking import stacked_space  # noqa: E402
from entityrl.envs import ContinuousMoveToOrigin  # noqa: E402
from entityrl.export import export_onnx  # noqa: E402
from entityrl.inference import load  # noqa: E402

STACK = 3
DECIDE = """async ([obs, newEpisode]) => {
    const d = await window.entityrl.decide(obs, { newEpisode });
    const out = { value: [d.value] };
    for (const [name, a] of Object.entries(d.actions)) {
        if (a.mean) [out[`mean/${name}`], out[`std/${name}`]] = [a.mean.map((r) => Array.from(r)), Array.from(a.std)];
        else out[`probs/${name}`] = a.probs.map((r) => Array.from(r));
    }
    return out;
}"""


def models(directory: Path) -> dict[str, tuple[Path, object]]:
    """Per name, the exported model and a maker of the environment it plays."""
    out = {}
    for name, memory in (("continuous", False), ("continuous, memory", True)):
        env = ContinuousMoveToOrigin()
        agent = untrained_agent(env.obs_space(), env.action_space(), memory=memory)
        out[name] = (directory / f"{name.replace(', ', '_')}.onnx", ContinuousMoveToOrigin)
        export_onnx(agent, out[name][0])
    for name, make_env in (
        ("Blinking, int ids", lambda: Blinking(ids="int")),
        ("Blinking, str ids", lambda: Blinking(ids="str")),
        ("Drift", Drift),
    ):
        env = make_env()
        agent = untrained_agent(stacked_space(env.obs_space(), STACK), env.action_space())
        agent.config.env.stack = STACK
        path = directory / f"{name.replace(', ', '_').replace(' ', '_')}.onnx"
        out[f"{name}, stacked {STACK} deep"] = (path, make_env)
        export_onnx(agent, path)
    return out


def python_outputs(decision) -> dict[str, np.ndarray]:
    out = {"value": np.array([decision.value])}
    for key, tables in (("probs", decision.probs), ("mean", decision.mean), ("std", decision.std)):
        out.update({f"{key}/{name}": table for name, table in tables.items()})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=20)
    args = parser.parse_args()
    missing = missing_requirements()
    if missing:
        sys.exit(missing)
    with tempfile.TemporaryDirectory() as tmp:
        made = models(Path(tmp))
        with serve(Path(tmp)) as url, browser_page() as page:
            page.goto(f"{url}/index.html")
            page.wait_for_selector("body[data-ready=true]")
            for name, (path, make_env) in made.items():
                page.evaluate("(url) => window.entityrl.usePolicy(url, url)", f"/files/{path.name}")
                # One to compare decisions, one to act: each call is a step of the episode.
                policy, actor = load(path), load(path, deterministic=True)
                worst: dict[str, float] = {}
                compared = 0
                for seed in range(args.episodes):
                    env = make_env()
                    env.seed(seed)
                    obs, first = env.reset(), True
                    while True:
                        got = page.evaluate(DECIDE, [observation_json(obs), first])
                        want = python_outputs(policy.decide(obs, new_episode=first))
                        for key, table in want.items():
                            page_table = np.array(got[key], dtype=np.float64).reshape(table.shape)
                            diff = float(np.abs(page_table - table).max(initial=0.0))
                            worst[key] = max(worst.get(key, 0.0), diff)
                        compared += 1
                        if obs.done:
                            break
                        obs = env.act(actor.act(obs, new_episode=first))
                        first = False
                figures = ", ".join(f"{key} {value:.1e}" for key, value in sorted(worst.items()))
                print(f"{name}: {compared} observations; largest |page - Python|: {figures}")


if __name__ == "__main__":
    main()
