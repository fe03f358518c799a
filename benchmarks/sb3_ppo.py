"""Stable-Baselines3 PPO on a Gymnasium task, run in SB3's own virtual environment.

Not part of entityrl (it imports no entityrl code): benchmarks/external.py starts it with the
Python of a venv holding stable-baselines3 (and minigrid for the MiniGrid tasks, crafter for
Crafter) and reads the one JSON line it prints: the training wall time, the steps trained, the
final agent's mean return and success rate over fresh episodes (sampled actions; also with
its most probable actions, as RL Zoo's benchmark evaluates: ``greedy_*``), on Crafter
the rate at which those episodes unlocked each achievement, and the learning curve.

With ``--defaults`` it trains as a new SB3 user would: ``PPO("MlpPolicy", env)`` on one
environment with SB3's default hyperparameters, for any Gymnasium id (MiniGrid's dict
observation flattened by ``FlatObsWrapper``, as RL Zoo does; nothing normalized).

Like entityrl's periodic evaluation, every ``--eval-interval`` steps the agent plays
``--eval-episodes`` episodes with sampled actions; the curve records (steps, seconds, mean
return, success rate) after each, and with ``--stop-metric`` training ends at the first
evaluation whose mean of that metric reaches ``--stop-at``. The evaluations count in the wall
time, as entityrl's do.

usage: SB3_PYTHON benchmarks/sb3_ppo.py --env CartPole-v1 --seed 1 --steps 100000
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import gymnasium
import numpy as np
import numpy.typing as npt
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import VecEnv, VecNormalize, sync_envs_normalization

# RL Baselines3 Zoo's tuned hyperparameters (rl_zoo3/hyperparams/ppo.yml; linear schedules as
# there). Its MiniGrid entries share one set: FlatObsWrapper, normalized observations and
# rewards, an MLP.
MINIGRID = {
    "n_envs": 8, "wrapper": "FlatObsWrapper", "normalize": True,
    "kwargs": {
        "n_steps": 128, "batch_size": 64, "gae_lambda": 0.95, "gamma": 0.99, "n_epochs": 10,
        "ent_coef": 0.0, "learning_rate": 2.5e-4, "clip_range": 0.2,
    },
}  # fmt: skip
ZOO: dict[str, dict[str, Any]] = {
    "CartPole-v1": {
        "n_envs": 8, "wrapper": None, "normalize": False,
        "kwargs": {
            "n_steps": 32, "batch_size": 256, "gae_lambda": 0.8, "gamma": 0.98, "n_epochs": 20,
            "ent_coef": 0.0, "learning_rate": lambda f: 0.001 * f, "clip_range": lambda f: 0.2 * f,
        },
    },
    "MiniGrid-DoorKey-5x5-v0": MINIGRID,
    "MiniGrid-Empty-Random-5x5-v0": MINIGRID,
    # The Crafter paper's PPO baseline: SB3's defaults and CNN policy on the 64 x 64 image, one
    # environment (n_steps 2048, batch 64, 10 epochs, lr 3e-4).
    "Crafter": {"n_envs": 1, "wrapper": None, "normalize": False, "policy": "CnnPolicy",
                "kwargs": {}},
}  # fmt: skip


class CrafterImage(gymnasium.Env):  # type: ignore[type-arg]
    """Crafter (Gym's old four-value step) as a Gymnasium environment: its 64 x 64 RGB image,
    its 17 actions; the episode is terminated when the player dies, truncated at the time
    limit. The info of an episode's last step holds its achievements (unlock counts)."""

    observation_space = gymnasium.spaces.Box(0, 255, (64, 64, 3), np.uint8)
    action_space = gymnasium.spaces.Discrete(17)

    def __init__(self) -> None:
        import crafter

        self.make = crafter.Env
        self.env = crafter.Env()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[npt.NDArray[np.uint8], dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:  # Crafter seeds its worlds at construction
            self.env = self.make(seed=seed)
        return self.env.reset(), {}

    def step(self, action: int) -> tuple[npt.NDArray[np.uint8], float, bool, bool, dict[str, Any]]:
        obs, reward, done, info = self.env.step(int(action))
        died = info["discount"] == 0
        return obs, float(reward), bool(done and died), bool(done and not died), info


gymnasium.register("Crafter", entry_point=CrafterImage)


def defaults(env_id: str) -> dict[str, Any]:
    """SB3's defaults: one environment, MlpPolicy, PPO's own hyperparameters."""
    wrapper = "FlatObsWrapper" if env_id.startswith("MiniGrid") else None
    return {"n_envs": 1, "wrapper": wrapper, "normalize": False, "kwargs": {}}


def make_env(spec: dict[str, Any], env_id: str, n: int, seed: int) -> VecEnv:
    wrapper = None
    if spec["wrapper"]:
        import minigrid.wrappers

        wrapper = getattr(minigrid.wrappers, spec["wrapper"])
    return make_vec_env(env_id, n_envs=n, seed=seed, wrapper_class=wrapper)


def play(
    model: PPO, env: VecEnv, episodes: int, deterministic: bool = False
) -> tuple[float, float, dict[str, float]]:
    """Mean return, success rate (return > 0: MiniGrid rewards only reaching the goal) and,
    on Crafter, each achievement's unlock rate, of ``episodes`` episodes with sampled actions
    (``deterministic``: the most probable ones)."""
    unlocked: list[dict[str, int]] = []

    def record(step: dict[str, Any], _: dict[str, Any]) -> None:
        if step["done"] and "achievements" in step["info"]:
            unlocked.append(step["info"]["achievements"])

    returns, _ = evaluate_policy(
        model, env, n_eval_episodes=episodes, deterministic=deterministic, return_episode_rewards=True,
        callback=record,
    )  # fmt: skip
    returns = np.asarray(returns, dtype=np.float64)
    names = unlocked[0] if unlocked else {}
    rates = {name: float(np.mean([u[name] > 0 for u in unlocked])) for name in names}
    return float(returns.mean()), float((returns > 0).mean()), rates


class PeriodicEvaluation(BaseCallback):
    """Plays ``episodes`` every ``interval`` steps; records the curve; stops at the target."""

    def __init__(
        self,
        eval_env: VecEnv,
        interval: int,
        episodes: int,
        metric: str | None,
        target: float,
        started: float,
    ) -> None:
        super().__init__()
        self.eval_env, self.interval, self.episodes = eval_env, interval, episodes
        self.metric, self.target = metric, target
        self.next_eval = interval
        self.started = started
        self.curve: list[tuple[int, float, float, float]] = []

    def _on_step(self) -> bool:
        if self.interval <= 0 or self.num_timesteps < self.next_eval:
            return True
        while self.next_eval <= self.num_timesteps:
            self.next_eval += self.interval
        sync_envs_normalization(self.training_env, self.eval_env)
        mean_return, success, _ = play(self.model, self.eval_env, self.episodes)
        self.curve.append((self.num_timesteps, time.time() - self.started, mean_return, success))
        reached = {"return": mean_return, "success": success}.get(self.metric or "")
        return reached is None or reached < self.target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="CartPole-v1", help=f"tuned: {', '.join(ZOO)}")
    parser.add_argument("--defaults", action="store_true", help="SB3's defaults, not RL Zoo's")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--episodes", type=int, default=400)
    parser.add_argument("--eval-interval", type=int, default=0)
    parser.add_argument("--eval-episodes", type=int, default=32)
    parser.add_argument("--stop-metric", choices=["return", "success"])
    parser.add_argument("--stop-at", type=float, default=float("inf"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    spec = defaults(args.env) if args.defaults else ZOO[args.env]
    started = time.time()  # as entityrl's time: from building the environments on
    env = make_env(spec, args.env, spec["n_envs"], args.seed)
    eval_env = make_env(spec, args.env, args.eval_episodes, args.seed + 10_000)  # one episode each
    if spec["normalize"]:
        env = VecNormalize(env)
        eval_env = VecNormalize(eval_env, training=False, norm_reward=False)
    model = PPO(
        spec.get("policy", "MlpPolicy"), env, seed=args.seed, device="cpu", **spec["kwargs"]
    )
    callback = PeriodicEvaluation(
        eval_env, args.eval_interval, args.eval_episodes, args.stop_metric, args.stop_at, started
    )
    model.learn(total_timesteps=args.steps, callback=callback)
    seconds = time.time() - started
    final_env = make_env(spec, args.env, 16, 12345)
    if spec["normalize"]:
        final_env = VecNormalize(final_env, training=False, norm_reward=False)
        sync_envs_normalization(env, final_env)
    reached, success, achievements = play(model, final_env, args.episodes)
    greedy_reached, greedy_success, _ = play(model, final_env, args.episodes, deterministic=True)
    print(
        json.dumps(
            {
                "steps": int(model.num_timesteps),
                "seconds": seconds,
                "reached": reached,
                "success": success,
                "greedy_reached": greedy_reached,
                "greedy_success": greedy_success,
                "achievements": achievements,
                "curve": callback.curve,
            }
        )
    )


if __name__ == "__main__":
    gymnasium.logger.min_level = 40  # no warnings about the wrappers on every run
    main()
