"""What the image path adds to a batch without images: the statements it runs on every batch
of a space without images (empty dict comprehensions, a truthiness and a None check), timed
against one environment step plus action of CherryPick with 64 environments.

usage: python benchmarks/image_overhead.py
"""

from __future__ import annotations

import timeit

import numpy as np
import torch

from entityrl.envs import make_vec
from entityrl.nn.layout import build_layout
from entityrl.nn.rogue_net import RogueNet


def main() -> None:
    torch.set_num_threads(1)
    envs = make_vec("CherryPick", 64, seed=0)
    state = {"obs": envs.reset()}
    net = RogueNet(envs.obs_space, envs.action_space)
    rows = np.arange(64)
    empty: dict[str, np.ndarray] = {}

    def one_step() -> None:
        obs = state["obs"]
        state["obs"] = envs.act(net.act(obs).actions(obs))

    def added() -> None:
        obs = state["obs"]
        _ = {k: v[rows] for k, v in empty.items()}  # VecObs.take
        _ = {k: np.concatenate([v]) for k, v in empty.items()}  # VecObs.concat
        _ = {k: torch.from_numpy(v) for k, v in obs.images.items()}  # EntityInputs.from_obs
        _ = net.encoder.images is not None  # Encoder.forward
        _ = [image for image in net.obs_space.images.items()]  # RogueNet._check_obs
        _ = empty if empty else {}  # Batcher.batch

    def layout() -> None:
        build_layout(state["obs"], net.entity_names, net.global_token, False)

    step = min(timeit.repeat(one_step, number=20, repeat=5)) / 20
    extra = min(timeit.repeat(added, number=10000, repeat=5)) / 10000
    lay = min(timeit.repeat(layout, number=200, repeat=5)) / 200
    print(
        f"CherryPick x64: env step + act {step * 1e6:.0f} us; build_layout {lay * 1e6:.1f} us; "
        f"the image path's statements {extra * 1e6:.2f} us per batch "
        f"({extra / step * 100:.3f}% of a step)"
    )


if __name__ == "__main__":
    main()
