"""Intrinsic curiosity module (ICM): an exploration bonus for what the agent cannot predict.

Pathak et al. (2017): an encoder maps each observation to features; an *inverse* model learns
to tell, from the features of an observation and of the next, which action was taken, which
trains the encoder to keep what the agent's actions can change and to drop what they cannot
(noise the agent does not control stays unrewarded); a *forward* model learns to predict the
next observation's features from the current ones and the action. Its error on a step is the
step's intrinsic reward: transitions the agent has not learned the effect of pay.

On entity observations:

* the encoder reads each row as RND's networks do (:mod:`entityrl.algorithms.common.intrinsic`);
* a row's action is summarized as a vector of fixed size: for each categorical action (per
  entity or global) the share of the row's actors that picked each choice, for each continuous
  one the mean of its actors' actions. Select-entity actions are left out (their choices are
  entities, not a fixed list); an environment must have at least one other action;
* the inverse model predicts that summary: the choice shares by cross-entropy (one choice per
  row for a global action, the classic case), the continuous means by squared error, on rows
  where the action had actors;
* the forward loss does not train the encoder through its target (the next observation's
  features): the forward model could otherwise shrink them to make prediction easy;
* a step that ended an episode has no next observation in the rollout (the row after it is the
  next episode's start): it earns no bonus and is not trained on.

The bonus is centred and scaled like RND's (``icm.coef``, ``icm.gamma``) and added to the
environment's reward; the models train after each policy update on the rollout's transitions,
with their own optimizer, minimizing ``(1 - beta) * inverse + beta * forward``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import numpy.typing as npt
import torch
from torch import nn
from torch.nn import functional

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
from entityrl.env.actions.categorical import ChoiceSpace
from entityrl.env.actions.continuous import BoundedSpace
from entityrl.env.spaces import ActionSpace, ObsSpace
from entityrl.env.vec_obs import VecObs
from entityrl.ragged import RaggedArray


@dataclass
class ICMConfig(BonusConfig):
    """Intrinsic curiosity (an exploration bonus; off while ``coef`` is 0; ``d_model``: the
    width of the encoder's features and of the models' hidden layers)."""

    section: ClassVar[str] = "icm"
    beta: float = 0.2
    """Weight of the forward loss against the inverse loss (the paper's 0.2)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 <= self.beta <= 1:
            raise ValueError(f"icm.beta must be in [0, 1], got {self.beta}")


@dataclass(frozen=True)
class ActionPart:
    """One action's slice of a row's action summary."""

    name: str
    width: int
    categorical: bool  # choice shares (else the mean of continuous actions)


def action_parts(action_space: Mapping[str, ActionSpace]) -> list[ActionPart]:
    """The actions a row's summary holds, in the action space's order; ValueError when none
    can be summarized."""
    parts = []
    for name, space in action_space.items():
        if isinstance(space, ChoiceSpace):
            parts.append(ActionPart(name, len(space), True))
        elif isinstance(space, BoundedSpace):
            parts.append(ActionPart(name, len(space.dims), False))
    if not parts:
        raise ValueError(
            "icm needs at least one categorical or continuous action to learn the inverse "
            f"model from; the environment's actions are {dict(action_space)} (select-entity "
            "actions are not summarized): use rnd.coef instead"
        )
    return parts


def summarize(
    actions: Mapping[str, RaggedArray], parts: list[ActionPart], rows: int
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.bool_]]:
    """Per row, the action summary (rows, sum of widths), and per row and part whether the
    action had actors (rows, parts)."""
    summary = np.zeros((rows, sum(p.width for p in parts)), np.float32)
    acted = np.zeros((rows, len(parts)), np.bool_)
    start = 0
    for i, part in enumerate(parts):
        taken = actions[part.name]
        row = taken.row_index()
        block = summary[:, start : start + part.width]
        if part.categorical:
            np.add.at(block, (row, taken.data[:, 0].astype(np.int64)), 1.0)
        else:
            np.add.at(block, row, taken.data.astype(np.float32))
        block /= np.maximum(taken.lengths, 1)[:, None]
        acted[:, i] = taken.lengths > 0
        start += part.width
    return summary, acted


