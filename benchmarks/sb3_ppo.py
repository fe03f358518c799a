"""Stable-Baselines3 PPO on a Gymnasium task, run in SB3's own virtual environment.

Not part of entityrl (it imports no entityrl code): benchmarks/external.py starts it with the
Python of a venv holding stable-baselines3 and reads the one JSON line it prints.

usage: SB3_PYTHON benchmarks/sb3_ppo.py --env CartPole-v1 --seed 1 --steps 100000
"""

from __future__ import annotations

import argparse
import json
import time

import gymnasium
import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env

# RL Baselines3 Zoo's tuned hyperparameters for CartPole-v1 (linear schedules as there).
ZOO = {
    "CartPole-v1": {
        "n_envs": 8,
        "kwargs": {
            "n_steps": 32, "batch_size": 256, "gae_lambda": 0.8, "gamma": 0.98, "n_epochs": 20,
            "ent_coef": 0.0, "learning_rate": lambda f: 0.001 * f, "clip_range": lambda f: 0.2 * f,
        },
    },
}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="CartPole-v1", choices=sorted(ZOO))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--episodes", type=int, default=400)
    args = parser.parse_args()
    torch.set_num_threads(1)
    spec = ZOO[args.env]
    env = make_vec_env(args.env, n_envs=spec["n_envs"], seed=args.seed)
    model = PPO("MlpPolicy", env, seed=args.seed, device="cpu", **spec["kwargs"])
    started = time.time()
    model.learn(total_timesteps=args.steps)
    seconds = time.time() - started
    returns = evaluate(model, args.env, args.episodes, seed=12345)
    print(json.dumps({"steps": args.steps, "seconds": seconds, "reached": float(np.mean(returns))}))


def evaluate(model: PPO, env_id: str, episodes: int, seed: int) -> list[float]:
    """Returns of ``episodes`` episodes with sampled actions (as entityrl's evaluation)."""
    env = gymnasium.make(env_id)
    returns = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        total, done = 0.0, False
        while not done:
            action, _ = model.predict(obs, deterministic=False)
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    return returns


if __name__ == "__main__":
    main()
