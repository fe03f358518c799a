"""DAC: Discriminator-Actor-Critic (Kostrikov et al. 2019), off-policy adversarial imitation.

The environments' transitions go into the replay buffer of
:class:`~entityrl.algorithms.off_policy.OffPolicyAlgorithm`; each update trains, on one
sampled minibatch:

1. the discriminator (:mod:`entityrl.algorithms.gail.discriminator`, shared with GAIL: absorbing
   states, gradient penalty, the saturation warning) on the minibatch against as many steps of
   the recordings in ``bc.demos``;
2. a critic on the learned reward (``dac.reward``, by default the logit
   ``log D - log(1 - D)``; the environment's reward is never read): a RogueNet of its own
   whose discrete heads' scores are Q-values per actor and choice; a row's Q-value is the sum
   over its actors (so rows of any number of actors share one target), bootstrapped from a
   slowly moving target copy. The reward is measured from the expert's absorbing states' and a
   step that ended its episode by the task adds the absorbing state's value after it (see the
   discriminator's module), so the critic never bootstraps past an ending: the fixed point
   DAC's absorbing transitions train toward, without learning it. A truncated step bootstraps
   from its final observation;
3. the policy (the run's network) as discrete soft actor-critic (Christodoulou 2019): per
   actor, the expected ``alpha * log pi - Q`` over its legal choices.

Discrete actions only (categorical, global categorical, select-entity): continuous actions
have no per-choice Q-values here.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.nn import functional

from entityrl.algorithms.base import Context
from entityrl.algorithms.common.checks import require_discrete
from entityrl.algorithms.common.optimizer import OptimConfig, adam
from entityrl.algorithms.common.replay import Transitions
from entityrl.algorithms.common.target import frozen_copy, soft_update
from entityrl.algorithms.gail.algorithm import expert_steps
from entityrl.algorithms.gail.discriminator import (
    Discriminator,
    DiscriminatorSettings,
    Steps,
    endings,
)
from entityrl.algorithms.off_policy import OffPolicyAlgorithm, OffPolicySettings
from entityrl.env.vec_obs import VecObs
from entityrl.nn.heads import ChoiceScores
from entityrl.nn.rogue_net import RogueNet
from entityrl.ragged import RaggedArray


@dataclass
class DACSettings(DiscriminatorSettings, OffPolicySettings):
    """DAC (algo=dac): off-policy actor-critic on a reward learned from the recordings in
    bc.demos."""

    alpha: float = 0.05
    """Weight of the policy's entropy in its loss and in the critic's targets."""
    tau: float = 0.005
    """How far the target critic moves toward the critic at each update."""
    critic_lr: float = 0.0003
    """Learning rate of the critic (the policy's is optim.lr)."""

    def __post_init__(self) -> None:
        OffPolicySettings.__post_init__(self)
        self.check_discriminator("dac")
        if self.alpha < 0 or not 0 < self.tau <= 1 or self.critic_lr <= 0:
            raise ValueError(
                f"dac: need alpha >= 0, 0 < tau <= 1 and critic_lr > 0, got alpha={self.alpha}, "
                f"tau={self.tau}, critic_lr={self.critic_lr}"
            )


class DAC(OffPolicyAlgorithm):
    """Discriminator-Actor-Critic for discrete entity actions."""

    name = "dac"
    Settings = DACSettings
    one_process = True

    def __init__(self, ctx: Context) -> None:
        require_discrete("dac", ctx.config.env.id, ctx.env.action_space, "algo=gail")
        super().__init__(ctx)
        config, settings = ctx.config, self.settings
        self.expert = expert_steps("algo=dac", config.bc.demos, config.bc.max_episodes, ctx.env)
        self.expert_endings = endings(self.expert)  # where the reward is measured from
        device = ctx.net.device
        self.discriminator = self.own(
            "discriminator",
            Discriminator(
                ctx.env.obs_space,
                ctx.env.action_space,
                settings,
                "dac",
                config.optim,
                device,
                policy=ctx.net,
            ),
        )
        self.critic = self.own(
            "critic", RogueNet(ctx.env.obs_space, ctx.env.action_space, ctx.net.config, device)
        )
        critic_optim = OptimConfig(lr=settings.critic_lr, eps=config.optim.eps)
        self.critic_optimizer = self.own("critic_optimizer", adam(self.critic, critic_optim))
        self.target = self.own("target", frozen_copy(self.critic))

    def begin(self, resumed: bool, pretrained: bool) -> None:
        super().begin(resumed, pretrained)
        if not resumed:
            self.discriminator.net.update_normalizers(self.expert.obs)
            self.critic.update_normalizers(self.obs)
            soft_update(self.target, self.critic, 1.0)

    def act(self, obs: VecObs, step: int) -> dict[str, RaggedArray]:
        return self.ctx.net.act(obs, generator=self.ctx.generator).actions(obs)

    def update(self, batch: Transitions, step: int, lr: float) -> dict[str, float]:
        settings, gamma = self.settings, self.settings.gamma
        policy = Steps(batch.obs, batch.actions, batch.terminal)
        stats = self.discriminator.update(
            policy, self.expert, self.ctx.rng, batches=1, bs=batch.num_rows, gamma=gamma
        )
        reference = self.discriminator.reference(self.expert_endings)
        rewards = torch.from_numpy(self.discriminator.rewards(policy, gamma, reference))
        terminal = torch.from_numpy(batch.terminal).float()
        with torch.no_grad():
            following = self.soft_values(batch.next_obs, self.target.choice_scores(batch.next_obs))
        target = rewards + gamma * (1 - terminal) * following
        self.critic.update_normalizers(batch.obs)
        q = self.critic.choice_scores(batch.obs)
        taken = torch.zeros(batch.num_rows)
        for name, s in q.items():
            chosen = torch.from_numpy(batch.actions[name].data[:, 0])
            per_actor = s.scores.gather(1, chosen[:, None])[:, 0]
            taken = taken.index_add(0, _rows(batch.actions[name]), per_actor)
        critic_loss = functional.mse_loss(taken, target)
        self.critic_optimizer.zero_grad()
        critic_loss.backward()
        self.critic_optimizer.step(self.ctx.config.optim.max_grad_norm)
        soft_update(self.target, self.critic, settings.tau)

        with torch.no_grad():
            q_now = {name: s.scores for name, s in self.critic.choice_scores(batch.obs).items()}
        logits = self.ctx.net.choice_scores(batch.obs)
        terms, entropy, actors = [], torch.zeros(()), 0
        for name, s in logits.items():
            p, logp = _distribution(s)
            terms.append((p * (settings.alpha * logp - q_now[name].masked_fill(p == 0, 0))).sum(1))
            entropy = entropy - (p * logp).sum().detach()
            actors += len(p)
        actor_loss = torch.cat(terms).mean()
        self.ctx.optimizer.zero_grad()
        actor_loss.backward()
        self.ctx.optimizer.step(self.ctx.config.optim.max_grad_norm)
        return {
            **{f"loss/dac_{key}": value for key, value in stats.items()},
            "loss/dac_reward": float(rewards.mean()),
            "loss/dac_absorbing_reward": reference,
            "loss/critic_loss": critic_loss.item(),
            "loss/q_mean": taken.mean().item(),
            "loss/actor_loss": actor_loss.item(),
            "loss/entropy": entropy.item() / max(actors, 1),
        }

    def soft_values(self, obs: VecObs, q: dict[str, ChoiceScores]) -> torch.Tensor:
        """Per row, the sum over its actors of ``E_pi[Q - alpha * log pi]`` under the policy."""
        with torch.no_grad():
            logits = self.ctx.net.choice_scores(obs)
        values = torch.zeros(obs.num_rows)
        for name, s in logits.items():
            p, logp = _distribution(s)
            scores = q[name].scores.masked_fill(p == 0, 0)
            per_actor = (p * (scores - self.settings.alpha * logp)).sum(1)
            values = values.index_add(0, _rows(obs.action_masks[name].actors), per_actor)
        return values


def _distribution(s: ChoiceScores) -> tuple[torch.Tensor, torch.Tensor]:
    """Per actor, the policy's probabilities of its choices and their logarithms (0 where a
    choice is illegal, so products with them vanish)."""
    legal = torch.ones_like(s.scores, dtype=torch.bool) if s.legal is None else s.legal
    logp = s.scores.masked_fill(~legal, -torch.inf).log_softmax(1)
    logp = torch.where(legal, logp, torch.zeros_like(logp))
    return logp.exp() * legal, logp


def _rows(per_actor: RaggedArray) -> torch.Tensor:
    """The row of each actor."""
    return torch.from_numpy(per_actor.row_index())
