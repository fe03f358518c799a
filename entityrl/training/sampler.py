"""Collecting rollouts: the current policy acting in a vectorized environment."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from entityrl.algo.gae import gae
from entityrl.algo.rollout import Rollout
from entityrl.env.vec_env import VecEnv
from entityrl.env.vec_obs import VecObs
from entityrl.nn.rogue_net import RogueNet
from entityrl.ragged import RaggedArray


class Sampler:
    """Steps ``env`` with ``net``'s sampled actions, ``steps`` steps per rollout.

    The sampler keeps the environments' latest observation between rollouts, so consecutive
    rollouts continue the same episodes.
    """

    def __init__(self, env: VecEnv, net: RogueNet, steps: int) -> None:
        self.env = env
        self.net = net
        self.steps = steps
        self.obs: VecObs = env.reset()

    def collect(self, gamma: float, gae_lambda: float) -> Rollout:
        observations: list[VecObs] = []
        actions: dict[str, list[RaggedArray]] = {name: [] for name in self.env.action_space}
        logprobs: dict[str, list[RaggedArray]] = {name: [] for name in self.env.action_space}
        values: list[npt.NDArray[np.float32]] = []
        rewards: list[npt.NDArray[np.float32]] = []
        dones: list[npt.NDArray[np.bool_]] = []
        metrics: dict[str, list[npt.NDArray[np.float64]]] = {}
        for _ in range(self.steps):
            out = self.net.act(self.obs)
            chosen = out.actions(self.obs)
            observations.append(self.obs)
            for name, head in out.heads.items():
                lengths = chosen[name].lengths
                actions[name].append(chosen[name])
                logprobs[name].append(RaggedArray(head.logprob.numpy().reshape(-1, 1), lengths))
            values.append(out.values.numpy())
            self.obs = self.env.act(chosen)
            rewards.append(self.obs.reward)
            dones.append(self.obs.done)
            for key, vals in self.obs.metrics.items():
                metrics.setdefault(key, []).append(vals)
        next_values = self.net.act(self.obs).values.numpy()
        value_grid = np.stack(values)
        advantages, returns = gae(
            np.stack(rewards), value_grid, np.stack(dones), next_values, gamma, gae_lambda
        )
        return Rollout(
            obs=VecObs.concat(observations, self.env.choices),
            actions={name: RaggedArray.concat(parts) for name, parts in actions.items()},
            logprobs={name: RaggedArray.concat(parts) for name, parts in logprobs.items()},
            values=value_grid.reshape(-1),
            rewards=np.stack(rewards),
            dones=np.stack(dones),
            advantages=advantages.reshape(-1),
            returns=returns.reshape(-1),
            metrics={key: np.concatenate(parts) for key, parts in metrics.items()},
        )
