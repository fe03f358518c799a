"""Replay buffer: bytes per stored transition, ragged against a padded dense layout, and the
CPU time a sample takes in a full buffer.

The ragged buffer (entityrl/algorithms/common/replay.py) keeps each step's arrays as they
came: every entity's features once, masks and actor indices per actor. The dense layout it is
compared with pads every row to the most entities (and actors, candidates, ...) of each type
seen in the same data, as a fixed-shape array buffer must, and holds the same fields
(observation, actions, next observation, reward, endings). Transitions come from random play.

usage: python benchmarks/replay_memory.py [--transitions 100000] [--envs CherryPick MultiSnake]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time
from typing import Any

import numpy as np
import torch

from entityrl.algorithms.common.replay import ReplayBuffer, Transitions, next_observations
from entityrl.env.random_policy import RandomPolicy
from entityrl.envs import make_vec
from entityrl.ragged import RaggedArray

NUM_ENVS = 16


def dense_bytes(value: Any, rows: int) -> float:
    """Bytes per row of ``value`` with every ragged array padded to its longest row."""
    if isinstance(value, RaggedArray):
        longest = int(value.lengths.max(initial=0))
        return longest * value.data.shape[1] * value.data.itemsize
    if isinstance(value, np.ndarray):
        return value.nbytes / rows
    if dataclasses.is_dataclass(value):
        return sum(dense_bytes(getattr(value, f.name), rows) for f in dataclasses.fields(value))
    if isinstance(value, dict):
        return sum(dense_bytes(v, rows) for v in value.values())
    return 0.0


def fill(env_id: str, transitions: int, **settings: Any) -> tuple[ReplayBuffer, Transitions]:
    """A buffer of ``transitions`` from random play, and all of them in one batch (for the
    dense layout's widths)."""
    env = make_vec(env_id, NUM_ENVS, seed=0)
    policy = RandomPolicy(env.action_space, seed=0)
    buffer = ReplayBuffer(transitions, env.choices, **settings)
    obs = env.reset()
    while buffer.added < transitions:
        actions = policy.act(obs)
        after = env.act(actions)
        truncated = np.zeros_like(after.done) if after.truncated is None else after.truncated
        buffer.add(
            Transitions(
                obs.take(np.arange(obs.num_rows)),
                actions,
                after.reward,
                after.done & ~truncated,
                next_observations(after, env.choices),
                truncated,
            )
        )
        obs = after
    return buffer, buffer.sample(transitions, np.random.default_rng(0))


def sample_ms(buffer: ReplayBuffer, batch: int, repeats: int = 50) -> float:
    """CPU milliseconds per sample (this process's time: the machine may be shared)."""
    rng = np.random.default_rng(1)
    buffer.sample(batch, rng)
    started = time.process_time()
    for _ in range(repeats):
        buffer.sample(batch, rng, beta=0.4)
    return (time.process_time() - started) / repeats * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--transitions", type=int, default=100_000)
    parser.add_argument("--envs", nargs="+", default=["CherryPick", "MultiSnake"])
    parser.add_argument("--batch", type=int, default=256)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"{args.transitions:,} transitions of random play, {NUM_ENVS} environments; "
          f"load average {os.getloadavg()[0]:.2f}")  # fmt: skip
    print("| environment | ragged bytes/transition | padded dense | dense / ragged "
          f"| sample of {args.batch} (CPU): uniform | prioritized, 3-step |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- |")
    for env_id in args.envs:
        buffer, everything = fill(env_id, args.transitions)
        ragged = buffer.nbytes_per_transition()
        fields = (everything.obs, everything.actions, everything.next_obs)
        rows = everything.num_rows
        # Reward, terminal and truncated flags: 4 + 1 + 1 bytes in both layouts.
        dense = sum(dense_bytes(f, rows) for f in fields) + 6
        uniform = sample_ms(buffer, args.batch)
        prioritized, _ = fill(env_id, args.transitions, n_step=3, prioritized=True)
        ranked = sample_ms(prioritized, args.batch)
        print(f"| {env_id} | {ragged:,.0f} | {dense:,.0f} | {dense / ragged:.2f} "
              f"| {uniform:.2f} ms | {ranked:.2f} ms |")  # fmt: skip


if __name__ == "__main__":
    main()
