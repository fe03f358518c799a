"""Times rogue-net 0.1.9 on the inputs saved by benchmarks/rogue_net.py.

Runs under the reference stack's interpreter (see benchmarks/README.md); prints JSON.
usage: python rogue_net_peer.py INPUTS.npz D_MODEL REPEATS THREADS
"""

import json
import sys
import time

import numpy as np
import torch
from entity_gym.env import CategoricalActionSpace, Entity, ObsSpace
from entity_gym.env.vec_env import VecCategoricalActionMask
from entity_gym.simple_trace import Tracer
from ragged_buffer import RaggedBufferF32, RaggedBufferI64
from rogue_net.rogue_net import RogueNet, RogueNetConfig


def main() -> None:
    path, d_model, repeats, threads = (
        sys.argv[1],
        int(sys.argv[2]),
        int(sys.argv[3]),
        int(sys.argv[4]),
    )
    torch.set_num_threads(threads)
    data = np.load(path)
    space = ObsSpace(
        entities={
            "A": Entity([f"a{i}" for i in range(data["a_feats"].shape[1])]),
            "B": Entity([f"b{i}" for i in range(data["b_feats"].shape[1])]),
        }
    )
    actions = {"act": CategoricalActionSpace([str(i) for i in range(int(data["choices"]))])}
    torch.manual_seed(0)
    net = RogueNet(
        RogueNetConfig(d_model=d_model, n_layer=2, n_head=2),
        space,
        actions,
        regression_heads={"value": 1},
    )
    feats = {
        "A": RaggedBufferF32.from_flattened(data["a_feats"], data["a_len"]),
        "B": RaggedBufferF32.from_flattened(data["b_feats"], data["b_len"]),
    }
    masks = {
        "act": VecCategoricalActionMask(
            RaggedBufferI64.from_flattened(data["actors"].reshape(-1, 1), data["a_len"]), None
        )
    }
    tracer = Tracer(cuda=False)

    def rollout():
        # enn-trainer's rollouts run under no_grad (its input norm updates in place).
        with torch.no_grad():
            return net.get_action_and_auxiliary(feats, {}, masks, tracer)

    prev = rollout()[0]

    def train():
        _, logprob, entropy, _, aux, _ = net.get_action_and_auxiliary(
            feats, {}, masks, tracer, prev_actions=prev
        )
        (logprob["act"].sum() + entropy["act"].sum() + aux["value"].sum()).backward()

    print(json.dumps({"rollout": timed(rollout, repeats), "train": timed(train, repeats)}))


def timed(fn, repeats):
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


if __name__ == "__main__":
    main()
