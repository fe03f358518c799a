"""Times rogue-net 0.1.9 deciding for one CherryPick observation, as benchmarks/inference.py
times entityrl.

Runs under the reference stack's interpreter (see benchmarks/README.md); prints JSON with the
per-decision latencies in seconds (p50, p99) of each of ``RUNS`` runs.
usage: python inference_peer.py CHERRIES D_MODEL CALLS RUNS
"""

import json
import sys
import time

import numpy as np
import torch
from entity_gym.env.vec_env import batch_obs
from entity_gym.examples.cherry_pick import CherryPick
from entity_gym.simple_trace import Tracer
from rogue_net.rogue_net import RogueNet, RogueNetConfig


def main() -> None:
    cherries, d_model, calls, runs = map(int, sys.argv[1:5])
    torch.set_num_threads(1)
    env = CherryPick(num_cherries=cherries)
    np.random.seed(0)
    obs = env.reset()
    torch.manual_seed(0)
    net = RogueNet(
        RogueNetConfig(d_model=d_model, n_layer=2, n_head=2),
        env.obs_space(),
        env.action_space(),
        regression_heads={"value": 1},
    )
    tracer = Tracer(cuda=False)

    def decide():
        # One observation to sampled actions, as enn-trainer's agents act: batch, then the net.
        batch = batch_obs([obs], env.obs_space(), env.action_space())
        with torch.no_grad():
            return net.get_action_and_auxiliary(
                batch.features, batch.visible, batch.action_masks, tracer
            )

    results = []
    for _ in range(runs):
        for _ in range(calls // 10):
            decide()
        times = np.empty(calls)
        for i in range(calls):
            start = time.perf_counter()
            decide()
            times[i] = time.perf_counter() - start
        results.append([float(np.percentile(times, 50)), float(np.percentile(times, 99))])
    print(json.dumps({"runs": results}))


if __name__ == "__main__":
    main()
