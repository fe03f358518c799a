"""PPO on MultiSnake's own reward (two snakes of length 4), under settings given as overrides:
does the reinforcement learner under adversarial imitation reach the expert?

Trains PPO on the environment's reward with the same environment arguments as
benchmarks/adversarial_imitation.py's MultiSnake case, then evaluates the agent and the scripted
expert on the same 400 episodes of seed 12345 (sampled actions) and prints the ratio, as that
benchmark does, and how the agent's episodes end (benchmarks/multisnake_endings.py). The run
directory is kept (``--runs``) for multisnake_endings.py.

usage: python benchmarks/multisnake_ppo.py --name NAME [--seeds 1 2 3] [--steps N]
                                           [--set KEY=VALUE ...] [--runs DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
from multisnake_endings import EVAL_SEED, KWARGS, play

from entityrl.envs import make_vec
from entityrl.envs.experts import multi_snake_expert
from entityrl.recording import FunctionExpert
from entityrl.training import evaluate, load_agent, make_eval_env, train

EPISODES = 400


def run(name: str, seed: int, steps: int, extra: list[str], runs: Path) -> dict[str, object]:
    started = time.time()
    result = train(
        "MultiSnake",
        overrides=[
            *extra, f"env.kwargs={KWARGS}", f"seed={seed}", f"total_timesteps={steps}",
            f"log.run_dir={runs}/{name}-{seed}", "log.tensorboard=false", "log.progress=false",
            "torch_threads=1",
        ],
    )  # fmt: skip
    seconds = time.time() - started
    agent = load_agent(result.run_dir, seed=0)
    with make_eval_env(agent, num_envs=16, seed=EVAL_SEED) as env:
        agent_return = evaluate(agent, env, EPISODES).mean()
    with make_vec("MultiSnake", 16, seed=EVAL_SEED, **KWARGS) as env:
        expert_return = evaluate(FunctionExpert(multi_snake_expert, env), env, EPISODES).mean()
    return {"name": name, "seed": seed, "steps": result.steps, "set": extra,
            "training_return": round(result.mean_return or 0.0, 3),
            "agent": round(float(agent_return), 3),
            "ratio": round(float(agent_return / expert_return), 3), "seconds": round(seconds),
            "load": [round(x, 2) for x in os.getloadavg()]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--name", required=True, help="the variant's name (run directories)")
    parser.add_argument("--seeds", nargs="*", type=int, default=[1])
    parser.add_argument("--steps", type=int, default=600_000)
    parser.add_argument("--set", nargs="*", default=[], help="overrides (ppo.gamma=0.95)")
    parser.add_argument("--runs", default="/tmp/multisnake_ppo", help="where runs are kept")
    parser.add_argument("--endings", action="store_true", help="classify the agent's endings")
    args = parser.parse_args()
    torch.set_num_threads(1)
    for seed in args.seeds:
        row = run(args.name, seed, args.steps, args.set, Path(args.runs))
        print(json.dumps(row), flush=True)
        if args.endings:
            play(load_agent(f"{args.runs}/{args.name}-{seed}", seed=0), EPISODES)


if __name__ == "__main__":
    main()
