"""MA-POCA: PPO for cooperative groups, its advantages from a group critic
(:mod:`entityrl.algorithms.poca.critic`).

One policy plays every agent of every game. Each rollout, the critic gives the group's value
and every agent's counterfactual baseline; the group's lambda-returns make the critic's targets
and, minus each agent's baseline, the policy's advantages. The policy's own value head is
trained on the group's returns too (it is not used). After the policy's update the critic
takes ``poca.epochs`` passes of ``poca.minibatches`` steps on the rollout's group steps.

With ``net.memory`` the policy keeps a state per agent (row) as in any multi-player rollout;
the group critic stays memoryless: it values each step from the agents' current observations
(it trains on shuffled group steps, not on chunks of consecutive steps).

In a data-parallel run (``world_size`` > 1) each process computes the critic's losses on its
own games; the critic's gradients are summed over the processes (each loss a sum over the
process's group steps divided by the count over all of them, so the sum is the whole batch's
mean), every process takes the same number of critic steps, and its input statistics are
summed too: every process holds the same critic.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import torch

from entityrl.algorithms.base import Context
from entityrl.algorithms.common.rollout import Rollout
from entityrl.algorithms.poca.critic import GroupCritic, POCAConfig, group_returns, group_rewards
from entityrl.algorithms.ppo.algorithm import PPO
from entityrl.env.multiplayer_vec import MultiPlayerVecEnv
from entityrl.training.config import ConfigError, TrainConfig


class POCA(PPO):
    """PPO with MA-POCA's centralized critic and counterfactual baselines."""

    name = "poca"
    Settings = POCAConfig
    # Not PPO's: tuned on the cooperative games with the dataclasses' values.
    defaults: ClassVar[Mapping[str, Any]] = {}
    scales_rewards = False  # ppo.norm_reward=true is refused: not supported yet

    @classmethod
    def check(cls, config: TrainConfig) -> None:
        super().check(config)
        for key, on in (
            ("ppo.norm_reward", config.ppo.norm_reward),
            ("ppo.norm_value", config.ppo.norm_value),
            ("rnd.coef", config.rnd.enabled),
            ("icm.coef", config.icm.enabled),
            ("bc.strength", bool(config.bc.strength)),
            ("env.decisions", config.env.decisions.enabled),  # its group returns run every step
        ):
            if on:
                raise ConfigError(f"algo=poca does not support {key} yet")

    def __init__(self, ctx: Context) -> None:
        env = ctx.env
        if not isinstance(env, MultiPlayerVecEnv):
            raise ConfigError(
                f"algo=poca needs a multi-player environment; {ctx.config.env.id} has one player"
            )
        groups = env.groups
        if len(set(groups.values())) != 1 or set(groups) != set(env.players):
            raise ConfigError(
                f"algo=poca needs every player of {env.name} in one group (groups() gave "
                f"{dict(groups)}); for teams that compete use algo=selfplay"
            )
        self.players = len(env.players)
        try:
            self.critic = GroupCritic(
                env.obs_space, env.action_space, self.players, ctx.config.poca
            ).to(ctx.net.device)
        except ValueError as err:
            raise ConfigError(str(err)) from None
        self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=ctx.config.poca.lr)
        self.targets: npt.NDArray[np.float32] | None = None  # (steps, groups), this rollout's
        super().__init__(ctx)

    def begin(self, resumed: bool, pretrained: bool) -> None:
        super().begin(resumed, pretrained)
        if not resumed:
            self.critic.encoder.update_normalizers(self.sampler.obs, self.ctx.combine)

    def _present(self, active: npt.NDArray[np.bool_]) -> torch.Tensor:
        return torch.from_numpy(active.reshape(-1, self.players))

    def estimate(self, rollout: Rollout) -> None:
        assert rollout.active is not None and rollout.group_rewards is not None
        assert rollout.game_over is not None and rollout.next_obs.active is not None
        ppo = self.ctx.config.ppo
        steps, rows = rollout.dones.shape
        groups = rows // self.players
        with torch.no_grad():
            values, baselines = self.critic(
                rollout.obs, rollout.actions, self._present(rollout.active)
            )
            next_values, _ = self.critic(
                rollout.next_obs, {}, self._present(rollout.next_obs.active)
            )
        rewards = group_rewards(
            rollout.rewards, rollout.group_rewards, rollout.active, self.players
        )
        over = rollout.game_over.reshape(steps, groups, self.players)[..., 0]
        # rollout.mode=async: a group's step is as likely under the learner as the product of
        # its agents' ratios (each truncated at 1, so the product is too).
        ratios = rollout.ratios
        self.targets = group_returns(
            rewards,
            values.cpu().numpy().reshape(steps, groups),
            over,
            next_values.cpu().numpy(),
            ppo.gamma,
            ppo.gae_lambda,
            None if ratios is None else ratios.reshape(steps, groups, self.players).prod(-1),
        )
        returns = np.repeat(self.targets.reshape(-1), self.players)
        rollout.returns = returns.astype(np.float32)
        advantages = returns - baselines.cpu().numpy().reshape(-1)
        if ratios is not None:  # each agent's policy gradient weighed by its own ratio (IMPALA)
            advantages = advantages * ratios.reshape(-1)
        rollout.advantages = advantages.astype(np.float32)

    def learn_more(self, rollout: Rollout, step: int, lr: float) -> dict[str, float]:
        metrics = super().learn_more(rollout, step, lr)
        assert self.targets is not None and rollout.active is not None
        config = self.ctx.config.poca
        present = rollout.active.reshape(-1, self.players)
        targets = torch.from_numpy(self.targets.reshape(-1)).to(self.critic.device)
        group_steps = np.flatnonzero(present.any(1))
        losses = []
        for _ in range(config.epochs):
            order = self.ctx.rng.permutation(group_steps)
            for part in np.array_split(order, config.minibatches):
                if self.ctx.reducer.world_size > 1:
                    losses.append(self._shared_critic_step(rollout, present, targets, part))
                    continue
                if not part.size:
                    continue
                rows = (part[:, None] * self.players + np.arange(self.players)).reshape(-1)
                actions = {name: a.take(rows) for name, a in rollout.actions.items()}
                mask = torch.from_numpy(present[part]).to(self.critic.device)
                values, baselines = self.critic(rollout.obs.take(rows), actions, mask)
                target = targets[part]
                value_loss = (values - target).square().mean()
                baseline_loss = (baselines - target.unsqueeze(1)).square()[mask].mean()
                loss = value_loss + baseline_loss
                self.critic_optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(
                    self.critic.parameters(), self.ctx.config.optim.max_grad_norm
                )
                self.critic_optimizer.step()
                losses.append((value_loss.item(), baseline_loss.item()))
        self.critic.encoder.update_normalizers(rollout.obs, self.ctx.combine)
        value_loss, baseline_loss = np.mean(losses, axis=0)
        metrics["loss/group_value_loss"] = float(value_loss)
        metrics["loss/baseline_loss"] = float(baseline_loss)
        return metrics

    def _shared_critic_step(
        self,
        rollout: Rollout,
        present: npt.NDArray[np.bool_],
        targets: torch.Tensor,
        part: npt.NDArray[np.int64],
    ) -> tuple[float, float]:
        """One critic step of a data-parallel run on this process's group steps ``part`` (maybe
        none): its losses are sums over them divided by the counts over all processes, and the
        gradients summed over the processes, so that all of them take the same step. Returns
        the whole minibatch's (value, baseline) losses."""
        mask = torch.from_numpy(present[part]).to(self.critic.device)
        groups, agents = self.ctx.reducer.sum([part.size, int(mask.sum())])
        self.critic_optimizer.zero_grad()
        local = (0.0, 0.0)
        if part.size:
            rows = (part[:, None] * self.players + np.arange(self.players)).reshape(-1)
            actions = {name: a.take(rows) for name, a in rollout.actions.items()}
            values, baselines = self.critic(rollout.obs.take(rows), actions, mask)
            target = targets[part]
            value_loss = (values - target).square().sum() / max(groups, 1.0)
            baseline_loss = (baselines - target.unsqueeze(1)).square()[mask].sum() / max(
                agents, 1.0
            )
            (value_loss + baseline_loss).backward()
            local = (value_loss.item(), baseline_loss.item())
        params = list(self.critic.parameters())
        flat = torch.cat(
            [(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params]
        )
        self.ctx.reducer.sum_in_place(flat)
        offset = 0
        for p in params:
            p.grad = flat[offset : offset + p.numel()].view_as(p).clone()
            offset += p.numel()
        torch.nn.utils.clip_grad_norm_(params, self.ctx.config.optim.max_grad_norm)
        self.critic_optimizer.step()
        value_loss, baseline_loss = self.ctx.reducer.sum(local)
        return float(value_loss), float(baseline_loss)

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["poca"] = {
            "critic": self.critic.state_dict(),
            "optimizer": self.critic_optimizer.state_dict(),
        }
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.critic.load_state_dict(state["poca"]["critic"])
        self.critic_optimizer.load_state_dict(state["poca"]["optimizer"])
