"""DQN (Mnih et al. 2015) on RogueNet, reading top to bottom as CleanRL's dqn.py: act
epsilon-greedily, keep transitions, regress each row's Q-value of its actions onto the reward
plus the discounted best Q-value of what followed, from a target network. Switches: double Q
(van Hasselt et al. 2016), dueling (Wang et al. 2016), n-step returns and prioritized replay
(those two are the replay buffer's, :class:`~entityrl.algorithms.off_policy.OffPolicySettings`).
How rows of several actors get one Q-value: :mod:`entityrl.algorithms.dqn.q_values`."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.nn import functional

from entityrl.algorithms.base import Context, Iteration
from entityrl.algorithms.common.checks import require_discrete
from entityrl.algorithms.common.replay import Transitions
from entityrl.algorithms.common.target import frozen_copy, soft_update
from entityrl.algorithms.dqn.q_values import RowQ, taken
from entityrl.algorithms.off_policy import OffPolicyAlgorithm, OffPolicySettings
from entityrl.env.vec_obs import VecObs
from entityrl.ragged import RaggedArray
from entityrl.training.config import ConfigError, TrainConfig


@dataclass
class DQNSettings(OffPolicySettings):
    """DQN: epsilon-greedy exploration, a target network, double Q and dueling switches."""

    epsilon_start: float = 1.0
    """Probability that an actor takes a random legal choice, at the start."""
    epsilon_end: float = 0.05
    """That probability once exploration_fraction of the run is done (and after)."""
    exploration_fraction: float = 0.1
    """Fraction of total_timesteps over which epsilon falls linearly from start to end."""
    target_update_interval: int = 500
    """Environment steps between updates of the target network (at most one per iteration,
    after its gradient steps)."""
    tau: float = 1.0
    """How far each update moves the target network toward the network (1: a copy)."""
    double_q: bool = True
    """Bootstrap from the target network's value of the network's best next choice (double
    Q-learning) instead of the target network's own best."""
    dueling: bool = False
    """Q-values as the row's value (the value head) plus every actor's advantage centered
    over its legal choices."""

    def __post_init__(self) -> None:
        super().__post_init__()
        for key in ("epsilon_start", "epsilon_end", "exploration_fraction"):
            value = getattr(self, key)
            if not 0 <= value <= 1:
                raise ValueError(f"{key} must be in [0, 1], got {value}")
        if self.target_update_interval <= 0:
            raise ValueError(
                f"target_update_interval must be > 0 environment steps, got "
                f"{self.target_update_interval}"
            )
        if not 0 < self.tau <= 1:
            raise ValueError(f"tau must be in (0, 1], got {self.tau}")


class DQN(OffPolicyAlgorithm):
    """Deep Q-learning over the discrete actions of entity observations."""

    name = "dqn"
    Settings = DQNSettings

    @classmethod
    def check(cls, config: TrainConfig) -> None:
        super().check(config)
        if config.eval.interval and not config.eval.deterministic:
            raise ConfigError(
                "algo=dqn acts greedily on its Q-values, which are not a distribution to sample "
                "from: evaluate with eval.deterministic=true (got false, with eval.interval="
                f"{config.eval.interval})"
            )

    def __init__(self, ctx: Context) -> None:
        require_discrete("dqn", ctx.config.env.id, ctx.env.action_space, "algo=sac (or algo=ppo)")
        super().__init__(ctx)
        self.target = self.own("target", frozen_copy(ctx.net))
        self.names = list(ctx.env.action_space)

    def iterate(self, step: int, lr: float) -> Iteration:
        iteration = super().iterate(step, lr)
        interval = self.settings.target_update_interval
        if step // interval < (step + iteration.samples) // interval:
            soft_update(self.target, self.ctx.net, self.settings.tau)
        return iteration

    def epsilon(self, step: int) -> float:
        """Linear from epsilon_start to epsilon_end over exploration_fraction of the run."""
        s = self.settings
        span = s.exploration_fraction * self.budget()
        done = min(1.0, step / span) if span else 1.0
        return s.epsilon_start + done * (s.epsilon_end - s.epsilon_start)

    def act(self, obs: VecObs, step: int) -> dict[str, RaggedArray]:
        with torch.no_grad():
            q = RowQ.of(self.ctx.net, obs, False)  # the value stream would not change an argmax
        generator, epsilon = self.ctx.generator, self.epsilon(step)
        actions = {}
        for name in q.scores:
            legal = q.legal(name)
            greedy = q.greedy(name)
            # The largest of uniform numbers over the legal choices: a uniform legal choice.
            draws = torch.rand(legal.shape, generator=generator, device=legal.device) * legal
            random = draws.argmax(1) if legal.shape[1] else greedy
            explore = torch.rand(len(greedy), generator=generator, device=legal.device) < epsilon
            chosen = torch.where(explore, random, greedy).cpu().numpy()
            actions[name] = RaggedArray(
                chosen.reshape(-1, 1), obs.action_masks[name].actors.lengths
            )
        return actions

    def targets(self, batch: Transitions) -> torch.Tensor:
        """Each row's regression target: its (n-step) reward plus the discounted Q-value of
        the best legal choices in what followed, valued by the target network and chosen by it,
        or with double Q by the network."""
        s = self.settings
        with torch.no_grad():
            following = RowQ.of(self.target, batch.next_obs, s.dueling)
            # Argmaxes need no value stream (it is the same for all of an actor's choices).
            chooser = RowQ.of(self.ctx.net, batch.next_obs, False) if s.double_q else following
            best = following.of_choices({n: chooser.greedy(n) for n in following.scores})
        assert batch.discount is not None  # set on every sampled batch
        return torch.from_numpy(batch.rewards) + torch.from_numpy(batch.discount) * best.cpu()

    def update(self, batch: Transitions, step: int, lr: float) -> dict[str, float]:
        target = self.targets(batch)
        chosen = taken(batch.actions, self.names)
        q = RowQ.of(self.ctx.net, batch.obs, self.settings.dueling).of_choices(chosen).cpu()
        assert batch.weights is not None and batch.index is not None  # sampled batches
        # Huber loss as SB3's DQN, each row weighted by its importance weight (all 1 unless
        # prioritized).
        losses = functional.smooth_l1_loss(q, target, reduction="none")
        loss = (torch.from_numpy(batch.weights) * losses).mean()
        self.ctx.optimizer.zero_grad()
        loss.backward()
        grad_norm = self.ctx.optimizer.step(self.ctx.config.optim.max_grad_norm, self.ctx.reducer)
        errors = (q - target).detach()
        self.replay.update_priorities(batch.index, errors.numpy())
        return {
            "loss/q_loss": loss.item(),
            "loss/q_mean": q.mean().item(),
            "loss/td_abs": errors.abs().mean().item(),
            "loss/grad_norm": grad_norm,
            "schedule/epsilon": self.epsilon(step),
        }
