"""DQN and SAC (and PPO) against random play's lifetime on the survival world (issue #30).

The world: DayAndNight with life limit 100, the dense reward, the entity observation and the
nine simple actions (``actions=simple``), the setup of the Eden studies
(``experiments/survival_stress/day_and_night_ll100_dense.yaml``, where PPO lives 1.7x as long
as random play at 300k steps). The simple actions, not the full ones: with the full action
space PPO learned to drink but not to hunt within 300k steps and lived no longer than random
play (docs/survival.md, "Survival-stress findings"), so the full space would not tell a
learner from a non-learner at a budget this machine allows. Every method gets the same world.

1. Random play: uniformly random legal actions (``RandomPolicy``), ``--random-episodes``
   episodes; its mean lifetime (``episode_length``) with a 95% interval.
2. Per method and seed, ``--steps`` environment steps of training: ``algo=dqn`` and
   ``algo=sac`` from their shipped configs (``entityrl/configs/{dqn,sac}/day_and_night.yaml``,
   picked by ``algo=``), PPO from the survival-stress config above. Then ``--episodes`` fresh
   episodes of the trained agent, with its most probable actions (greedy) and with sampled
   actions: DQN's policy is its greedy one (its sampled figure is a softmax of Q-values, not
   a policy it trained), PPO's the sampled one (as it trains), SAC both.

Each figure is printed with the wall seconds of the training run and the load average when
the run ended (the machine may be shared), then a table and the medians over the seeds.

usage: python benchmarks/off_policy_survival.py [--seeds 1 2 3] [--methods dqn sac ppo]
       [--steps 40960] [--episodes 200] [--random-episodes 1000] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from entityrl.env import RandomPolicy
from entityrl.envs import make_vec
from entityrl.training import evaluate, load_agent, make_eval_env
from entityrl.training.config import load_config
from entityrl.training.runner import Trainer

ROOT = Path(__file__).resolve().parent.parent
WORLD = {"life_limit": 100, "reward": "dense", "observation": "entities", "actions": "simple"}
ENV_OVERRIDES = [f"env.kwargs.{key}={value}" for key, value in WORLD.items()]
PPO_CONFIG = ROOT / "experiments/survival_stress/day_and_night_ll100_dense.yaml"
QUIET = ["log.tensorboard=false", "log.progress=false"]
EVAL_SEED = 4242


def load() -> str:
    return "/".join(f"{v:.1f}" for v in os.getloadavg())


def interval(values: np.ndarray) -> tuple[float, float]:
    """The mean and the half width of its 95% interval (normal approximation)."""
    mean = float(np.mean(values))
    half = 1.96 * float(np.std(values, ddof=1)) / math.sqrt(len(values)) if len(values) > 1 else 0
    return mean, half


def random_lifetime(episodes: int, seed: int = EVAL_SEED) -> dict[str, object]:
    env = make_vec("DayAndNight", 32, seed=seed, **WORLD)
    try:
        result = evaluate(RandomPolicy(env.action_space, seed=0), env, episodes)
    finally:
        env.close()
    mean, half = interval(result.metrics["episode_length"])
    return {"lifetime": mean, "ci": half, "return": result.mean("episode_return")}


def lifetime(run_dir: Path, deterministic: bool, episodes: int) -> tuple[float, float]:
    agent = load_agent(run_dir, seed=0, deterministic=deterministic)
    with make_eval_env(agent, num_envs=32, seed=EVAL_SEED) as env:
        return interval(evaluate(agent, env, episodes).metrics["episode_length"])


def train(method: str, seed: int, steps: int, episodes: int, threads: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as run_dir:
        common = [*QUIET, f"log.run_dir={run_dir}", f"seed={seed}", f"torch_threads={threads}",
                  f"total_timesteps={steps}", *ENV_OVERRIDES]  # fmt: skip
        if method == "ppo":
            config = load_config(PPO_CONFIG, common)
        else:
            config = load_config("DayAndNight", [f"algo={method}", *common])
        started = time.time()
        result = Trainer(config).run()
        row: dict[str, object] = {"steps": result.steps, "seconds": time.time() - started,
                                  "load": load()}  # fmt: skip
        for name, deterministic in (("greedy", True), ("sampled", False)):
            row[name], row[f"{name}_ci"] = lifetime(Path(run_dir), deterministic, episodes)
    return row


# The figure each method is judged by (see the module's docstring).
PRIMARY = {"dqn": "greedy", "sac": "greedy", "ppo": "sampled"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--methods", nargs="+", choices=["dqn", "sac", "ppo"],
                        default=["dqn", "sac", "ppo"])  # fmt: skip
    parser.add_argument("--steps", type=int, default=40_960)
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--random-episodes", type=int, default=1000,
                        help="0: skip random play")  # fmt: skip
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    table = ["| method | seed | steps | lifetime greedy (95% CI) | lifetime sampled (95% CI) "
             "| wall s | load average |", "| --- | --- | ---: | ---: | ---: | ---: | --- |"]  # fmt: skip
    if args.random_episodes:
        started = time.time()
        rand = random_lifetime(args.random_episodes)
        rand["seconds"], rand["load"] = time.time() - started, load()
        print(json.dumps({"method": "random", "episodes": args.random_episodes, **rand}),
              flush=True)  # fmt: skip
        table.append(f"| random | - | - | - | {rand['lifetime']:.1f} ± {rand['ci']:.1f} "
                     f"({args.random_episodes} episodes) | {rand['seconds']:.0f} | "
                     f"{rand['load']} |")  # fmt: skip
    rows: dict[str, list[dict[str, object]]] = {method: [] for method in args.methods}
    for seed in args.seeds:  # seeds outermost: a stopped run still compares every method
        for method in args.methods:
            row = train(method, seed, args.steps, args.episodes, args.threads)
            rows[method].append(row)
            print(json.dumps({"method": method, "seed": seed, **row}), flush=True)
            table.append(
                f"| {method} | {seed} | {row['steps']:,} | {row['greedy']:.1f} ± "
                f"{row['greedy_ci']:.1f} | {row['sampled']:.1f} ± {row['sampled_ci']:.1f} | "
                f"{row['seconds']:.0f} | {row['load']} |"
            )
    medians = []
    for method, done in rows.items():
        key = PRIMARY[method]
        middle = statistics.median(float(r[key]) for r in done)  # type: ignore[arg-type]
        bounds = ", ".join(
            f"{float(r[key]) - float(r[f'{key}_ci']):.1f}-"  # type: ignore[arg-type]
            f"{float(r[key]) + float(r[f'{key}_ci']):.1f}"
            for r in done
        )  # type: ignore[arg-type]
        medians.append(f"{method}: median {key} lifetime {middle:.1f} over seeds "
                       f"{' '.join(map(str, args.seeds))} (per-seed 95% intervals {bounds})")  # fmt: skip
    print("\n".join(table))
    print("\n".join(medians))


if __name__ == "__main__":
    main()
