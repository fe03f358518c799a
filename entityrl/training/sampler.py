"""Collecting rollouts: the current policy acting in a vectorized environment.

:class:`Sampler` steps all environments together: compute actions, step, repeat.
:class:`PipelinedSampler` works with environments in worker processes and keeps both the
workers and this process busy: while one worker steps its environments, this process computes
the actions of another worker's environments.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch

from entityrl.algo.gae import gae
from entityrl.algo.rollout import Rollout
from entityrl.env.process_vec_env import ProcessVecEnv
from entityrl.env.vec_env import VecEnv
from entityrl.env.vec_obs import VecObs
from entityrl.nn.rogue_net import RogueNet
from entityrl.ragged import RaggedArray


@dataclass
class _Transition:
    """One step of one group of environments: what the policy saw and did, and what followed."""

    obs: VecObs
    actions: dict[str, RaggedArray]
    logprobs: dict[str, RaggedArray]
    values: npt.NDArray[np.float32]
    reward: npt.NDArray[np.float32] | None = None
    done: npt.NDArray[np.bool_] | None = None


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
        self._metrics: dict[str, list[npt.NDArray[np.float64]]] = {}

    def collect(self, gamma: float, gae_lambda: float) -> Rollout:
        steps: list[list[_Transition]] = []
        for _ in range(self.steps):
            transition = self._decide(self.obs)
            self.obs = self.env.act(transition.actions)
            self._observe(transition, self.obs)
            steps.append([transition])
        return self._rollout(steps, gamma, gae_lambda)

    def _decide(self, obs: VecObs) -> _Transition:
        out = self.net.act(obs)
        actions = out.actions(obs)
        logprobs = {
            name: RaggedArray(head.logprob.numpy().reshape(-1, 1), actions[name].lengths)
            for name, head in out.heads.items()
        }
        return _Transition(obs, actions, logprobs, out.values.numpy())

    def _observe(self, transition: _Transition, following: VecObs) -> None:
        transition.reward, transition.done = following.reward, following.done
        for key, values in following.metrics.items():
            self._metrics.setdefault(key, []).append(values)

    def _rollout(self, steps: list[list[_Transition]], gamma: float, gae_lambda: float) -> Rollout:
        """Assemble transitions (steps x groups, groups in environment order) into a Rollout
        whose rows are ordered (step, environment)."""
        flat = [t for groups in steps for t in groups]
        values = np.stack([np.concatenate([t.values for t in groups]) for groups in steps])
        rewards = np.stack([np.concatenate([t.reward for t in groups]) for groups in steps])  # type: ignore[misc]
        dones = np.stack([np.concatenate([t.done for t in groups]) for groups in steps])  # type: ignore[misc]
        next_values = self.net.values(self.obs).numpy()
        advantages, returns = gae(rewards, values, dones, next_values, gamma, gae_lambda)
        metrics = {key: np.concatenate(parts) for key, parts in self._metrics.items()}
        self._metrics = {}
        names = list(self.env.action_space)
        return Rollout(
            obs=VecObs.concat([t.obs for t in flat], self.env.choices),
            actions={n: RaggedArray.concat([t.actions[n] for t in flat]) for n in names},
            logprobs={n: RaggedArray.concat([t.logprobs[n] for t in flat]) for n in names},
            values=values.reshape(-1),
            rewards=rewards,
            dones=dones,
            advantages=advantages.reshape(-1),
            returns=returns.reshape(-1),
            metrics=metrics,
        )


class PipelinedSampler(Sampler):
    """A sampler for environments in two or more worker processes that overlaps stepping with
    inference: worker ``k`` steps while the actions of worker ``k + 1`` are computed.

    Each worker's environments advance one step per round, so the rollout has exactly the
    layout of :class:`Sampler`'s; only the actions are computed per worker (the same policy,
    smaller batches).
    """

    env: ProcessVecEnv

    def __init__(self, env: ProcessVecEnv, net: RogueNet, steps: int) -> None:
        if env.num_workers < 2:
            raise ValueError("PipelinedSampler needs a ProcessVecEnv with at least 2 workers")
        super().__init__(env, net, steps)

    def collect(self, gamma: float, gae_lambda: float) -> Rollout:
        threads = torch.get_num_threads()
        # The workers use the other cores meanwhile: a second inference thread would only
        # wait for a core (small batches gain little from it anyway).
        torch.set_num_threads(1)
        try:
            return self._collect(gamma, gae_lambda)
        finally:
            torch.set_num_threads(threads)

    def _collect(self, gamma: float, gae_lambda: float) -> Rollout:
        workers = range(self.env.num_workers)
        latest = [self.env.worker_obs(k) for k in workers]
        steps: list[list[_Transition]] = []
        for t in range(self.steps):
            groups = []
            for k in workers:
                if t:
                    latest[k] = self.env.wait(k)
                    self._observe(steps[t - 1][k], latest[k])
                transition = self._decide(latest[k])
                self.env.act_async(k, transition.actions, latest[k])
                groups.append(transition)
            steps.append(groups)
        for k in workers:
            latest[k] = self.env.wait(k)
            self._observe(steps[-1][k], latest[k])
        self.obs = self.env.assemble(latest)
        return self._rollout(steps, gamma, gae_lambda)


def make_sampler(env: VecEnv, net: RogueNet, steps: int, pipeline: bool = True) -> Sampler:
    """A pipelined sampler where it can overlap work (processes), a plain one otherwise."""
    if pipeline and isinstance(env, ProcessVecEnv) and env.num_workers >= 2:
        return PipelinedSampler(env, net, steps)
    return Sampler(env, net, steps)
