"""DQN (algo=dqn) against its targets (issue #30), side by side with Stable-Baselines3's DQN.

Tasks:
- ``cartpole``: CartPole-v1, mean return 475 within 100k steps. entityrl trains with its shipped
  DQN config (entityrl/configs/dqn/gymnasium_cartpole_v1.yaml); SB3 with RL Baselines3 Zoo's
  published DQN hyperparameters for CartPole-v1 (hyperparams/dqn.yml). Both evaluate the greedy
  policy on 32 episodes every 5,120 steps and stop at the first evaluation reaching 475; the
  evaluations count in the wall time.
- ``doorkey``: MiniGrid-DoorKey-5x5, success (mean return > 0 per episode) 0.9, same rule,
  every 8,192 steps within 150k. The Zoo publishes no DQN hyperparameters for MiniGrid: SB3 gets
  the observation as the Zoo's MiniGrid entries give it to PPO (FlatObsWrapper) and the Zoo's
  CartPole-v1 DQN settings (SB3_DQN); say so wherever the figure is quoted.
- ``cherrypick``: CherryPick, DQN's final greedy return against PPO's final return (its shipped
  config, sampled actions) after the same steps (61,440); the target is 0.9 of PPO's.

Both trainers run in this process, one after the other, with one torch thread. Steps and
seconds to the target are per seed and as medians; the load average is printed with them.

usage: python benchmarks/dqn.py --tasks cartpole cherrypick --seeds 1 2 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import torch
from stable_baselines3 import DQN
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.evaluation import evaluate_policy

from entityrl.training import evaluate, load_agent, load_config, make_eval_env
from entityrl.training.runner import Trainer

EVAL_EPISODES = 32
QUIET = ["log.tensorboard=false", "log.progress=false", "torch_threads=1"]

# RL Baselines3 Zoo, hyperparams/dqn.yml, CartPole-v1 ("Almost Tuned").
ZOO_CARTPOLE: dict[str, Any] = {
    "learning_rate": 2.3e-3, "batch_size": 64, "buffer_size": 100_000, "learning_starts": 1000,
    "gamma": 0.99, "target_update_interval": 10, "train_freq": 256, "gradient_steps": 128,
    "exploration_fraction": 0.16, "exploration_final_eps": 0.04,
    "policy_kwargs": {"net_arch": [256, 256]},
}  # fmt: skip
SB3_DQN = {"cartpole": ZOO_CARTPOLE, "doorkey": ZOO_CARTPOLE}


@dataclass(frozen=True)
class Task:
    env_id: str
    gym_id: str
    target: float
    budget: int
    interval: int
    metric: str  # "return" or "success"


TASKS = {
    "cartpole": Task("gymnasium:CartPole-v1", "CartPole-v1", 475, 100_000, 5120, "return"),
    "doorkey": Task(
        "minigrid:MiniGrid-DoorKey-5x5-v0", "MiniGrid-DoorKey-5x5-v0", 0.9, 150_000, 8192,
        "success",
    ),
}  # fmt: skip


@dataclass
class Reached:
    steps: int | None
    """Steps at the first evaluation that reached the target (None: never)."""
    seconds: float | None
    best: float


def entityrl_run(task: Task, seed: int) -> Reached:
    with tempfile.TemporaryDirectory() as run_dir:
        # The loop stops at a mean return of task.target; on MiniGrid an episode's return is
        # at most 1 and 0 unless it succeeded, so the success rate reached it no later.
        overrides = [*QUIET, "algo=dqn", f"seed={seed}", f"log.run_dir={run_dir}",
                     f"total_timesteps={task.budget}", f"eval.interval={task.interval}",
                     f"eval.episodes={EVAL_EPISODES}", f"target_return={task.target}",
                     "eval.stop_at_target=true"]  # fmt: skip
        config = load_config(task.env_id, overrides)
        started = time.time()
        Trainer(config).run()
        evals = [
            json.loads(line)
            for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()
            if '"eval/episode_return"' in line
        ]
    key = "eval/success" if task.metric == "success" else "eval/episode_return"
    for e in evals:
        if e.get(key, -np.inf) >= task.target:
            return Reached(e["step"], e["time"] - started, e[key])
    return Reached(None, None, max((e.get(key, -np.inf) for e in evals), default=float("nan")))


class Evaluations(BaseCallback):
    """Greedy evaluation every ``interval`` steps; stops training at the target."""

    def __init__(self, task: Task, eval_env: Any, started: float) -> None:
        super().__init__()
        self.task, self.eval_env, self.started = task, eval_env, started
        self.next_eval, self.reached = task.interval, Reached(None, None, -np.inf)

    def _on_step(self) -> bool:
        if self.num_timesteps < self.next_eval:
            return True
        self.next_eval += self.task.interval
        returns, _ = evaluate_policy(
            self.model, self.eval_env, EVAL_EPISODES, deterministic=True,
            return_episode_rewards=True,
        )  # fmt: skip
        returns = np.asarray(returns)
        value = float((returns > 0).mean() if self.task.metric == "success" else returns.mean())
        self.reached.best = max(self.reached.best, value)
        if value >= self.task.target:
            self.reached = Reached(self.num_timesteps, time.time() - self.started, value)
            return False
        return True


def sb3_env(task: Task, seed: int) -> gymnasium.Env:
    env = gymnasium.make(task.gym_id)
    if task.metric == "success":
        import minigrid.wrappers

        env = minigrid.wrappers.FlatObsWrapper(env)
    env.reset(seed=seed)
    return env


def sb3_run(task: Task, seed: int, name: str) -> Reached:
    started = time.time()
    model = DQN("MlpPolicy", sb3_env(task, seed), seed=seed, device="cpu", **SB3_DQN[name])
    callback = Evaluations(task, sb3_env(task, seed + 1000), started)
    model.learn(task.budget, callback=callback)
    return callback.reached


def cherry_pick(seed: int) -> tuple[float, float, float, float]:
    """(DQN's final return, PPO's, their seconds) after the same steps."""
    out = []
    for algo in ("dqn", "ppo"):
        with tempfile.TemporaryDirectory() as run_dir:
            config = load_config(
                "CherryPick", [*QUIET, f"algo={algo}", f"seed={seed}", f"log.run_dir={run_dir}"]
            )
            started = time.time()
            Trainer(config).run()
            seconds = time.time() - started
            agent = load_agent(run_dir, seed=0, deterministic=algo == "dqn")
            with make_eval_env(agent, num_envs=16, seed=12345) as env:
                out.append((evaluate(agent, env, episodes=200).mean(), seconds))
    (dqn_return, dqn_seconds), (ppo_return, ppo_seconds) = out
    return dqn_return, ppo_return, dqn_seconds, ppo_seconds


def median(values: list[float | None]) -> str:
    """The median, counting runs that never reached the target as infinitely late."""
    known = [v if v is not None else float("inf") for v in values]
    m = statistics.median(known)
    return "not reached" if m == float("inf") else f"{m:,.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=["cartpole", "cherrypick"],
                        choices=[*TASKS, "cherrypick"])  # fmt: skip
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    args = parser.parse_args()
    torch.set_num_threads(1)
    for name in args.tasks:
        if name == "cherrypick":
            print("\nCherryPick, 61,440 steps: final return (200 episodes)")
            print("| seed | DQN (greedy) | PPO (sampled) | DQN / PPO | DQN s | PPO s | load |")
            print("| --- | --- | --- | --- | --- | --- | --- |")
            ratios = []
            for seed in args.seeds:
                d, p, ds, ps = cherry_pick(seed)
                ratios.append(d / p)
                print(f"| {seed} | {d:.3f} | {p:.3f} | {d / p:.2f} | {ds:.0f} | {ps:.0f} "
                      f"| {os.getloadavg()[0]:.1f} |", flush=True)  # fmt: skip
            print(f"| median | | | {statistics.median(ratios):.2f} | | | |")
            continue
        task = TASKS[name]
        print(f"\n{task.gym_id}: steps and seconds to {task.metric} {task.target}")
        print("| seed | entityrl steps | entityrl s | SB3 steps | SB3 s | load |")
        print("| --- | --- | --- | --- | --- | --- |")
        rows = []
        for seed in args.seeds:
            ours, theirs = entityrl_run(task, seed), sb3_run(task, seed, name)
            rows.append((ours, theirs))
            print(f"| {seed} | {ours.steps} (best {ours.best:.2f}) | {median([ours.seconds])} "
                  f"| {theirs.steps} (best {theirs.best:.2f}) | {median([theirs.seconds])} "
                  f"| {os.getloadavg()[0]:.1f} |", flush=True)  # fmt: skip
        print(f"| median | {median([o.steps for o, _ in rows])} "
              f"| {median([o.seconds for o, _ in rows])} "
              f"| {median([t.steps for _, t in rows])} | {median([t.seconds for _, t in rows])} "
              "| |")  # fmt: skip


if __name__ == "__main__":
    main()
