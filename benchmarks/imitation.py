"""Behaviour cloning from the scripted experts: the clone's return against the expert's.

For each environment with a scripted expert (entityrl.envs.experts), record the expert's
episodes (seed 0), train by behaviour cloning on them (`algo=bc`, the settings below, each
BC seed given), then evaluate the expert and the clone on the same 400 fresh episodes
(sampled actions, environment seed 12345).

With --agent NAME, the demonstrator is instead a PPO agent trained with NAME's shipped config
(seed 1), recorded with sampled actions.

usage: python benchmarks/imitation.py [--only NAME ...] [--seeds 1 2 3] [--threads 1] [--write]
       python benchmarks/imitation.py --agent CherryPick [--write]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from _peer import machine
from results import replace_section

from entityrl.envs import make_vec
from entityrl.envs.experts import EXPERTS
from entityrl.recording import record
from entityrl.training import evaluate, load_agent, make_eval_env, train

EPISODES = 400
EVAL_SEED = 12345
# Per environment: its arguments, expert episodes recorded, and the BC settings.
CASES: dict[str, tuple[dict, int, list[str]]] = {
    "CherryPick": ({}, 200, ["optim.bs=256", "optim.lr=0.003"]),
    "PickMatchingBalls": ({"one_hot": True}, 1000, ["optim.bs=256", "optim.lr=0.002"]),
    "TreasureHunt": (
        {},
        1000,
        ["optim.bs=256", "optim.lr=0.002", "net.d_model=64", "bc.patience=8"],
    ),
}
COMMON = ["bc.epochs=40", "bc.patience=5", "bc.eval_episodes=0"]


def run(
    name: str, seed: int, threads: int, from_agent: bool = False
) -> dict[str, float | str | int]:
    kwargs, episodes, settings = CASES[name]
    with tempfile.TemporaryDirectory() as tmp:
        demos = Path(tmp) / "expert.arrow"
        demonstrator = EXPERTS[name]()
        if from_agent:
            quiet = ["log.tensorboard=false", "log.progress=false", f"torch_threads={threads}"]
            ppo = train(name, overrides=[f"log.run_dir={tmp}/ppo", *quiet])
            demonstrator = load_agent(ppo.run_dir, seed=0)
            kwargs = dict(demonstrator.config.env.kwargs)
        env = make_vec(name, 16, seed=0, **kwargs)
        record(demonstrator, env, demos, episodes, env_id=name, env_kwargs=kwargs)
        started = time.time()
        result = train(
            name,
            overrides=[
                "algo=bc", f"bc.demos=[{demos}]", f"env.kwargs={kwargs}", f"seed={seed}",
                f"log.run_dir={tmp}/bc", "log.tensorboard=false", f"torch_threads={threads}",
                *COMMON, *settings,
            ],
        )  # fmt: skip
        seconds = time.time() - started
        agent = load_agent(result.run_dir, seed=0)
        with make_eval_env(agent, num_envs=16, seed=EVAL_SEED) as env:
            clone = evaluate(agent, env, EPISODES).mean()
        agent.deterministic = True
        with make_eval_env(agent, num_envs=16, seed=EVAL_SEED) as env:
            greedy = evaluate(agent, env, EPISODES).mean()
        with make_vec(name, 16, seed=EVAL_SEED, **kwargs) as env:
            expert = evaluate(demonstrator, env, EPISODES).mean()
    return {"env": name, "seed": seed, "episodes": episodes, "samples": result.steps,
            "expert": expert, "clone": clone, "greedy": greedy, "seconds": seconds}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", help="environment names")
    parser.add_argument("--seeds", nargs="*", type=int, default=[1])
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--agent", help="clone a PPO agent trained on this environment")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rows = []
    for name in [args.agent] if args.agent else args.only or list(CASES):
        for seed in args.seeds:
            row = run(name, seed, args.threads, from_agent=args.agent is not None)
            print(row, flush=True)
            rows.append(row)
    who = "PPO agent" if args.agent else "expert"
    lines = [
        f"| env | BC seed | {who} episodes | samples trained | {who} return | BC return | BC / {who} | BC most probable actions / {who} | wall time (s) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['env']} | {r['seed']} | {r['episodes']} | {r['samples']:,} | "
            f"{r['expert']:.3f} | {r['clone']:.3f} | {r['clone'] / r['expert']:.3f} | "
            f"{r['greedy'] / r['expert']:.3f} | {r['seconds']:.0f} |"
        )
    ratios = [float(r["clone"]) / float(r["expert"]) for r in rows]
    names = list(dict.fromkeys(str(r["env"]) for r in rows))
    settings = "; ".join(f"{n}: {' '.join(CASES[n][2])}" for n in names)
    body = "\n".join(
        [
            f"Command: `python benchmarks/imitation.py --seeds {' '.join(map(str, args.seeds))}"
            f" --threads {args.threads}{f' --agent {args.agent}' if args.agent else ''} --write`",
            "",
            f"Machine: {machine()}; torch threads {args.threads}.",
            "",
            f"{who[0].upper()}{who[1:]} episodes recorded with seed 0"
            + (
                " (the agent: PPO with the shipped config, seed 1, sampled actions)"
                if args.agent
                else ""
            )
            + "; behaviour cloning with "
            f"{' '.join(COMMON)} and per environment {settings} (other settings from the "
            f"environment's shipped config); {who} and clone evaluated on the same {EPISODES} "
            f"episodes (environment seed {EVAL_SEED}, sampled actions).",
            "",
            *lines,
            "",
            f"Median BC / {who} over these runs: {statistics.median(ratios):.3f}.",
        ]
    )
    print(body)
    if args.write:
        source = "a PPO agent" if args.agent else "scripted experts"
        only = f": {', '.join(args.only)}" if args.only else ""
        replace_section(f"Behaviour cloning from {source}{only} (benchmarks/imitation.py)", body)


if __name__ == "__main__":
    main()
