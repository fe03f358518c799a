"""The on-policy base: collect a rollout with the current policy, learn from it, repeat.

:class:`OnPolicyAlgorithm` owns the sampler (which keeps the environments' latest observation
and, with ``net.memory``, each row's recurrent state between rollouts), initializes the input
normalization of a fresh network from the first observations, folds each rollout's
observations into it after learning (so the log-probabilities a rollout stored are exactly what
its update recomputes), and keeps the recurrent state in checkpoints. A subclass says what to
learn from a rollout (:meth:`OnPolicyAlgorithm.learn`): PPO and its kin (GAIL, self-play,
MA-POCA) are such subclasses.
"""

from __future__ import annotations

import time
from abc import abstractmethod
from typing import Any

import torch

from entityrl.algorithms.base import Algorithm, Context, Iteration
from entityrl.algorithms.common.rollout import Rollout
from entityrl.env.multiplayer_vec import MultiPlayerVecEnv
from entityrl.env.vec_obs import VecObs
from entityrl.training.async_games import AsyncGameSampler
from entityrl.training.async_sampler import AsyncSampler
from entityrl.training.config import ConfigError, TrainConfig
from entityrl.training.sampler import Sampler, make_sampler


class OnPolicyAlgorithm(Algorithm):
    """Rollouts of ``rollout.num_envs`` environments x ``rollout.steps`` steps, each learned
    from once it is collected."""

    learns_from_episodes = True

    @classmethod
    def check(cls, config: TrainConfig) -> None:
        super().check(config)
        if not config.env.decisions.enabled:
            return
        # A recurrent state runs over every step: its steps without a decision stay in the
        # replayed chunks and weigh nothing in the loss (Rollout.sample_weights). With
        # rollout.mode=async, V-trace's ratios weigh the decisions (decision_gae).
        decisions, steps = config.env.decisions, config.rollout.steps
        longest = max([decisions.period, *decisions.periods.values()])
        # A decision whose period runs past the rollout's end is not learned from: with periods
        # longer than a rollout, hardly any would be.
        if longest > steps:
            raise ConfigError(
                f"env.decisions: the longest period ({longest} steps) must fit in a rollout: "
                f"expected rollout.steps >= {longest}, got {steps}"
            )

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.sampler = self.make_sampler()
        self.saved_memory: torch.Tensor | None = None  # see load_state_dict

    def make_sampler(self) -> Sampler:
        """Where the rollouts come from."""
        ctx = self.ctx
        steps = ctx.config.rollout.steps
        decisions = ctx.config.env.decisions.enabled
        if ctx.config.rollout.mode == "async":
            if isinstance(ctx.env, MultiPlayerVecEnv):  # the learner in every seat
                return AsyncGameSampler(
                    ctx.env, ctx.net, steps, ctx.rng, ctx.config.optim.bs, decisions=decisions
                )
            return AsyncSampler(ctx.env, ctx.net, steps, ctx.rng, ctx.config.optim.bs, decisions)
        return make_sampler(ctx.env, ctx.net, steps, ctx.rng, ctx.generator, decisions)

    def begin(self, resumed: bool, pretrained: bool) -> None:
        if not resumed and not pretrained:
            self.ctx.net.update_normalizers(self.sampler.obs, self.ctx.combine)

    @abstractmethod
    def learn(self, rollout: Rollout, step: int, lr: float) -> dict[str, float]:
        """Learn from one rollout at ``step`` samples; the metrics to log (``loss/*``, ...)."""

    def iterate(self, step: int, lr: float) -> Iteration:
        started = time.perf_counter()
        rollout = self.sampler.collect()
        collected = time.perf_counter()
        metrics = self.learn(rollout, step, lr)
        # Statistics change only between iterations, so the log-probabilities stored during a
        # rollout match what the update recomputes.
        self.ctx.net.update_normalizers(rollout.obs, self.ctx.combine)
        metrics["perf/rollout_seconds"] = collected - started
        metrics["perf/update_seconds"] = time.perf_counter() - collected
        metrics.update(self.sampler.after_update())
        return Iteration(rollout.num_rows, metrics, rollout.metrics)

    def restore_environments(self, obs: VecObs) -> None:
        self.sampler.obs = obs
        # The environments continue their episodes: so does the policy's memory.
        self.sampler.state = self.saved_memory

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        if self.sampler.state is not None:
            state["memory"] = self.sampler.state
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        # Used once the environments are back where they were (restore_environments); if
        # they cannot be, they start new episodes, and the memory too.
        self.saved_memory = state.get("memory")
