"""Times entity-gym 0.1.10's EnvList stepping one of its example environments with random
legal actions (the peer half of benchmarks/env_throughput.py).

Runs under the reference stack's interpreter; prints JSON.
usage: python env_throughput_peer.py ENV NUM_ENVS STEPS REPEATS
"""

import json
import sys
import time

import numpy as np
from entity_gym.env import EnvList
from entity_gym.env.vec_env import VecCategoricalActionMask, VecSelectEntityActionMask
from entity_gym.examples import ENV_REGISTRY
from ragged_buffer import RaggedBufferI64


def random_actions(obs, action_space, rng):
    actions = {}
    for name, mask in obs.action_masks.items():
        lengths = np.asarray(mask.actors.size1(), dtype=np.int64)
        actors = int(lengths.sum())
        if isinstance(mask, VecCategoricalActionMask):
            scores = rng.random((actors, len(action_space[name].index_to_label)))
            if mask.mask is not None:
                scores[~mask.mask.as_array()] = -1.0
            chosen = scores.argmax(axis=1)
        else:
            assert isinstance(mask, VecSelectEntityActionMask)
            widths = np.repeat(np.asarray(mask.actees.size1(), dtype=np.int64), lengths)
            chosen = (rng.random(actors) * widths).astype(np.int64)
        actions[name] = RaggedBufferI64.from_flattened(
            chosen.reshape(-1, 1).astype(np.int64), lengths
        )
    return actions


def main() -> None:
    name, num_envs, steps, repeats = (
        sys.argv[1],
        int(sys.argv[2]),
        int(sys.argv[3]),
        int(sys.argv[4]),
    )
    cls = ENV_REGISTRY[name]
    rates = []
    for repeat in range(repeats):
        np.random.seed(repeat)
        rng = np.random.default_rng(repeat)
        envs = EnvList(cls, num_envs)
        obs_space, action_space = envs.obs_space(), envs.action_space()
        obs = envs.reset(obs_space)
        start = time.perf_counter()
        for _ in range(steps):
            obs = envs.act(random_actions(obs, action_space, rng), obs_space)
        rates.append(num_envs * steps / (time.perf_counter() - start))
        envs.close()
    print(json.dumps({"samples_per_second": rates}))


if __name__ == "__main__":
    main()
