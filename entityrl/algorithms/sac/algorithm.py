"""Soft actor-critic on entity observations (``algo=sac``); see the package's doc."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from entityrl.algorithms.base import Context
from entityrl.algorithms.common.checks import continuous_actions, require_positive
from entityrl.algorithms.common.optimizer import Adam, FlatOptimizer
from entityrl.algorithms.common.replay import Transitions
from entityrl.algorithms.common.target import frozen_copy, soft_update
from entityrl.algorithms.off_policy import OffPolicyAlgorithm, OffPolicySettings
from entityrl.algorithms.sac.critic import (
    Critic,
    Encoded,
    TwinCritic,
    actor_embeddings,
    encode,
)
from entityrl.algorithms.sac.policy import (
    MaskedPolicy,
    Squashed,
    StdHeads,
    masked_policy,
    outside,
    sample_squashed,
)
from entityrl.env.vec_obs import VecObs
from entityrl.nn import gaussian
from entityrl.nn.rogue_net import _key
from entityrl.ragged import RaggedArray


@dataclass
class SACSettings(OffPolicySettings):
    """Soft actor-critic (discrete and continuous actions)."""

    actor_lr: float = 3e-4
    """Learning rate of the policy (the run's network). optim.lr is not used: the run's
    schedule (optim.anneal_lr, optim.warmup_steps) scales all three learning rates."""
    critic_lr: float = 3e-4
    """Learning rate of the two Q-networks."""
    alpha_lr: float = 3e-4
    """Learning rate of the entropy temperatures (log alpha, one per action)."""
    tau: float = 0.005
    """How far the target Q-networks move toward the Q-networks at each update."""
    initial_alpha: float = 0.2
    """Every action's entropy temperature at the start."""
    target_entropy_scale: float = 0.25
    """Discrete actions: the target entropy of an actor is this fraction of log(its legal
    choices). 0.98, the value of Christodoulou (2019), leaves the policy nearly uniform (see
    docs/algorithms.md, SAC). Continuous actions use -dims (Haarnoja et al. 2018)."""
    critic_hidden: int = 256
    """Width of the two hidden layers of a continuous action's Q-network on top of its
    encoder (Stable-Baselines3's default)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        require_positive(
            "sac",
            actor_lr=self.actor_lr,
            critic_lr=self.critic_lr,
            alpha_lr=self.alpha_lr,
            initial_alpha=self.initial_alpha,
            critic_hidden=self.critic_hidden,
        )
        if not 0 < self.tau <= 1:
            raise ValueError(f"sac.tau must be in (0, 1], got {self.tau}")
        if not 0 <= self.target_entropy_scale < 1:
            raise ValueError(
                "sac.target_entropy_scale must be in [0, 1) (a fraction of the largest "
                f"entropy), got {self.target_entropy_scale}"
            )


class SAC(OffPolicyAlgorithm):
    """Soft actor-critic: the run's network is the policy, two critics and their targets
    are SAC's own (see the package's doc)."""

    name = "sac"
    Settings = SACSettings
    # The critics' and temperatures' optimizers step on this process's gradients only.
    one_process = True

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        net, settings = ctx.net, self.settings
        self.continuous = continuous_actions(net.action_space)
        self.discrete = [name for name in net.action_space if name not in self.continuous]
        self.critic = self.own(
            "critic",
            TwinCritic(
                *(
                    Critic(
                        net.obs_space,
                        net.action_space,
                        ctx.config.net,
                        net.device,
                        settings.critic_hidden,
                    )
                    for _ in range(2)
                )
            ),
        )
        self.target = self.own("target", cast(TwinCritic, frozen_copy(self.critic)))
        self.critic_optimizer = self.own(
            "critic_optimizer", FlatOptimizer(self.critic, lambda ps: Adam(ps, settings.critic_lr))
        )
        self.std_heads = self.own(
            "std_heads", StdHeads(self.continuous, net.action_space, ctx.config.net.d_model)
        ).to(net.device)
        self.std_optimizer = self.own(
            "std_optimizer", Adam(list(self.std_heads.parameters()), settings.actor_lr)
        )
        start = math.log(settings.initial_alpha)
        self.log_alpha = self.own(
            "log_alpha",
            nn.ParameterDict(
                {_key(n): nn.Parameter(torch.tensor(start)) for n in net.action_space}
            ).to(net.device),
        )
        self.alpha_optimizer = self.own(
            "alpha_optimizer", Adam(list(self.log_alpha.parameters()), settings.alpha_lr)
        )

    def begin(self, resumed: bool, pretrained: bool) -> None:
        super().begin(resumed, pretrained)
        # The saved policy takes the mean action: see entityrl.algorithms.sac.policy.
        with torch.no_grad():
            for name in self.continuous:
                self.ctx.net.heads[_key(name)].log_std.fill_(gaussian.LOG_STD_MIN)
        self._follow_normalization()

    # ------------------------------------------------------------------ acting
    def act(self, obs: VecObs, step: int) -> dict[str, RaggedArray]:
        net = self.ctx.net
        with torch.no_grad():
            encoded = encode(net, obs)
            actions: dict[str, RaggedArray] = {}
            for name in net.action_space:
                if name in self.continuous:
                    head = net.heads[_key(name)]
                    squashed = self._policy_sample(encoded, name).actions
                    chosen = (head.center + head.half_range * squashed).cpu().numpy()
                else:
                    out = net.heads[_key(name)](
                        encoded.x, encoded.batch.heads[name], None, False, self.ctx.generator
                    )
                    chosen = out.actions.cpu().numpy().reshape(-1, 1)
                actions[name] = RaggedArray(chosen, obs.action_masks[name].actors.lengths)
        return actions

    def _policy(self, encoded: Encoded, name: str) -> MaskedPolicy:
        head = self.ctx.net.heads[_key(name)]
        return masked_policy(head.scores(encoded.x, encoded.batch.heads[name]))

    def _mean_action(self, encoded: Encoded, name: str) -> torch.Tensor:
        """(actors, dims): the policy network's Gaussian mean, in units of the half range."""
        return self.ctx.net.heads[_key(name)].proj(actor_embeddings(encoded, name))

    def _policy_sample(self, encoded: Encoded, name: str) -> Squashed:
        log_std = self.std_heads.log_std(name, actor_embeddings(encoded, name))
        return sample_squashed(self._mean_action(encoded, name), log_std, self.ctx.generator)

    # ------------------------------------------------------------------ learning
    def update(self, batch: Transitions, step: int, lr: float) -> dict[str, float]:
        ctx, settings = self.ctx, self.settings
        self._follow_normalization()
        alpha = {name: self.log_alpha[_key(name)].detach().exp() for name in ctx.net.action_space}
        target = self._soft_target(batch, alpha)

        obs = batch.obs
        actor = encode(ctx.net, obs)
        critics = self.critic.encode(obs)
        taken = torch.zeros(2, obs.num_rows, device=ctx.net.device)
        actor_loss = torch.zeros(obs.num_rows, device=ctx.net.device)
        entropy_gaps: dict[str, torch.Tensor] = {}
        for name in self.discrete:
            values = self.critic.choice_values(critics, name)
            chosen = torch.from_numpy(batch.actions[name].data[:, 0]).to(ctx.net.device)
            taken = taken + torch.stack(
                [self._row_sum(q.gather(1, chosen[:, None])[:, 0], obs, name) for q in values]
            )
            policy = self._policy(actor, name)
            soft_q = torch.minimum(*values).detach()
            per_actor = policy.expected(alpha[name] * policy.logprobs - soft_q)
            actor_loss = actor_loss + self._row_sum(per_actor, obs, name)
            legal = policy.legal.sum(1)
            choosing = legal > 1  # one legal choice (or none) has no entropy to tune
            wanted = settings.target_entropy_scale * legal[choosing].float().log()
            entropy_gaps[name] = (policy.entropy[choosing] - wanted).detach()
        for name in self.continuous:
            head = ctx.net.heads[_key(name)]
            data = torch.from_numpy(batch.actions[name].data).to(ctx.net.device)
            values = self.critic.action_values(
                critics, name, (data - head.center) / head.half_range
            )
            taken = taken + torch.stack([self._row_sum(q, obs, name) for q in values])
            sample = self._policy_sample(actor, name)
            # The critics judge the policy's actions; their own weights learn only from the TD
            # error (their embeddings are detached here, and their MLPs' gradients from this
            # loss are cleared before the critics' step).
            soft_q = torch.minimum(
                *self.critic.action_values(critics.detached(), name, sample.actions)
            )
            per_actor = alpha[name] * sample.logprobs - soft_q
            actor_loss = actor_loss + self._row_sum(
                per_actor + outside(self._mean_action(actor, name)), obs, name
            )
            dims = sample.actions.shape[1]
            entropy_gaps[name] = (-sample.logprobs + dims).detach()

        actor_loss = actor_loss.mean()
        errors = taken - target
        # Prioritized replay's importance weights (None or all 1 when sampled uniformly).
        weights = 1.0 if batch.weights is None else torch.from_numpy(batch.weights).to(errors)
        critic_loss = 0.5 * (weights * errors.square()).mean(1).sum()
        if batch.index is not None:
            self.replay.update_priorities(batch.index, errors.detach().abs().mean(0).cpu().numpy())
        ctx.optimizer.zero_grad()
        self._zero_std_grads()
        actor_loss.backward()
        self.critic_optimizer.zero_grad()
        critic_loss.backward()
        # Unclipped, as in the paper and Stable-Baselines3.
        self.critic_optimizer.step(math.inf)
        scale = lr / ctx.config.optim.lr  # the run's schedule, 1 without annealing or warmup
        for group in (*ctx.optimizer.param_groups, *self.std_optimizer.param_groups):
            group["lr"] = settings.actor_lr * scale
        ctx.optimizer.step(ctx.config.optim.max_grad_norm)
        self.std_optimizer.step()
        metrics = self._tune_temperatures(entropy_gaps, settings.alpha_lr * scale)
        soft_update(self.target, self.critic, settings.tau)
        metrics.update(
            {
                "loss/critic": critic_loss.item(),
                "loss/actor": actor_loss.item(),
                "loss/q_mean": taken.mean().item(),
            }
        )
        return metrics

    def _zero_std_grads(self) -> None:
        for parameter in self.std_heads.parameters():
            parameter.grad = None

    @torch.no_grad()
    def _soft_target(self, batch: Transitions, alpha: dict[str, torch.Tensor]) -> torch.Tensor:
        """(rows,): the (n-step) reward plus the discounted soft value of the next row (none
        after an ending by the task), the sum over its actors of E_pi[min(Q1, Q2) - alpha log
        pi]."""
        ctx, obs = self.ctx, batch.next_obs
        actor = encode(ctx.net, obs)
        encoded = self.target.encode(obs)
        value = torch.zeros(obs.num_rows, device=ctx.net.device)
        for name in self.discrete:
            policy = self._policy(actor, name)
            q = torch.minimum(*self.target.choice_values(encoded, name))
            per_actor = policy.expected(q - alpha[name] * policy.logprobs)
            value = value + self._row_sum(per_actor, obs, name)
        for name in self.continuous:
            sample = self._policy_sample(actor, name)
            q = torch.minimum(*self.target.action_values(encoded, name, sample.actions))
            value = value + self._row_sum(q - alpha[name] * sample.logprobs, obs, name)
        rewards = torch.from_numpy(batch.rewards).to(value)
        # A sampled batch's discount: gamma**k for a k-step transition, 0 after an ending by
        # the task (the replay buffer's n-step returns).
        if batch.discount is None:
            discount = self.settings.gamma * torch.from_numpy(~batch.terminal).to(value)
        else:
            discount = torch.from_numpy(batch.discount).to(value)
        return rewards + discount * value

    def _tune_temperatures(self, gaps: dict[str, torch.Tensor], lr: float) -> dict[str, float]:
        """One step of every action's temperature toward its target entropy (Haarnoja et al.
        2018b, Eq. 18): alpha rises while the entropy is below the target, falls above it."""
        metrics: dict[str, float] = {}
        for parameter in self.log_alpha.parameters():
            parameter.grad = None
        loss = torch.zeros((), device=self.ctx.net.device)
        for name, gap in gaps.items():
            log_alpha = self.log_alpha[_key(name)]
            metrics[f"sac/alpha/{name}"] = float(log_alpha.detach().exp())
            if gap.numel():  # no actor with a choice in this batch: nothing to tune on
                loss = loss + log_alpha * gap.mean()
                metrics[f"sac/entropy_gap/{name}"] = float(gap.mean())
        if loss.requires_grad:
            loss.backward()
            self.alpha_optimizer.param_groups[0]["lr"] = lr
            self.alpha_optimizer.step()
        return metrics

    def _follow_normalization(self) -> None:
        """Give the critics (and their targets) the policy's input normalization, which the
        base updates from every observation: all four then see inputs alike."""
        source = list(self.ctx.net.encoder.embedding.buffers())
        with torch.no_grad():
            for critic in (*self.critic.critics(), *self.target.critics()):
                own = critic.net.encoder.embedding.buffers()
                for mine, theirs in zip(own, source, strict=True):
                    mine.copy_(theirs)

    def _row_sum(self, per_actor: torch.Tensor, obs: VecObs, name: str) -> torch.Tensor:
        """(rows,): the sum over each row's actors of the action ``name``."""
        lengths: npt.NDArray[np.int64] = obs.action_masks[name].actors.lengths
        rows = torch.from_numpy(np.repeat(np.arange(len(lengths)), lengths)).to(per_actor.device)
        return per_actor.new_zeros(obs.num_rows).index_add(0, rows, per_actor)
