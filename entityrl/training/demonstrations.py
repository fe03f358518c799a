"""Recorded episodes as training data: the split behaviour cloning trains and validates on,
and behaviour cloning alongside PPO (``bc.strength``, after ML-Agents' behavioral_cloning)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from entityrl.algorithms.bc.loss import BCConfig, bc_step
from entityrl.algorithms.common.optimizer import FlatOptimizer
from entityrl.env.vec_env import VecEnv
from entityrl.env.vec_obs import VecObs
from entityrl.nn.rogue_net import RogueNet
from entityrl.ragged import RaggedArray
from entityrl.training.config import ConfigError

if TYPE_CHECKING:
    from entityrl.recording import Episode


@dataclass
class Demonstrations:
    """Steps of recorded episodes, one row per step, and the actions taken in them."""

    obs: VecObs
    actions: dict[str, RaggedArray]
    episodes: int

    @property
    def num_rows(self) -> int:
        return self.obs.num_rows

    def take(self, rows: np.ndarray) -> tuple[VecObs, dict[str, RaggedArray]]:
        return self.obs.take(rows), {name: a.take(rows) for name, a in self.actions.items()}


def load_episodes(paths: list[str], env: VecEnv, max_episodes: int | None) -> list[Episode]:
    """The episodes of ``paths`` (checked against ``env``'s spaces), at most the first
    ``max_episodes``."""
    from entityrl.recording import read_recordings

    _, episodes = read_recordings(paths, env.obs_space, env.action_space)
    return episodes[:max_episodes]


def join(episodes: list[Episode], env: VecEnv) -> Demonstrations:
    """The steps of ``episodes`` as one batch."""
    obs = VecObs.concat([e.obs for e in episodes], env.choices)
    actions = {
        name: RaggedArray.concat([e.actions[name] for e in episodes]) for name in env.action_space
    }
    return Demonstrations(obs, actions, len(episodes))


def split(
    episodes: list[Episode], env: VecEnv, val_fraction: float, seed: int
) -> tuple[Demonstrations, Demonstrations]:
    """Training and validation episodes: a random ``val_fraction`` of them (at least one) is
    held out."""
    from entityrl.recording import RecordingError

    if len(episodes) < 2:
        raise RecordingError(
            f"behaviour cloning needs at least 2 complete episodes (one to validate on); "
            f"the recordings hold {len(episodes)}"
        )
    order = np.random.default_rng(seed).permutation(len(episodes))
    held_out = max(1, round(val_fraction * len(episodes)))
    chosen = [sorted(order[held_out:].tolist()), sorted(order[:held_out].tolist())]
    train, val = ([episodes[i] for i in indices] for indices in chosen)
    return join(train, env), join(val, env)


def demonstrations_for(purpose: str, bc: BCConfig, env: VecEnv) -> Demonstrations:
    """All episodes of ``bc.demos`` (at most ``bc.max_episodes``) as one batch, for
    ``purpose`` (e.g. "algo=gail"); a recording that cannot serve is reported like any
    other bad setting of the run (ConfigError naming bc.demos and what is wrong)."""
    from entityrl.recording import RecordingError

    try:
        episodes = load_episodes(bc.demos, env, bc.max_episodes)
    except RecordingError as err:
        raise ConfigError(f"bc.demos (for {purpose}): {err}") from None
    if not episodes:
        raise ConfigError(f"bc.demos (for {purpose}) holds no complete episode: {bc.demos}")
    return join(episodes, env)


class DemonstrationLoss:
    """Behaviour cloning alongside PPO: after each PPO update, ``bc.batches`` minibatch steps
    on all episodes of ``bc.demos``, with the learning rate times ``bc.strength``, the strength
    falling linearly to 0 over ``bc.anneal_steps`` environment steps (if set)."""

    def __init__(self, bc: BCConfig, env: VecEnv, seed: int) -> None:
        self.bc = bc
        self.data = demonstrations_for(f"bc.strength={bc.strength}", bc, env)
        self.rng = np.random.default_rng(seed)

    def strength(self, step: int) -> float:
        if not self.bc.anneal_steps:
            return self.bc.strength
        return self.bc.strength * max(0.0, 1.0 - step / self.bc.anneal_steps)

    def update(
        self,
        net: RogueNet,
        optimizer: FlatOptimizer,
        step: int,
        lr: float,
        bs: int,
        max_grad_norm: float,
    ) -> dict[str, float]:
        """The BC steps of one iteration; their mean NLL and the strength, for the log."""
        strength = self.strength(step)
        if strength <= 0:
            return {"schedule/bc_strength": 0.0}
        for group in optimizer.param_groups:
            group["lr"] = lr * strength
        nll, actors = 0.0, 0
        for _ in range(self.bc.batches):
            rows = self.rng.choice(self.data.num_rows, size=min(bs, self.data.num_rows))
            terms = bc_step(net, optimizer, *self.data.take(rows), max_grad_norm)
            nll += sum(terms.per_action.values())
            actors += sum(terms.actors.values())
        for group in optimizer.param_groups:
            group["lr"] = lr
        return {"schedule/bc_strength": strength, "loss/bc_nll": nll / max(actors, 1)}
