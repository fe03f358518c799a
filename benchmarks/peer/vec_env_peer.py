"""Steps entity-gym 0.1.10's MineSweeper in its in-process and multi-process vectorized envs.

Runs under the reference stack's interpreter (see benchmarks/_peer.py); prints JSON with the
environment steps per second of every run.
usage: python vec_env_peer.py NUM_ENVS PROCESSES STEPS RUNS
"""

import json
import sys
import time

import numpy as np
from entity_gym.env import EnvList, ParallelEnvList
from entity_gym.env.vec_env import VecCategoricalActionMask
from entity_gym.examples.minesweeper import MineSweeper
from ragged_buffer import RaggedBufferI64


def random_actions(obs, rng):
    """A uniformly random legal choice for every actor (first candidate for select-entity)."""
    actions = {}
    for name, mask in obs.action_masks.items():
        lengths = mask.actors.size1()
        count = int(lengths.sum())
        if isinstance(mask, VecCategoricalActionMask) and mask.mask is not None:
            legal = mask.mask.as_array()
            scores = np.where(legal, rng.random(legal.shape), -1.0)
            chosen = scores.argmax(axis=1)
        else:
            chosen = np.zeros(count, dtype=np.int64)
        actions[name] = RaggedBufferI64.from_flattened(
            chosen.astype(np.int64).reshape(-1, 1), lengths.astype(np.int64)
        )
    return actions


def steps_per_second(env, steps, rng):
    space = env.obs_space()
    obs = env.reset(space)
    for _ in range(10):
        obs = env.act(random_actions(obs, rng), space)
    start = time.perf_counter()
    for _ in range(steps):
        obs = env.act(random_actions(obs, rng), space)
    return steps * len(env) / (time.perf_counter() - start)


def main() -> None:
    num_envs, processes, steps, runs = (int(a) for a in sys.argv[1:5])
    rng = np.random.default_rng(0)
    serial = EnvList(MineSweeper, num_envs)
    parallel = ParallelEnvList(MineSweeper, num_envs, processes)
    result = {
        "serial": [steps_per_second(serial, steps, rng) for _ in range(runs)],
        "parallel": [steps_per_second(parallel, steps, rng) for _ in range(runs)],
    }
    parallel.close()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
