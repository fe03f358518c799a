"""Stable-Baselines3's defaults on two PettingZoo games, as a new SB3 user would train them.

Not part of entityrl (it imports no entityrl code): benchmarks/robustness.py starts it and reads
the one JSON line it prints (the training wall time, the steps trained, the final agent's mean
return over fresh games with sampled actions). SB3 has no multi-agent training of its own;
these are the ways PettingZoo's own SB3 tutorials train its games:

- ``connect_four``: sb3-contrib's ``MaskablePPO("MlpPolicy", env)`` with its defaults, on one
  Gymnasium environment in which the agent plays PettingZoo's ``connect_four_v3`` against a
  fixed opponent of uniformly random legal moves, its seat (first or second) drawn per game;
  the observation is PettingZoo's 6 x 7 x 2 board planes, flattened, and ``action_masks()``
  its legal columns. It trains against the opponent it is scored against (SB3 has no
  self-play). Scored over ``--games`` games as each seat: the return is +1 for a win, -1 for a
  loss, 0 for a draw, so the mean return is the win rate minus the loss rate.
- ``simple_spread``: ``PPO("MlpPolicy", env)`` with its defaults, the policy shared by the three
  agents of mpe2's ``simple_spread_v3`` through SuperSuit (``pettingzoo_env_to_vec_env_v1``,
  ``concat_vec_envs_v1``: each agent one environment of the vector, so a step is three samples,
  as in entityrl). Scored by the mean return per agent over ``--games`` games.

Needs the ``sb3-games`` extra (``pip install -e '.[sb3-games]'``: SuperSuit).

usage: python benchmarks/sb3_games.py --task connect_four --seed 1 --steps 100000
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import gymnasium
import numpy as np
import numpy.typing as npt
import torch

TASKS = ("connect_four", "simple_spread")


class ConnectFourVsRandom(gymnasium.Env):  # type: ignore[type-arg]
    """PettingZoo's connect_four_v3 for one player against uniformly random legal moves: the
    agent's seat is ``seat`` (0 moves first), or drawn per game when None."""

    observation_space = gymnasium.spaces.Box(0.0, 1.0, (84,), np.float32)
    action_space = gymnasium.spaces.Discrete(7)

    def __init__(self, seat: int | None = None) -> None:
        from pettingzoo.classic import connect_four_v3

        self.game = connect_four_v3.env()
        self.seat = seat
        self.me = ""

    def observe(self) -> npt.NDArray[np.float32]:
        return self.game.observe(self.me)["observation"].astype(np.float32).reshape(-1)

    def action_masks(self) -> npt.NDArray[np.bool_]:
        return self.game.observe(self.me)["action_mask"].astype(bool)

    def over(self) -> bool:
        return bool(self.game.terminations[self.me] or self.game.truncations[self.me])

    def opponent_moves(self) -> None:
        """The opponent's move, when it is the opponent's turn in a game not over."""
        if not self.over() and self.game.agent_selection != self.me:
            legal = np.flatnonzero(self.game.observe(self.game.agent_selection)["action_mask"])
            self.game.step(int(self.np_random.choice(legal)))

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[npt.NDArray[np.float32], dict[str, Any]]:
        super().reset(seed=seed)
        self.game.reset(seed=int(self.np_random.integers(2**31)))
        seat = self.seat if self.seat is not None else int(self.np_random.integers(2))
        self.me = self.game.possible_agents[seat]
        self.opponent_moves()
        return self.observe(), {}

    def step(
        self, action: int
    ) -> tuple[npt.NDArray[np.float32], float, bool, bool, dict[str, Any]]:
        self.game.step(int(action))
        self.opponent_moves()
        done = self.over()
        reward = float(self.game.rewards[self.me]) if done else 0.0
        return self.observe(), reward, done, False, {}


def connect_four(seed: int, steps: int, games: int) -> dict[str, Any]:
    from sb3_contrib import MaskablePPO

    started = time.time()
    env = ConnectFourVsRandom()
    env.reset(seed=seed)
    model = MaskablePPO("MlpPolicy", env, seed=seed, device="cpu")
    model.learn(total_timesteps=steps)
    seconds = time.time() - started
    outcomes = []
    for seat in (0, 1):
        game = ConnectFourVsRandom(seat)
        for episode in range(games):
            obs, _ = game.reset(seed=12345 + 1000 * seat + episode)
            done, reward = False, 0.0
            while not done:
                action, _ = model.predict(obs, action_masks=game.action_masks())
                obs, reward, done, _, _ = game.step(int(action))
            outcomes.append(reward)
    results = np.array(outcomes)
    return {
        "steps": int(model.num_timesteps),
        "seconds": seconds,
        "reached": float(results.mean()),
        "wins": int((results > 0).sum()),
        "draws": int((results == 0).sum()),
        "losses": int((results < 0).sum()),
        "first": float(results[:games].mean()),
        "second": float(results[games:].mean()),
    }


def simple_spread(seed: int, steps: int, games: int) -> dict[str, Any]:
    import supersuit
    from mpe2 import simple_spread_v3
    from stable_baselines3 import PPO

    started = time.time()
    env = supersuit.pettingzoo_env_to_vec_env_v1(simple_spread_v3.parallel_env())
    env = supersuit.concat_vec_envs_v1(env, 1, num_cpus=0, base_class="stable_baselines3")
    # SuperSuit's vector has no seed(), which SB3 calls with PPO's seed: seed its games'
    # generators by a reset instead (later resets go on from them).
    env.venv.reset(seed=seed)
    env.seed = lambda seed=None: [seed]  # type: ignore[method-assign]
    model = PPO("MlpPolicy", env, seed=seed, device="cpu")
    model.learn(total_timesteps=steps)
    seconds = time.time() - started
    game = simple_spread_v3.parallel_env()
    returns = []
    for episode in range(games):
        obs, _ = game.reset(seed=12345 + episode)
        total = dict.fromkeys(game.agents, 0.0)
        while game.agents:
            agents = list(obs)
            actions, _ = model.predict(np.stack([obs[a] for a in agents]))
            obs, rewards, _, _, _ = game.step(dict(zip(agents, actions.tolist(), strict=True)))
            for agent, reward in rewards.items():
                total[agent] += reward
        returns.extend(total.values())
    return {
        "steps": int(model.num_timesteps),
        "seconds": seconds,
        "reached": float(np.mean(returns)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", choices=TASKS, required=True)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--games", type=int, default=100, help="per seat (connect_four)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    train = connect_four if args.task == "connect_four" else simple_spread
    print(json.dumps(train(args.seed, args.steps, args.games)))


if __name__ == "__main__":
    gymnasium.logger.min_level = 40
    main()
