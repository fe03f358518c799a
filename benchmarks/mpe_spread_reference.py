"""A scripted near-optimal player of MPE's simple_spread (mpe2), for a reference return.

Not part of entityrl (it imports only mpe2 and numpy). Every agent sees its own velocity and
position, every landmark's and every other agent's position relative to its own; from these
each agent computes the same assignment of agents to landmarks (the permutation with the least
total distance: translation does not change it, so all agents agree) and steers to its
landmark: of its five moves it takes the one that brings a look-ahead point (its position
after the step plus ``COAST`` times its new velocity) nearest to the landmark. No
communication, no learning.

The robustness suite (benchmarks/robustness.py) scores ``mpe2:simple_spread_v3`` between
random play (0) and this player's mean return per agent (1), both with mpe2's defaults
(N=3, local_ratio=0.5, max_cycles=25, discrete actions).

usage: python benchmarks/mpe_spread_reference.py [--episodes 1000] [--seed 12345]
"""

from __future__ import annotations

import argparse
import itertools

import numpy as np
import numpy.typing as npt

DT, DAMPING, SENSITIVITY = 0.1, 0.25, 5.0
"""mpe2's World.dt, World.damping and the force of a discrete move (mass 1)."""
MOVES = np.array([[0, 0], [-1, 0], [1, 0], [0, -1], [0, 1]], dtype=np.float64)
"""mpe2's discrete actions: none, left, right, down, up."""
COAST = 0.15
"""The look-ahead, in seconds of the new velocity. An agent that moves no more drifts
``DT / DAMPING`` = 0.4 of it before it stops, but aiming there brakes too early: the return
counts the distance at every step, so arriving sooner and overshooting a little pays more
(200 episodes, seed 777: 0.1: -7.28, 0.15: -7.25, 0.2: -7.33, 0.3: -7.93, 0.4: -8.61, 0.6:
-9.82 per agent; 0: -23.9, it never brakes)."""


def act(obs: npt.NDArray[np.float32], agents: int) -> int:
    """One agent's move from its observation ``[vel, pos, landmarks, other agents, comm]``."""
    vel = obs[0:2].astype(np.float64)
    landmarks = obs[4 : 4 + 2 * agents].reshape(agents, 2)
    others = obs[4 + 2 * agents : 4 + 2 * agents + 2 * (agents - 1)].reshape(agents - 1, 2)
    positions = np.vstack([np.zeros(2), others])  # this agent first, in its own frame
    distance = np.linalg.norm(positions[:, None] - landmarks[None], axis=-1)
    best = min(
        itertools.permutations(range(agents)),
        key=lambda p: sum(distance[i, p[i]] for i in range(agents)),
    )
    target = landmarks[best[0]]
    # Position after this step (moved with the current velocity), then the new velocity.
    moved = vel * DT
    velocities = vel * (1 - DAMPING) + MOVES * SENSITIVITY * DT
    rest = moved + velocities * COAST
    return int(np.argmin(np.linalg.norm(target - rest, axis=1)))


def mean_return(episodes: int, seed: int, policy: str = "scripted") -> float:
    """Mean return per agent (every agent's episode return, averaged) over ``episodes``."""
    from mpe2 import simple_spread_v3

    env = simple_spread_v3.parallel_env()
    rng = np.random.default_rng(seed)
    returns = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        total = dict.fromkeys(env.agents, 0.0)
        while env.agents:
            n = len(env.possible_agents)
            if policy == "scripted":
                actions = {a: act(o, n) for a, o in obs.items()}
            else:
                actions = {a: int(rng.integers(5)) for a in obs}
            obs, rewards, _, _, _ = env.step(actions)
            for a, r in rewards.items():
                total[a] += r
        returns.extend(total.values())
    return float(np.mean(returns))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=12345)
    args = parser.parse_args()
    for policy in ("scripted", "random"):
        print(
            f"{policy}: mean return per agent {mean_return(args.episodes, args.seed, policy):.2f}"
        )


if __name__ == "__main__":
    main()
