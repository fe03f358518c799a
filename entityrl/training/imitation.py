"""The behaviour-cloning loop: recordings in, a run directory like PPO's out.

Episodes of the recordings (``bc.demos``) are split into training and validation episodes.
Each epoch takes shuffled minibatches of ``optim.bs`` training steps, minimizes the negative
log-likelihood of the recorded actions (:mod:`entityrl.algo.bc`), measures the validation
loss and, with ``bc.eval_episodes``, the policy's return in the environment, and logs one line
to metrics.jsonl. Training stops after ``bc.epochs`` or once the validation loss has not
improved for ``bc.patience`` epochs; the checkpoint holds the best epoch's weights in PPO's
checkpoint format, so ``entityrl eval``, ``entityrl play`` and ``init_from`` use it as they
use a PPO run. Input normalization statistics come from the training episodes, once, before
the first epoch.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from entityrl.algo.bc import bc_step, bc_terms
from entityrl.algo.optimizer import adam
from entityrl.nn.device import resolve_device
from entityrl.nn.rogue_net import RogueNet
from entityrl.training import checkpoint as ckpt
from entityrl.training.agent import Agent, evaluate
from entityrl.training.config import ConfigError, TrainConfig, to_dict, to_yaml
from entityrl.training.demonstrations import load_episodes, split
from entityrl.training.run_log import RunLog
from entityrl.training.runner import (
    EnvSource,
    TrainResult,
    default_run_dir,
    make_env,
    torch_threads,
)


class BCTrainer:
    """Owns the pieces of a behaviour-cloning run: demonstrations, network, optimizer, log."""

    def __init__(
        self,
        config: TrainConfig,
        env: EnvSource | None = None,
        on_epoch: Callable[[dict[str, float]], None] | None = None,
    ) -> None:
        if config.world_size > 1:
            raise ConfigError("algo=bc trains in one process: set world_size=1")
        self.config = config
        self.on_epoch = on_epoch
        self.run_dir = Path(config.log.run_dir or default_run_dir(config))
        threads = torch_threads(config)
        if threads is not None:
            torch.set_num_threads(threads)
        self.device = resolve_device(config.device)
        torch.manual_seed(config.seed)
        self.rng = np.random.default_rng(config.seed)
        bc = config.bc
        # The environment gives the spaces the recordings must have and plays the evaluation
        # episodes.
        self.env = make_env(config, env, num_envs=bc.eval_envs)
        try:
            episodes = load_episodes(bc.demos, self.env, bc.max_episodes)
            self.train_data, self.val_data = split(episodes, self.env, bc.val_fraction, config.seed)
        except BaseException:
            self.env.close()
            raise
        self.net = RogueNet(
            self.env.obs_space, self.env.action_space, config.net, device=self.device
        )
        self.net.update_normalizers(self.train_data.obs)
        self.optimizer = adam(self.net, config.optim)
        self.step = 0  # training samples (steps of recorded episodes) seen
        self.epoch = 0
        self.log = RunLog(
            self.run_dir,
            tensorboard=config.log.tensorboard,
            wandb_project=config.log.wandb_project,
            config=to_dict(config),
        )
        ckpt.atomic_write(self.run_dir / "config.yaml", lambda f: f.write(to_yaml(config)), "w")

    # ------------------------------------------------------------------ one epoch
    def train_epoch(self) -> dict[str, float]:
        """One pass over the training episodes in shuffled minibatches of optim.bs steps."""
        optim = self.config.optim
        self.net.train()
        order = self.rng.permutation(self.train_data.num_rows)
        sums: dict[str, float] = {}
        counts: dict[str, int] = {}
        for start in range(0, order.shape[0], optim.bs):
            obs, actions = self.train_data.take(order[start : start + optim.bs])
            terms = bc_step(self.net, self.optimizer, obs, actions, optim.max_grad_norm)
            _accumulate(sums, counts, terms.per_action, terms.actors)
            self.step += obs.num_rows
        return _means("train", sums, counts)

    @torch.no_grad()
    def validation_loss(self) -> dict[str, float]:
        """Mean negative log-likelihood of the validation episodes' actions, per action."""
        self.net.eval()
        sums: dict[str, float] = {}
        counts: dict[str, int] = {}
        rows = np.arange(self.val_data.num_rows)
        for start in range(0, rows.shape[0], self.config.optim.bs):
            obs, actions = self.val_data.take(rows[start : start + self.config.optim.bs])
            terms = bc_terms(self.net.evaluate(obs, actions))
            _accumulate(sums, counts, terms.per_action, terms.actors)
        return _means("val", sums, counts)

    def episode_metrics(self) -> dict[str, float]:
        """The policy's mean return (and the environment's metrics) over bc.eval_episodes."""
        episodes = self.config.bc.eval_episodes
        if not episodes:
            return {}
        policy = Agent(copy.deepcopy(self.net), self.config, seed=self.config.seed + self.epoch)
        result = evaluate(policy, self.env, episodes)
        return {f"episode/{name}": float(np.mean(v)) for name, v in result.metrics.items()}

    # ------------------------------------------------------------------ the loop
    def run(self) -> TrainResult:
        bc = self.config.bc
        started = time.time()
        best_loss, best_state, since_best = float("inf"), None, 0
        metrics: dict[str, float] = {}
        try:
            while self.epoch < bc.epochs and since_best < bc.patience:
                epoch_started = time.perf_counter()
                metrics = self.train_epoch()
                metrics.update(self.validation_loss())
                self.epoch += 1
                if metrics["loss/val_nll"] < best_loss:
                    best_loss, since_best = metrics["loss/val_nll"], 0
                    best_state = copy.deepcopy(self.net.state_dict())
                else:
                    since_best += 1
                metrics.update(self.episode_metrics())
                metrics["epoch"] = float(self.epoch)
                metrics["loss/best_val_nll"] = best_loss
                metrics["perf/epoch_seconds"] = time.perf_counter() - epoch_started
                self.log.log(self.step, metrics)
                if self.on_epoch is not None:
                    self.on_epoch(metrics)
            if best_state is not None:
                self.net.load_state_dict(best_state)
            path = ckpt.save_checkpoint(self.run_dir, self.state(best_loss), None)
        finally:
            self.log.close()
            self.env.close()
        return TrainResult(
            self.run_dir,
            path,
            self.step,
            metrics.get("episode/episode_return"),
            time.time() - started,
            interrupted=False,
        )

    def state(self, best_loss: float) -> dict[str, Any]:
        """A checkpoint in the format of PPO runs (see :mod:`entityrl.training.checkpoint`)."""
        return {
            "config": to_dict(self.config),
            "model": self.net.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "step": self.step,
            "iteration": self.epoch,
            "rng": [],  # a behaviour-cloning run is not resumed: it restarts in minutes
            "spaces": ckpt.spaces_to_data(self.env.obs_space, self.env.action_space),
            "recent_returns": [],
            "best_val_nll": best_loss,
        }


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


def train_bc(config: TrainConfig, env: EnvSource | None = None) -> TrainResult:
    """Run behaviour cloning as ``config`` describes (``algo=bc``, ``bc.demos``)."""
    return BCTrainer(config, env).run()
