"""RogueNet forward (rollout) and forward+backward (training) throughput, against rogue-net 0.1.9.

Both networks get the same inputs (saved to an .npz the peer script loads): rows of 1-64
entities split over two entity types (12 and 6 features); every entity of the first type picks
one of 4 choices; the value is a regression head on the mean embedding. d_model 32/64,
n_layer 2, n_head 2. Rows/s = rows / median seconds per call.

usage: python benchmarks/rogue_net.py [--repeats 15] [--threads 2] [--write]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))
from _peer import machine, require_peer, run_peer
from results import replace_section

from entityrl.env import (
    CategoricalActionSpace,
    Entity,
    ObsSpace,
    RaggedArray,
    VecCategoricalMask,
    VecObs,
)
from entityrl.nn import RogueNet, RogueNetConfig

FEATURES = {"A": 12, "B": 6}
CHOICES = 4


def make_inputs(rows: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    total = rng.integers(1, 65, size=rows)
    a_len = rng.integers(0, total + 1)
    a_len = np.maximum(a_len, 1)  # every row has an actor
    b_len = np.maximum(total - a_len, 0)
    return {
        "a_len": a_len.astype(np.int64),
        "b_len": b_len.astype(np.int64),
        "a_feats": rng.normal(size=(int(a_len.sum()), FEATURES["A"])).astype(np.float32),
        "b_feats": rng.normal(size=(int(b_len.sum()), FEATURES["B"])).astype(np.float32),
        # Actors are the type-A entities: indices 0..a_len-1 of each row.
        "actors": np.concatenate([np.arange(n) for n in a_len]).astype(np.int64),
        "choices": np.int64(CHOICES),
    }


def to_vec_obs(data: dict[str, np.ndarray]) -> VecObs:
    rows = data["a_len"].shape[0]
    return VecObs(
        features={
            "A": RaggedArray(data["a_feats"], data["a_len"]),
            "B": RaggedArray(data["b_feats"], data["b_len"]),
        },
        global_features=np.zeros((rows, 0), np.float32),
        action_masks={
            "act": VecCategoricalMask(RaggedArray(data["actors"].reshape(-1, 1), data["a_len"]))
        },
        reward=np.zeros(rows, np.float32),
        done=np.zeros(rows, np.bool_),
    )


def timed(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def measure_ours(data: dict[str, np.ndarray], d_model: int, repeats: int) -> dict[str, float]:
    space = ObsSpace(
        {name: Entity([f"{name}{i}" for i in range(n)]) for name, n in FEATURES.items()}
    )
    torch.manual_seed(0)
    net = RogueNet(
        space,
        {"act": CategoricalActionSpace([str(i) for i in range(CHOICES)])},
        RogueNetConfig(d_model=d_model, n_layer=2, n_head=2),
    )
    obs = to_vec_obs(data)
    actions = net.act(obs).actions(obs)

    def train() -> None:
        out = net.evaluate(obs, actions)
        h = out.heads["act"]
        (h.logprob.sum() + h.entropy.sum() + out.values.sum()).backward()

    return {"rollout": timed(lambda: net.act(obs), repeats), "train": timed(train, repeats)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    require_peer()
    torch.set_num_threads(args.threads)
    lines = [
        "| d_model | rows | mean entities/row | rollout rows/s (ours) | rollout (peer) | ratio "
        "| train rows/s (ours) | train (peer) | ratio |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for d_model in (32, 64):
            for rows in (128, 512, 2048):
                data = make_inputs(rows, seed=rows)
                path = Path(tmp) / f"inputs_{rows}.npz"
                np.savez(path, **data)
                ours = measure_ours(data, d_model, args.repeats)
                peer = run_peer("rogue_net_peer.py", path, d_model, args.repeats, args.threads)
                mean = (data["a_len"] + data["b_len"]).mean()
                cells = [f"{d_model}", f"{rows}", f"{mean:.1f}"]
                for phase in ("rollout", "train"):
                    cells += [
                        f"{rows / ours[phase]:,.0f}",
                        f"{rows / peer[phase]:,.0f}",
                        f"{peer[phase] / ours[phase]:.2f}x",
                    ]
                lines.append("| " + " | ".join(cells) + " |")
                print(lines[-1], flush=True)
    table = "\n".join(lines)
    print(table)
    if args.write:
        replace_section(
            "RogueNet forward and backward",
            f"Command: `python benchmarks/rogue_net.py --repeats {args.repeats} "
            f"--threads {args.threads} --write`\n\nMachine: {machine()}; torch threads: "
            f"{args.threads}.\n\nInputs: rows of 1-64 entities (uniform) of two types (12 and 6 "
            "features), a 4-way categorical action for every type-A entity, value head. n_layer 2,"
            " n_head 2. Medians of the given repeats; ratio = peer seconds / our seconds (higher"
            " is better for us). Peer: rogue-net 0.1.9 in its own venv, same inputs, same run."
            f"\n\n{table}\n",
        )


if __name__ == "__main__":
    main()
