"""Behaviour cloning: recordings in, a policy that takes their actions out.

Episodes of the recordings (``bc.demos``) are split into training and validation episodes.
One iteration is one epoch: shuffled minibatches of ``optim.bs`` training steps, each a
gradient step on the negative log-likelihood of the recorded actions (:mod:`entityrl.algorithms.bc.loss`),
then the validation loss and, with ``bc.eval_episodes``, the policy's return in the
environment. The run ends after ``bc.epochs`` or once the validation loss has not improved for
``bc.patience`` epochs; the final checkpoint holds the best epoch's weights, so ``entityrl
eval``, ``entityrl play`` and ``init_from`` use it as they use a PPO run. Input normalization
statistics come from the training episodes, once, before the first epoch.
"""

from __future__ import annotations

import copy
import time
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from entityrl.algorithms.base import Algorithm, Context, Iteration
from entityrl.algorithms.bc.loss import BCConfig, bc_step, bc_terms
from entityrl.training.agent import Agent, evaluate
from entityrl.training.config import TrainConfig
from entityrl.training.demonstrations import load_episodes, split
from entityrl.training.threads import inference_threads


class BehaviourCloning(Algorithm):
    """Maximum likelihood of recorded actions, with a validation split and early stopping."""

    name = "bc"
    Settings = BCConfig
    one_process = True

    @classmethod
    def num_envs(cls, config: TrainConfig) -> int:
        # The environments give the spaces the recordings must have and play the evaluation
        # episodes.
        return config.bc.eval_envs

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        bc = ctx.config.bc
        episodes = load_episodes(bc.demos, ctx.env, bc.max_episodes)
        self.train_data, self.val_data = split(episodes, ctx.env, bc.val_fraction, ctx.config.seed)
        self.epoch = 0
        self.best_loss = float("inf")
        self.best_model: dict[str, torch.Tensor] | None = None
        self.since_best = 0

    def budget(self) -> int:
        return self.ctx.config.bc.epochs * self.train_data.num_rows

    def begin(self, resumed: bool, pretrained: bool) -> None:
        if not resumed and not pretrained:
            self.ctx.net.update_normalizers(self.train_data.obs)

    def train_epoch(self) -> dict[str, float]:
        """One pass over the training episodes in shuffled minibatches of optim.bs steps."""
        net, optim = self.ctx.net, self.ctx.config.optim
        net.train()
        order = self.ctx.rng.permutation(self.train_data.num_rows)
        sums: dict[str, float] = {}
        counts: dict[str, int] = {}
        for start in range(0, order.shape[0], optim.bs):
            obs, actions = self.train_data.take(order[start : start + optim.bs])
            terms = bc_step(net, self.ctx.optimizer, obs, actions, optim.max_grad_norm)
            _accumulate(sums, counts, terms.per_action, terms.actors)
        return _means("train", sums, counts)

    @torch.no_grad()
    def validation_loss(self) -> dict[str, float]:
        """Mean negative log-likelihood of the validation episodes' actions, per action."""
        net, bs = self.ctx.net, self.ctx.config.optim.bs
        net.eval()
        sums: dict[str, float] = {}
        counts: dict[str, int] = {}
        rows = np.arange(self.val_data.num_rows)
        for start in range(0, rows.shape[0], bs):
            obs, actions = self.val_data.take(rows[start : start + bs])
            terms = bc_terms(net.evaluate(obs, actions))
            _accumulate(sums, counts, terms.per_action, terms.actors)
        return _means("val", sums, counts)

    def play_episodes(self) -> dict[str, npt.NDArray[np.float64]]:
        """The returns (and the environment's metrics) of bc.eval_episodes the policy plays:
        the run's episodes, logged as ``episode/*``."""
        config = self.ctx.config
        if not config.bc.eval_episodes:
            return {}
        policy = Agent(copy.deepcopy(self.ctx.net), config, seed=config.seed + self.epoch)
        threads = inference_threads(config.torch_threads)
        result = evaluate(policy, self.ctx.env, config.bc.eval_episodes, threads=threads)
        return {name: np.asarray(v, dtype=np.float64) for name, v in result.metrics.items()}

    def iterate(self, step: int, lr: float) -> Iteration:
        started = time.perf_counter()
        metrics = self.train_epoch()
        metrics.update(self.validation_loss())
        self.epoch += 1
        if metrics["loss/val_nll"] < self.best_loss:
            self.best_loss, self.since_best = metrics["loss/val_nll"], 0
            self.best_model = copy.deepcopy(self.ctx.net.state_dict())
        else:
            self.since_best += 1
        metrics["epoch"] = float(self.epoch)
        metrics["loss/best_val_nll"] = self.best_loss
        metrics["perf/epoch_seconds"] = time.perf_counter() - started
        return Iteration(self.train_data.num_rows, metrics, self.play_episodes())

    def stop_reason(self) -> str | None:
        patience = self.ctx.config.bc.patience
        if self.since_best >= patience:
            return f"the validation loss did not improve for bc.patience={patience} epochs"
        return None

    def finish(self) -> None:
        if self.best_model is not None:
            self.ctx.net.load_state_dict(self.best_model)

    def state_dict(self) -> dict[str, Any]:
        return {
            "bc": {
                "epoch": self.epoch,
                "best_val_nll": self.best_loss,
                "since_best": self.since_best,
                "best_model": self.best_model,
            }
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        saved = state["bc"]
        self.epoch, self.since_best = int(saved["epoch"]), int(saved["since_best"])
        self.best_loss, self.best_model = float(saved["best_val_nll"]), saved["best_model"]


def _accumulate(
    sums: dict[str, float], counts: dict[str, int], nll: dict[str, float], actors: dict[str, int]
) -> None:
    for name, value in nll.items():
        sums[name] = sums.get(name, 0.0) + value
        counts[name] = counts.get(name, 0) + actors[name]


def _means(split: str, sums: dict[str, float], counts: dict[str, int]) -> dict[str, float]:
    """Mean NLL per actor: over all actions (``loss/<split>_nll``) and per action."""
    total = max(sum(counts.values()), 1)
    metrics = {f"loss/{split}_nll": sum(sums.values()) / total}
    for name, value in sums.items():
        metrics[f"loss/{split}_nll/{name}"] = value / max(counts[name], 1)
    return metrics