class ICMModel(RowInputs):
    """The input normalizers, the encoder and the inverse and forward models."""

    def __init__(self, space: ObsSpace, parts: list[ActionPart], d_model: int) -> None:
        super().__init__(space)
        self.parts = parts
        width = sum(p.width for p in parts)
        self.encoder = RowEncoder(space, d_model, hidden_layers=1)
        self.inverse = nn.Sequential(
            nn.Linear(2 * d_model, d_model), nn.ReLU(), nn.Linear(d_model, width)
        )
        self.forward_model = nn.Sequential(
            nn.Linear(d_model + width, d_model), nn.ReLU(), nn.Linear(d_model, d_model)
        )

    def losses(
        self,
        obs: VecObs,
        successors: VecObs,
        summary: torch.Tensor,
        acted: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Per row, the forward model's error (the bonus) and the inverse model's loss."""
        now = self.encoder(self.normalized(obs))
        then = self.encoder(self.normalized(successors))
        predicted = self.forward_model(torch.cat([now, summary], dim=1))
        forward_error = 0.5 * (predicted - then.detach()).pow(2).mean(dim=1)
        guessed = self.inverse(torch.cat([now, then], dim=1))
        inverse = now.new_zeros(now.shape[0])
        start = 0
        for i, part in enumerate(self.parts):
            block = slice(start, start + part.width)
            if part.categorical:
                log_shares = functional.log_softmax(guessed[:, block], dim=1)
                loss = -(summary[:, block] * log_shares).sum(dim=1)
            else:
                loss = (guessed[:, block] - summary[:, block]).pow(2).mean(dim=1)
            inverse = inverse + loss * acted[:, i]
            start += part.width
        return forward_error, inverse


class ICM(ExplorationBonus):
    """The curiosity bonus of one training process: intrinsic rewards for a rollout, and the
    models' training after each update."""

    model: ICMModel

    def __init__(
        self,
        space: ObsSpace,
        action_space: Mapping[str, ActionSpace],
        config: ICMConfig,
        optim: OptimConfig,
        num_envs: int,
        reducer: Reducer | None = None,
    ) -> None:
        self.config = config
        self.optim = optim
        self.reducer = reducer or Reducer()
        self.choices = {n: len(s) for n, s in action_space.items() if isinstance(s, ChoiceSpace)}
        model = ICMModel(space, action_parts(action_space), config.d_model)
        trained = nn.ModuleList([model.encoder, model.inverse, model.forward_model])
        optimizer = adam(
            trained, OptimConfig(lr=config.lr, eps=optim.eps, max_grad_norm=optim.max_grad_norm)
        )
        super().__init__(
            model, optimizer, BonusScale(config.coef, num_envs, config.gamma, self.reducer)
        )

    def _transitions(
        self, rollout: Rollout
    ) -> tuple[VecObs, torch.Tensor, torch.Tensor, npt.NDArray[np.bool_]]:
        """Each row's next observation, action summary, actors per part, and whether the row
        is a transition (its episode went on: the next row of its environment follows it)."""
        envs = rollout.next_obs.num_rows
        later = rollout.obs.take(np.arange(envs, rollout.num_rows))
        successors = VecObs.concat([later, rollout.next_obs], self.choices)
        summary, acted = summarize(rollout.actions, self.model.parts, rollout.num_rows)
        return (successors, torch.from_numpy(summary), torch.from_numpy(acted).float(),
                ~rollout.dones.reshape(-1))  # fmt: skip

    @torch.no_grad()
    def rollout_bonus(self, rollout: Rollout) -> npt.NDArray[np.float32]:
        """The bonus of each of a rollout's steps, (steps, envs): the forward model's error on
        the step's transition (none on steps that ended an episode)."""
        successors, summary, acted, transition = self._transitions(rollout)
        errors, _ = self.model.losses(rollout.obs, successors, summary, acted)
        shape = rollout.dones.shape
        return self.scale(errors.numpy().reshape(shape), transition.reshape(shape))

    def learn(self, rollout: Rollout, rng: np.random.Generator) -> dict[str, float]:
        """Train the encoder and both models on the rollout's transitions (``icm.epochs``
        passes of minibatches of ``optim.bs``), then take its observations into the input
        statistics; the metrics to log."""
        successors, summary, acted, transition = self._transitions(rollout)
        weights = torch.from_numpy(transition).float()
        bs = self.optim.bs // self.reducer.world_size
        beta = self.config.beta
        losses = []
        for _ in range(self.config.epochs):
            # Every row, the episodes' last steps weighted 0: every process of a data-parallel
            # run then takes the same number of optimizer steps.
            order = rng.permutation(rollout.num_rows)
            for start in range(0, len(order), bs):
                batch = order[start : start + bs]
                weight = weights[batch]
                (n_rows,) = self.reducer.sum([float(weight.sum())])
                self.optimizer.zero_grad()
                forward, inverse = self.model.losses(
                    rollout.obs.take(batch), successors.take(batch), summary[batch], acted[batch]
                )
                forward, inverse = (forward * weight).sum(), (inverse * weight).sum()
                loss = ((1 - beta) * inverse + beta * forward) / max(n_rows, 1.0)
                loss.backward()
                self.optimizer.step(self.optim.max_grad_norm, self.reducer)
                sums = self.reducer.sum([forward.item(), inverse.item()])
                losses.append(np.asarray(sums) / max(n_rows, 1.0))
        self.model.update_normalizers(rollout.obs, self.scale.combine)
        forward_loss, inverse_loss = np.mean(losses, axis=0)
        return {
            "loss/icm_forward": float(forward_loss),
            "loss/icm_inverse": float(inverse_loss),
            "loss/icm_intrinsic": self.scale.last_mean,
        }
