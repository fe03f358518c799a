"""The off-policy base: act, keep every transition in a replay buffer, learn from samples of it.

One iteration of :class:`OffPolicyAlgorithm` steps every environment ``steps_per_update``
times with the actions of :meth:`~OffPolicyAlgorithm.act` (the subclass's exploration: an
epsilon-greedy choice, a sample of its policy, ...), keeps the transitions in its
:class:`~entityrl.algorithms.common.replay.ReplayBuffer` and, once ``learning_starts``
transitions have been collected, takes ``updates`` steps of :meth:`~OffPolicyAlgorithm.update`
on minibatches of ``batch_size`` transitions sampled from the buffer (uniformly or by
priority, with one-step or n-step returns: ``prioritized``, ``n_step``). Target networks and other
optimizers are the subclass's (:func:`~entityrl.algorithms.common.target.frozen_copy`,
:meth:`~entityrl.algorithms.base.Algorithm.own`); the buffer, everything owned and the
environments' observation go into every checkpoint, so a resumed run continues exactly.

A subclass's ``Settings`` extends :class:`OffPolicySettings`.
"""

from __future__ import annotations

import time
from abc import abstractmethod
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from entityrl.algorithms.base import Algorithm, Context, Iteration
from entityrl.algorithms.common.checks import require_positive
from entityrl.algorithms.common.replay import ReplayBuffer, Transitions, next_observations
from entityrl.env.vec_obs import VecObs
from entityrl.ragged import RaggedArray
from entityrl.training.config import ConfigError, TrainConfig


@dataclass
class OffPolicySettings:
    """Replay and update schedule of an off-policy algorithm."""

    buffer_size: int = 100_000
    """Transitions the replay buffer holds (the oldest are dropped)."""
    batch_size: int = 256
    """Transitions per update."""
    learning_starts: int = 1_000
    """Transitions collected before the first update."""
    steps_per_update: int = 1
    """Steps of every environment between updates (one iteration)."""
    updates: int = 1
    """Gradient steps per iteration."""
    gamma: float = 0.99
    """Discount factor."""
    n_step: int = 1
    """Steps of reward each sampled transition sums before it bootstraps (n-step returns,
    stopped by the episode's end; 1: one-step)."""
    prioritized: bool = False
    """Prioritized replay: sample transitions in proportion to their last error (the
    algorithm's update sets it) to the power priority_alpha, weighted to correct the bias."""
    priority_alpha: float = 0.6
    """How strongly prioritized replay prefers large errors (0: uniform)."""
    priority_beta: float = 0.4
    """Importance-weight exponent of prioritized replay at the start, annealed linearly to 1
    (full correction) at the end of the run."""

    def __post_init__(self) -> None:
        require_positive(
            "",
            buffer_size=self.buffer_size,
            batch_size=self.batch_size,
            steps_per_update=self.steps_per_update,
            updates=self.updates,
        )
        if self.learning_starts < 0:
            raise ValueError(f"learning_starts must be >= 0, got {self.learning_starts}")
        if not 0 <= self.gamma <= 1:
            raise ValueError(f"gamma must be in [0, 1], got {self.gamma}")
        require_positive("", n_step=self.n_step)
        if self.priority_alpha < 0:
            raise ValueError(f"priority_alpha must be >= 0, got {self.priority_alpha}")
        if not 0 <= self.priority_beta <= 1:
            raise ValueError(f"priority_beta must be in [0, 1], got {self.priority_beta}")


class OffPolicyAlgorithm(Algorithm):
    """Transitions into a replay buffer; updates on samples of it (see the module's doc)."""

    learns_from_episodes = True

    Settings: type[OffPolicySettings] = OffPolicySettings

    @classmethod
    def check(cls, config: TrainConfig) -> None:
        super().check(config)
        if config.env.decisions.enabled:
            raise ConfigError(
                f"algo={config.algo} learns from single steps: it does not support "
                "env.decisions (agents deciding at their own times) yet; use an on-policy "
                "algorithm (ppo, selfplay, gail) or env.decisions at its defaults"
            )
        for key, on in (("rnd.coef", config.rnd.enabled), ("icm.coef", config.icm.enabled)):
            if on:
                raise ConfigError(
                    f"algo={config.algo} takes no exploration bonus ({key} > 0): the bonuses "
                    "train on rollouts; use algo=ppo, or set it to 0"
                )
        if config.net.memory:
            raise ConfigError(
                f"algo={config.algo} learns from single transitions: it cannot train "
                "net.memory (set net.memory=false)"
            )

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        settings = self.settings
        self.replay = self.own(
            "replay",
            ReplayBuffer(
                settings.buffer_size,
                ctx.env.choices,
                n_step=settings.n_step,
                gamma=settings.gamma,
                prioritized=settings.prioritized,
                alpha=settings.priority_alpha,
            ),
        )
        self.obs: VecObs = ctx.env.reset()

    def begin(self, resumed: bool, pretrained: bool) -> None:
        if not resumed and not pretrained:
            self.ctx.net.update_normalizers(self.obs, self.ctx.combine)

    @abstractmethod
    def act(self, obs: VecObs, step: int) -> dict[str, RaggedArray]:
        """The actions to take in ``obs`` at ``step`` samples, in the form a VecEnv takes
        (per action, one row per actor)."""

    @abstractmethod
    def update(self, batch: Transitions, step: int, lr: float) -> dict[str, float]:
        """One gradient step on ``batch``; the metrics to log (``loss/*``, ...). Targets
        bootstrap with ``batch.discount`` (n-step returns) and losses weigh rows by
        ``batch.weights``; with prioritized replay, pass the rows' errors to
        ``self.replay.update_priorities(batch.index, errors)``."""

    def priority_beta(self, step: int) -> float:
        """Prioritized replay's importance-weight exponent at ``step`` samples."""
        beta = self.settings.priority_beta
        return beta + (1.0 - beta) * min(1.0, step / self.budget())

    def iterate(self, step: int, lr: float) -> Iteration:
        ctx, settings = self.ctx, self.settings
        started = time.perf_counter()
        episodes: dict[str, list[npt.NDArray[np.float64]]] = {}
        samples = 0
        for _ in range(settings.steps_per_update):
            actions = self.act(self.obs, step + samples)
            after = ctx.env.act(actions)
            truncated = np.zeros_like(after.done) if after.truncated is None else after.truncated
            self.replay.add(
                Transitions(
                    self.obs.take(np.arange(self.obs.num_rows)),
                    actions,
                    after.reward,
                    after.done & ~truncated,
                    next_observations(after, ctx.env.choices),
                    truncated,
                )
            )
            for key, values in after.metrics.items():
                episodes.setdefault(key, []).append(values)
            samples += self.obs.num_rows
            self.obs = after
            ctx.net.update_normalizers(after, ctx.combine)
        collected = time.perf_counter()
        metrics: dict[str, float] = {}
        if self.replay.added >= settings.learning_starts:
            beta = self.priority_beta(step + samples)
            for _ in range(settings.updates):
                batch = self.replay.sample(settings.batch_size, ctx.rng, beta)
                metrics = self.update(batch, step + samples, lr)
        metrics["replay/transitions"] = float(len(self.replay))
        metrics["replay/bytes_per_transition"] = self.replay.nbytes_per_transition()
        metrics["perf/rollout_seconds"] = collected - started
        metrics["perf/update_seconds"] = time.perf_counter() - collected
        return Iteration(samples, metrics, {key: np.concatenate(v) for key, v in episodes.items()})

    def restore_environments(self, obs: VecObs) -> None:
        self.obs = obs
