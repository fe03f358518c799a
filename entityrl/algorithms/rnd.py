"""Random network distillation (RND): an exploration bonus for sparse rewards.

Burda et al. (2018): a fixed, randomly initialized *target* network maps each observation to
an embedding, and a *predictor* network is trained to reproduce it on the observations the
agent visits. Its error is small on observations like those seen often and large on new ones,
so the error on the next observation is paid as an intrinsic reward.

Both networks read entity observations as one vector per row
(:mod:`entityrl.algorithms.common.intrinsic`, input statistics shared by both); the predictor
has one more hidden layer than the target, so that it can fit it.

The intrinsic reward is centred on its mean over the rollout, divided by the running standard
deviation of its own discounted return (the paper's normalization), scaled by ``rnd.coef`` and
added to the (possibly ``ppo.norm_reward``-scaled) environment reward: one value head learns
the sum. The centring replaces the paper's second, non-episodic value head: without it, on
Corridor, seed 1 fell from 1.0 to 0.0 within 40,960 steps, its policy stopping short of the
goal to collect the bonus longer. The predictor is trained after each PPO update, on the
rollout's observations, with its own optimizer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import numpy.typing as npt
import torch

from entityrl.algorithms.common.intrinsic import (
    BonusConfig,
    BonusScale,
    ExplorationBonus,
    RowEncoder,
    RowInputs,
)
from entityrl.algorithms.common.optimizer import OptimConfig, adam
from entityrl.algorithms.common.reduce import Reducer
from entityrl.algorithms.common.rollout import Rollout
from entityrl.env.spaces import ObsSpace
from entityrl.env.vec_obs import VecObs


@dataclass
class RNDConfig(BonusConfig):
    """Random network distillation (an exploration bonus; off while ``coef`` is 0;
    ``d_model``: the width of the target's and predictor's embeddings and output)."""

    section: ClassVar[str] = "rnd"


class RNDModel(RowInputs):
    """The input normalizers, the fixed target and the trained predictor."""

    def __init__(self, space: ObsSpace, d_model: int) -> None:
        super().__init__(space)
        self.target = RowEncoder(space, d_model, hidden_layers=1)
        self.predictor = RowEncoder(space, d_model, hidden_layers=2)
        self.target.requires_grad_(False)

    def errors(self, obs: VecObs) -> torch.Tensor:
        """Per row, the predictor's mean squared error (with gradients for the predictor)."""
        rows = self.normalized(obs)
        with torch.no_grad():
            target = self.target(rows)
        return (self.predictor(rows) - target).pow(2).mean(dim=1)


class RND(ExplorationBonus):
    """The exploration bonus of one training process: computes intrinsic rewards for the
    sampler and trains the predictor after each update."""

    model: RNDModel

    def __init__(
        self,
        space: ObsSpace,
        config: RNDConfig,
        optim: OptimConfig,
        num_envs: int,
        reducer: Reducer | None = None,
    ) -> None:
        self.config = config
        self.optim = optim
        self.reducer = reducer or Reducer()
        model = RNDModel(space, config.d_model)
        optimizer = adam(
            model.predictor,
            OptimConfig(lr=config.lr, eps=optim.eps, max_grad_norm=optim.max_grad_norm),
        )
        super().__init__(
            model, optimizer, BonusScale(config.coef, num_envs, config.gamma, self.reducer)
        )

    @torch.no_grad()
    def bonus(self, obs: VecObs, after: VecObs) -> npt.NDArray[np.float32]:
        """The intrinsic rewards of a rollout, (steps, envs): step ``t``'s is the novelty of
        the observation that followed it. ``obs``: the rollout's rows in (step, env) order;
        ``after``: the observation after its last step."""
        envs = after.num_rows
        novelty = torch.cat([self.model.errors(obs), self.model.errors(after)]).numpy()
        return self.scale(novelty[envs:].reshape(-1, envs))

    def rollout_bonus(self, rollout: Rollout) -> npt.NDArray[np.float32]:
        return self.bonus(rollout.obs, rollout.next_obs)

    def learn(self, rollout: Rollout, rng: np.random.Generator) -> dict[str, float]:
        loss = self.update(rollout.obs, rng)
        return {"loss/rnd_loss": loss, "loss/rnd_intrinsic": self.scale.last_mean}

    def update(self, obs: VecObs, rng: np.random.Generator) -> float:
        """Train the predictor on the rollout's observations (``rnd.epochs`` passes of
        minibatches of ``optim.bs`` rows), then take them into the input statistics; returns
        the mean loss."""
        bs = self.optim.bs // self.reducer.world_size
        losses = []
        for _ in range(self.config.epochs):
            order = rng.permutation(obs.num_rows)
            for start in range(0, obs.num_rows, bs):
                rows = order[start : start + bs]
                (n_rows,) = self.reducer.sum([rows.shape[0]])
                self.optimizer.zero_grad()
                loss = self.model.errors(obs.take(rows)).sum() / n_rows
                loss.backward()
                self.optimizer.step(self.optim.max_grad_norm, self.reducer)
                losses.append(float(self.reducer.sum([loss.item()])[0]))
        self.model.update_normalizers(obs, self.scale.combine)
        return float(np.mean(losses))
