"""Stable-Baselines3's DQN on the survival world, through entityrl's Gymnasium adapter.

The Eden paper's Figure 14 trains DQN on DayAndNight with satiety and thirst limited to 100,
epsilon-greedy from epsilon 0.9 "gradually decreasing". Here: DayAndNight (life limit 100, the
dense reward, the ``nearest10`` fixed-size observation, the nine simple actions) as a Gymnasium
environment (``EntityGymnasiumEnv(..., observation="global")``: a Box of 225 numbers and a
Discrete of 9), SB3's ``DQN("MlpPolicy")`` with epsilon decaying linearly from 0.9 to 0.05 over
the first 30% of the steps. Each seed's final agent (greedy actions) and a uniformly random
policy then play ``--episodes`` fresh episodes; the lifetimes and returns of both, and those of
the first and last training episodes, go to the section "Survival world: SB3 DQN through the
Gymnasium adapter" of benchmarks/RESULTS.md (with ``--write``).

Stable-Baselines3 is not a dependency of entityrl (it comes with the ``sb3`` extra). Run this
with a Python that has stable-baselines3 and gymnasium and can import entityrl: the project's
venv with the ``sb3`` extra, or a venv of SB3's own into which entityrl was installed with
``pip install -e . --no-deps`` plus entityrl's plain dependencies (``pip install -c
constraints.txt omegaconf rich``; torch and numpy come with SB3).

usage: SB3_PYTHON benchmarks/survival_sb3.py [--seeds 1 2] [--steps 200000] [--episodes 100]
       [--write]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from stable_baselines3 import DQN
from stable_baselines3.common.monitor import Monitor

sys.path.insert(0, str(Path(__file__).parent))
from _peer import machine
from results import replace_section

from entityrl.envs import DayAndNight
from entityrl.interop.gymnasium import EntityGymnasiumEnv

TITLE = "Survival world: SB3 DQN through the Gymnasium adapter"
WORLD = {"life_limit": 100, "reward": "dense", "observation": "nearest10", "actions": "simple"}
# Epsilon as the paper describes it (0.9 at the start, then decreasing); how fast it decreases
# the paper does not say. The rest are sized for a few hundred thousand steps (SB3's defaults
# are Atari's, for runs of millions): a smaller buffer, an earlier start, a faster target.
DQN_SETTINGS: dict[str, Any] = {
    "exploration_initial_eps": 0.9,
    "exploration_final_eps": 0.05,
    "exploration_fraction": 0.3,
    "learning_rate": 5e-4,
    "buffer_size": 100_000,
    "learning_starts": 1_000,
    "batch_size": 64,
    "gamma": 0.99,
    "train_freq": 4,
    "target_update_interval": 1_000,
    "policy_kwargs": {"net_arch": [256, 256]},
}


def make_env() -> EntityGymnasiumEnv:
    return EntityGymnasiumEnv(DayAndNight(**WORLD), observation="global")


def play(env: EntityGymnasiumEnv, choose: Any, episodes: int, seed: int) -> dict[str, float]:
    """Mean and spread of the lifetime and return of ``episodes`` episodes of ``choose(obs)``."""
    lives, returns, deaths = [], [], []
    obs, _ = env.reset(seed=seed)
    for _ in range(episodes):
        total, steps, ended, info = 0.0, 0, False, {}
        while not ended:
            obs, reward, terminated, truncated, info = env.step(choose(obs))
            total, steps, ended = total + reward, steps + 1, terminated or truncated
        lives.append(steps)
        returns.append(total)
        deaths.append(info.get("died", 0.0))
        obs, _ = env.reset()
    return {
        "lifetime": float(np.mean(lives)),
        "lifetime_std": float(np.std(lives)),
        "return": float(np.mean(returns)),
        "died": float(np.mean(deaths)),
    }


def run_seed(seed: int, steps: int, episodes: int) -> dict[str, Any]:
    env = Monitor(make_env())
    model = DQN("MlpPolicy", env, seed=seed, device="cpu", **DQN_SETTINGS)
    started = time.time()
    model.learn(total_timesteps=steps)
    seconds = time.time() - started
    lengths = env.get_episode_lengths()
    greedy = play(
        make_env(), lambda obs: int(model.predict(obs, deterministic=True)[0]), episodes, 1000
    )
    rng = np.random.default_rng(seed)
    uniform = play(make_env(), lambda _obs: int(rng.integers(9)), episodes, 1000)
    return {
        "seed": seed,
        "seconds": seconds,
        "training_episodes": len(lengths),
        "first_100": float(np.mean(lengths[:100])),
        "last_100": float(np.mean(lengths[-100:])),
        "dqn": greedy,
        "random": uniform,
    }


def section(results: list[dict[str, Any]], command: str, steps: int, episodes: int) -> str:
    rows = [
        "| seed | training time (s) | training episodes: first 100 / last 100 lifetime | "
        "DQN lifetime | random lifetime | DQN return | random return | DQN died |",
        "|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        d, u = r["dqn"], r["random"]
        rows.append(
            f"| {r['seed']} | {r['seconds']:.0f} | {r['first_100']:.1f} / {r['last_100']:.1f} "
            f"({r['training_episodes']} episodes) | {d['lifetime']:.1f} ± {d['lifetime_std']:.1f}"
            f" | {u['lifetime']:.1f} ± {u['lifetime_std']:.1f} | {d['return']:.2f} | "
            f"{u['return']:.2f} | {d['died']:.2f} |"
        )
    settings = ", ".join(f"{k}={v}" for k, v in DQN_SETTINGS.items())
    return (
        f"Command: `{command}`\n\nMachine: {machine()}; torch threads 1.\n\n"
        f"DayAndNight ({', '.join(f'{k}={v}' for k, v in WORLD.items())}) through "
        "`EntityGymnasiumEnv(..., observation='global')` (Box of 225, Discrete of 9); "
        f"`stable_baselines3.DQN('MlpPolicy')`, {steps:,} steps per seed, {settings}. Then "
        f"{episodes} fresh episodes each (an environment reset with seed 1000) of the final "
        "agent (greedy) and of a uniformly random policy (lifetime: mean ± std over the "
        "episodes).\n\n" + "\n".join(rows)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    for option in ("steps", "episodes"):
        if getattr(args, option) < 1:
            parser.error(f"--{option} must be at least 1, got {getattr(args, option)}")
    torch.set_num_threads(1)
    results = []
    for seed in args.seeds:
        result = run_seed(seed, args.steps, args.episodes)
        print(result, flush=True)
        results.append(result)
    command = (
        f"python benchmarks/survival_sb3.py --seeds {' '.join(map(str, args.seeds))} "
        f"--steps {args.steps} --episodes {args.episodes} --write"
    )
    if args.write:
        replace_section(TITLE, section(results, command, args.steps, args.episodes))


if __name__ == "__main__":
    main()
