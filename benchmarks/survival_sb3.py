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

With ``--algo maskable-ppo`` (issue #32): sb3-contrib's ``MaskablePPO("MlpPolicy")`` with its
default settings on the same world through the same adapter, the mask from the adapter's
``action_masks()`` (while training and playing). Each seed's final agent plays ``--episodes``
fresh episodes with sampled actions (as PPO trains; the judged figure, as in
``benchmarks/off_policy_survival.py``) and with its most probable ones (greedy); random play is
``--random-episodes`` episodes of uniformly random legal actions (entityrl's ``RandomPolicy``,
the baseline of ``off_policy_survival.py``) and of uniformly random actions (illegal ones idle).
Lifetimes: per seed, the mean over episodes with a 95% interval (normal approximation); over
seeds, the IQM of the seeds' means with a 95% stratified bootstrap interval
(:func:`entityrl.stats.interval`). With ``--write`` it goes to the section "Survival world:
sb3-contrib MaskablePPO through the Gymnasium adapter".

usage: SB3_PYTHON benchmarks/survival_sb3.py [--algo dqn] [--seeds 1 2] [--steps 200000]
       [--episodes 100] [--random-episodes 1000] [--write]
"""

from __future__ import annotations

import argparse
import math
import os
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

from entityrl import stats
from entityrl.envs import DayAndNight
from entityrl.interop.gymnasium import EntityGymnasiumEnv

TITLE = "Survival world: SB3 DQN through the Gymnasium adapter"
MASKABLE_TITLE = "Survival world: sb3-contrib MaskablePPO through the Gymnasium adapter"
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


def play(env: EntityGymnasiumEnv, choose: Any, episodes: int, seed: int) -> dict[str, Any]:
    """Mean and spread of the lifetime and return of ``episodes`` episodes of
    ``choose(obs, mask)`` (``mask``: the legal actions, ``env.action_masks()``)."""
    lives, returns, deaths = [], [], []
    obs, _ = env.reset(seed=seed)
    for _ in range(episodes):
        total, steps, ended, info = 0.0, 0, False, {}
        while not ended:
            action = choose(obs, env.action_masks())
            obs, reward, terminated, truncated, info = env.step(action)
            total, steps, ended = total + reward, steps + 1, terminated or truncated
        lives.append(steps)
        returns.append(total)
        deaths.append(info.get("died", 0.0))
        obs, _ = env.reset()
    return {
        "lifetime": float(np.mean(lives)),
        "lifetime_std": float(np.std(lives)),
        "lifetime_ci": 1.96 * float(np.std(lives, ddof=1)) / math.sqrt(len(lives))
        if len(lives) > 1
        else 0.0,
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
        make_env(),
        lambda obs, _mask: int(model.predict(obs, deterministic=True)[0]),
        episodes,
        1000,
    )
    rng = np.random.default_rng(seed)
    uniform = play(make_env(), lambda _obs, _mask: int(rng.integers(9)), episodes, 1000)
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


def load() -> str:
    return "/".join(f"{v:.1f}" for v in os.getloadavg())


def random_play(episodes: int) -> dict[str, Any]:
    """Uniformly random legal actions (``legal``) and uniformly random actions (``uniform``)."""
    rng = np.random.default_rng(0)
    started = time.time()
    legal = play(make_env(), lambda _obs, mask: int(rng.choice(np.flatnonzero(mask))),
                 episodes, 1000)  # fmt: skip
    uniform = play(make_env(), lambda _obs, _mask: int(rng.integers(9)), episodes, 1000)
    return {"legal": legal, "uniform": uniform, "seconds": time.time() - started, "load": load()}


def run_maskable(seed: int, steps: int, episodes: int) -> dict[str, Any]:
    """MaskablePPO with sb3-contrib's defaults; its agent's lifetimes, sampled and greedy."""
    from sb3_contrib import MaskablePPO

    env = Monitor(make_env())
    model = MaskablePPO("MlpPolicy", env, seed=seed, device="cpu")
    started = time.time()
    model.learn(total_timesteps=steps)
    seconds = time.time() - started
    lengths = env.get_episode_lengths()
    row: dict[str, Any] = {"seed": seed, "seconds": seconds, "load": load(),
                           "training_episodes": len(lengths),
                           "first_100": float(np.mean(lengths[:100])),
                           "last_100": float(np.mean(lengths[-100:]))}  # fmt: skip
    for name, deterministic in (("sampled", False), ("greedy", True)):
        row[name] = play(
            make_env(),
            lambda obs, mask, d=deterministic: int(
                model.predict(obs, action_masks=mask, deterministic=d)[0]
            ),
            episodes,
            1000,
        )
    return row


def maskable_section(
    results: list[dict[str, Any]], rand: dict[str, Any], command: str, steps: int, episodes: int,
    random_episodes: int,
) -> str:  # fmt: skip
    def cell(r: dict[str, Any]) -> str:
        return f"{r['lifetime']:.1f} ± {r['lifetime_ci']:.1f}"

    rows = [
        "| policy | seed | lifetime sampled (95% CI) | lifetime greedy (95% CI) | return "
        "sampled | training episodes: first 100 / last 100 lifetime | wall s | load average |",
        "| --- | ---: | ---: | ---: | ---: | --- | ---: | --- |",
        f"| random legal actions ({random_episodes} episodes) | - | {cell(rand['legal'])} | - | "
        f"{rand['legal']['return']:.2f} | - | {rand['seconds']:.0f} (both random) | "
        f"{rand['load']} |",
        f"| uniformly random actions ({random_episodes} episodes) | - | "
        f"{cell(rand['uniform'])} | - | {rand['uniform']['return']:.2f} | - | - | - |",
    ]
    for r in results:
        rows.append(
            f"| MaskablePPO | {r['seed']} | {cell(r['sampled'])} | {cell(r['greedy'])} | "
            f"{r['sampled']['return']:.2f} | {r['first_100']:.1f} / {r['last_100']:.1f} "
            f"({r['training_episodes']} episodes) | {r['seconds']:.0f} | {r['load']} |"
        )
    summary = []
    for name in ("sampled", "greedy"):
        estimate = stats.interval([[r[name]["lifetime"] for r in results]])
        summary.append(
            f"{name}: IQM of the seeds' mean lifetimes {estimate.value:.1f} "
            f"[{estimate.low:.1f}, {estimate.high:.1f}]"
        )
    return (
        f"Command: `{command}`\n\nMachine: {machine()}; torch threads 1.\n\n"
        f"DayAndNight ({', '.join(f'{k}={v}' for k, v in WORLD.items())}) through "
        "`EntityGymnasiumEnv(..., observation='global')` (Box of 225, Discrete of 9, the legal "
        "actions from `action_masks()`); `sb3_contrib.MaskablePPO('MlpPolicy')` with its "
        f"defaults (n_steps 2048, batch 64, 10 epochs, lr 3e-4, 64x64 MLP), {steps:,} steps per "
        f"seed. Then {episodes} fresh episodes each (an environment reset with seed 1000) of "
        "the final agent, sampled and greedy, masked. Lifetime: mean with a 95% interval over "
        "the episodes. Over seeds (`entityrl.stats.interval`, IQM of the seeds' means, 95% "
        "stratified bootstrap): " + "; ".join(summary) + ".\n\n" + "\n".join(rows)
    )


def main_maskable(args: argparse.Namespace) -> None:
    rand = random_play(args.random_episodes)
    print({"random": rand}, flush=True)
    results = []
    for seed in args.seeds:
        result = run_maskable(seed, args.steps, args.episodes)
        print(result, flush=True)
        results.append(result)
    for name in ("sampled", "greedy"):
        print(name, stats.interval([[r[name]["lifetime"] for r in results]]))
    command = (
        f"python benchmarks/survival_sb3.py --algo maskable-ppo --seeds "
        f"{' '.join(map(str, args.seeds))} --steps {args.steps} --episodes {args.episodes} "
        f"--random-episodes {args.random_episodes} --write"
    )
    if args.write:
        replace_section(MASKABLE_TITLE, maskable_section(
            results, rand, command, args.steps, args.episodes, args.random_episodes))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--algo", choices=["dqn", "maskable-ppo"], default="dqn")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--random-episodes", type=int, default=1000,
                        help="maskable-ppo: episodes of random play")  # fmt: skip
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    for option in ("steps", "episodes", "random_episodes"):
        if getattr(args, option) < 1:
            flag = option.replace("_", "-")
            parser.error(f"--{flag} must be at least 1, got {getattr(args, option)}")
    torch.set_num_threads(1)
    if args.algo == "maskable-ppo":
        main_maskable(args)
        return
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
