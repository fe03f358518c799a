"""GAIL: PPO whose task reward is learned from demonstrations (:mod:`entityrl.algorithms.gail.discriminator`).

Each iteration collects a rollout as PPO does, rewards every step with the discriminator's
learned reward (``gail.reward``, by default its logit ``log D - log(1 - D)``; times
``gail.coef``, plus ``gail.env_reward`` times the environment's reward), takes PPO's update,
then trains the discriminator on the rollout's steps against steps of the recordings in
``bc.demos``. Everything else of PPO applies (``ppo.norm_reward`` scales the sum, RND adds its
bonus, ``bc.strength`` adds behaviour cloning on the same recordings).

With ``gail.absorbing``, the learned reward is measured from a reference, the reward of the
absorbing states after the expert's endings, and a step that ended its episode by the task adds
the value of the absorbing state after it (0 with one absorbing state; see the
discriminator's module); the discriminator learns the absorbing state once per such ending.
The rollout does not say which endings were truncated, so the environments are stepped through
:class:`EndingLog`, which keeps each step's truncation flags.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import torch

from entityrl.algorithms.base import Context
from entityrl.algorithms.common.rollout import Rollout
from entityrl.algorithms.gail.discriminator import Discriminator, GAILConfig, Steps, endings
from entityrl.algorithms.ppo.algorithm import PPO
from entityrl.env.multiplayer_vec import MultiPlayerVecEnv
from entityrl.env.vec_env import VecEnv
from entityrl.env.vec_obs import VecObs
from entityrl.ragged import RaggedArray
from entityrl.training.config import ConfigError, TrainConfig
from entityrl.training.sampler import Sampler


def expert_steps(
    purpose: str, demos: Sequence[str], max_episodes: int | None, env: VecEnv
) -> Steps:
    """Every step of the recordings ``demos`` (at most ``max_episodes`` episodes), with the
    steps that ended an episode by the task marked; a recording that cannot serve is reported
    as a bad setting (ConfigError naming bc.demos, for ``purpose`` such as "algo=gail")."""
    from entityrl.recording import RecordingError
    from entityrl.training.demonstrations import join, load_episodes

    try:
        episodes = load_episodes(list(demos), env, max_episodes)
    except RecordingError as err:
        raise ConfigError(f"bc.demos (for {purpose}): {err}") from None
    if not episodes:
        raise ConfigError(f"bc.demos (for {purpose}) holds no complete episode: {list(demos)}")
    joined = join(episodes, env)
    terminal = [np.zeros(e.length, np.bool_) for e in episodes]
    for flags, episode in zip(terminal, episodes, strict=True):
        flags[-1] = not episode.truncated
    return Steps(joined.obs, joined.actions, np.concatenate(terminal))


class EndingLog(VecEnv):
    """``env`` as it is, keeping per step which rows' episodes were truncated (cut off, not
    ended by the task) until :meth:`take` collects them."""

    def __init__(self, env: VecEnv) -> None:
        self.env = env
        self.obs_space = env.obs_space
        self.action_space = env.action_space
        self.num_envs = env.num_envs
        self.truncated: list[npt.NDArray[np.bool_]] = []

    def reset(self) -> VecObs:
        return self.env.reset()

    def act(self, actions: Mapping[str, RaggedArray]) -> VecObs:
        after = self.env.act(actions)
        cut = np.zeros(after.num_rows, np.bool_) if after.truncated is None else after.truncated
        self.truncated.append(cut.copy())
        return after

    def take(self, steps: int) -> npt.NDArray[np.bool_]:
        """The flags of the last ``steps`` steps, (steps, envs); forgets all kept so far."""
        flags = np.stack(self.truncated[-steps:])
        self.truncated.clear()
        return flags

    def close(self) -> None:
        self.env.close()


class GAIL(PPO):
    """Generative adversarial imitation learning."""

    name = "gail"
    Settings = GAILConfig
    # Not PPO's: tuned on the entity environments with the dataclasses' values.
    defaults: ClassVar[Mapping[str, Any]] = {}

    @classmethod
    def check(cls, config: TrainConfig) -> None:
        super().check(config)
        if config.gail.bs % config.world_size:
            raise ConfigError(
                f"gail.bs ({config.gail.bs}) must be a multiple of world_size "
                f"({config.world_size}): each process samples an equal share of every "
                "discriminator batch"
            )

    def __init__(self, ctx: Context) -> None:
        self.endings: EndingLog | None = None  # set by make_sampler, called by the base
        super().__init__(ctx)
        config = ctx.config
        self.expert = expert_steps("algo=gail", config.bc.demos, config.bc.max_episodes, ctx.env)
        self.expert_endings = endings(self.expert)  # where the reward is measured from
        self.last_learned = 0.0  # the latest rollout's mean learned reward (for the log)
        self.last_reference = 0.0  # the reward it is measured from (for the log)
        # The latest rollout's steps that ended by the task (rewarded, then learned from).
        self.rollout_terminal = np.zeros((0, ctx.env.num_envs), np.bool_)
        self.discriminator = Discriminator(
            ctx.env.obs_space, ctx.env.action_space, config.gail, "gail", config.optim,
            ctx.net.device, policy=ctx.net,
        )  # fmt: skip

    def make_sampler(self) -> Sampler:
        ctx = self.ctx
        if isinstance(ctx.env, MultiPlayerVecEnv):  # games: each seat's sampler, no truncation log
            return super().make_sampler()
        # The policy acts in this process (with environments in worker processes too): the
        # log must see every step.
        self.endings = EndingLog(ctx.env)
        return Sampler(self.endings, ctx.net, ctx.config.rollout.steps, ctx.generator)

    def begin(self, resumed: bool, pretrained: bool) -> None:
        super().begin(resumed, pretrained)
        if not resumed:
            self.discriminator.net.update_normalizers(self.expert.obs)

    def terminal(self, rollout: Rollout) -> npt.NDArray[np.bool_]:
        """(steps, envs): the step ended its episode by the task (not truncated)."""
        if self.endings is None:
            return rollout.dones
        return rollout.dones & ~self.endings.take(rollout.dones.shape[0])

    def task_rewards(self, rollout: Rollout) -> npt.NDArray[np.float32]:
        config = self.ctx.config
        gail = config.gail
        self.rollout_terminal = self.terminal(rollout)
        self.last_reference = self.discriminator.reference(self.expert_endings)
        learned = self.discriminator.rewards(
            Steps(rollout.obs, rollout.actions, self.rollout_terminal.reshape(-1)),
            config.ppo.gamma,
            self.last_reference,
        )
        self.last_learned = float(learned.mean())
        rewards = gail.coef * learned.reshape(rollout.rewards.shape)
        if gail.env_reward:
            rewards = rewards + gail.env_reward * rollout.rewards
        if self.reward_scaler is None:
            return rewards
        return self.reward_scaler(rewards, rollout.dones, self.ctx.combine)

    def learn_more(self, rollout: Rollout, step: int, lr: float) -> dict[str, float]:
        metrics = super().learn_more(rollout, step, lr)
        config = self.ctx.config
        gail = config.gail
        policy = Steps(rollout.obs, rollout.actions, self.rollout_terminal.reshape(-1))
        stats = self.discriminator.update(
            policy,
            self.expert,
            self.ctx.rng,
            gail.batches,
            gail.bs,
            config.ppo.gamma,
            self.ctx.reducer,
        )
        metrics.update({f"loss/gail_{key}": value for key, value in stats.items()})
        metrics["loss/gail_reward"] = self.last_learned
        metrics["loss/gail_absorbing_reward"] = self.last_reference
        return metrics

    def replicated(self) -> list[torch.nn.Module]:
        return [*super().replicated(), self.discriminator.model]

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "gail": self.discriminator.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.discriminator.load_state_dict(state["gail"])
