"""The survival world through Gymnasium: one copy (``gymnasium.make``) against a batch of
copies as one vector environment (``gymnasium.make_vec(..., vectorization_mode=
"vector_entry_point")``), and the batch through entityrl's own VecEnv, in environment steps
per second, every step's actions drawn among the legal ones.

usage: python benchmarks/gymnasium_vector.py [--envs DayAndNight FourSeason] [--copies 64]
                                             [--steps 20000] [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import gymnasium
import numpy as np

import entityrl.interop.gymnasium  # noqa: F401 (registers entityrl/<name>-v0)
from entityrl.env.random_policy import RandomPolicy
from entityrl.envs import make_vec

WORLD = {"observation": "nearest10", "actions": "simple", "life_limit": 100}


def legal_choices(masks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One legal choice per row of ``masks`` (rows, choices)."""
    scores = rng.random(masks.shape) * masks
    return scores.argmax(axis=1)


def one_copy(name: str, steps: int) -> float:
    env = gymnasium.make(f"entityrl/{name}-v0", observation="global", env_kwargs=WORLD)
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    started = time.perf_counter()
    for _ in range(steps):
        choice = legal_choices(env.unwrapped.action_masks()[None], rng)[0]
        _, _, terminated, truncated, _ = env.step(choice)
        if terminated or truncated:
            env.reset()
    return steps / (time.perf_counter() - started)


def vector(name: str, copies: int, steps: int) -> float:
    envs = gymnasium.make_vec(f"entityrl/{name}-v0", num_envs=copies, observation="global",
                              vectorization_mode="vector_entry_point", env_kwargs=WORLD)  # fmt: skip
    rng = np.random.default_rng(0)
    envs.reset(seed=0)
    started = time.perf_counter()
    for _ in range(steps // copies):
        envs.step(legal_choices(envs.unwrapped.action_masks(), rng))
    return (steps // copies) * copies / (time.perf_counter() - started)


def native(name: str, copies: int, steps: int) -> float:
    env = make_vec(name, copies, seed=0, **WORLD)
    policy = RandomPolicy(env.action_space, seed=0)
    obs = env.reset()
    started = time.perf_counter()
    for _ in range(steps // copies):
        obs = env.act(policy.act(obs))
    return (steps // copies) * copies / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", nargs="+", default=["DayAndNight", "FourSeason"])
    parser.add_argument("--copies", type=int, default=64)
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"| world | one copy, gymnasium.make | {args.copies} copies, gymnasium.make_vec | "
          f"{args.copies} copies, entityrl VecEnv | vector / one copy |")  # fmt: skip
    print("|---|---:|---:|---:|---:|")
    for name in args.envs:
        runs = [(one_copy(name, args.steps // 10), vector(name, args.copies, args.steps),
                 native(name, args.copies, args.steps)) for _ in range(args.runs)]  # fmt: skip
        single, batched, own = (statistics.median(column) for column in zip(*runs, strict=True))
        print(f"| {name} | {single:,.0f} | {batched:,.0f} | {own:,.0f} | {batched / single:.1f}x |",
              flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
