"""GAIL: PPO whose task reward is learned from demonstrations (:mod:`entityrl.algorithms.gail.discriminator`).

Each iteration collects a rollout as PPO does, rewards every step with the discriminator's
``-log(1 - D(s, a))`` (times ``gail.coef``, plus ``gail.env_reward`` times the environment's
reward), takes PPO's update, then trains the discriminator on the rollout's steps against
steps of the recordings in ``bc.demos``. Everything else of PPO applies (``ppo.norm_reward``
scales the sum, RND adds its bonus, ``bc.strength`` adds behaviour cloning on the same
recordings).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from entityrl.algorithms.base import Context
from entityrl.algorithms.common.rollout import Rollout
from entityrl.algorithms.gail.discriminator import Discriminator, GAILConfig
from entityrl.algorithms.ppo.algorithm import PPO
from entityrl.training.demonstrations import demonstrations_for


class GAIL(PPO):
    """Generative adversarial imitation learning."""

    name = "gail"
    Settings = GAILConfig
    one_process = True

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        config = ctx.config
        self.expert = demonstrations_for("algo=gail", config.bc, ctx.env)
        self.last_learned = 0.0  # the latest rollout's mean learned reward (for the log)
        self.discriminator = Discriminator(
            ctx.env.obs_space, ctx.env.action_space, config.gail, config.optim, ctx.net.device
        )

    def begin(self, resumed: bool, pretrained: bool) -> None:
        super().begin(resumed, pretrained)
        if not resumed:
            self.discriminator.net.update_normalizers(self.expert.obs)

    def task_rewards(self, rollout: Rollout) -> npt.NDArray[np.float32]:
        gail = self.ctx.config.gail
        learned = self.discriminator.rewards(rollout.obs, rollout.actions)
        self.last_learned = float(learned.mean())
        rewards = gail.coef * learned.reshape(rollout.rewards.shape)
        if gail.env_reward:
            rewards = rewards + gail.env_reward * rollout.rewards
        if self.reward_scaler is None:
            return rewards
        return self.reward_scaler(rewards, rollout.dones, self.ctx.combine)

    def learn_more(self, rollout: Rollout, step: int, lr: float) -> dict[str, float]:
        metrics = super().learn_more(rollout, step, lr)
        policy = (rollout.obs, rollout.actions)
        expert = (self.expert.obs, self.expert.actions)
        metrics.update(self.discriminator.update(policy, expert, self.ctx.rng))
        metrics["loss/gail_reward"] = self.last_learned
        return metrics

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "gail": self.discriminator.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.discriminator.load_state_dict(state["gail"])
