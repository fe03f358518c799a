"""What every training algorithm gives the loop, and what the loop gives it.

The loop (:class:`~entityrl.training.runner.Trainer`) owns what all algorithms share: the
environments, the network and its optimizer, the learning-rate schedule, seeds, logging,
checkpoints, periodic evaluation, callbacks, resume and Ctrl-C. An :class:`Algorithm` owns the
rest: where its data comes from (rollouts of the environments, recorded demonstrations) and the
loss it learns from them. One :meth:`Algorithm.iterate` call is one iteration of the loop.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, TypeVar

import numpy as np
import numpy.typing as npt
import torch

from entityrl.algorithms.common.optimizer import FlatOptimizer
from entityrl.algorithms.common.reduce import Reducer
from entityrl.env.vec_env import VecEnv
from entityrl.env.vec_obs import VecObs
from entityrl.nn.input_norm import Combine
from entityrl.nn.rogue_net import RogueNet
from entityrl.training.config import ConfigError, TrainConfig

T = TypeVar("T", bound="Stateful")


class Stateful(Protocol):
    """What a checkpoint can keep: a network, an optimizer, a replay buffer, ..."""

    def state_dict(self) -> Any: ...

    def load_state_dict(self, state: Any, /) -> Any: ...


@dataclass
class Context:
    """The pieces of a run an algorithm works with (built by the loop)."""

    config: TrainConfig
    env: VecEnv
    """This process's environments (see :meth:`Algorithm.num_envs`)."""
    net: RogueNet
    optimizer: FlatOptimizer
    rng: np.random.Generator
    """Minibatch order and other numpy randomness of this process."""
    generator: torch.Generator
    """Action sampling of this process (on the network's device)."""
    reducer: Reducer
    """Combines what the processes of a data-parallel run compute."""
    make_env: Callable[[int, int], VecEnv] | None = None
    """More environments of the run's game, stepping in this process, apart from the
    training's: ``make_env(num_envs, seed_offset)`` (seeded ``config.seed + seed_offset + i``).
    None where the loop gives none."""

    @property
    def combine(self) -> Combine | None:
        """Sums a statistic over the processes (None in a single-process run)."""
        return self.reducer.sum if self.reducer.world_size > 1 else None


@dataclass
class Iteration:
    """What one iteration did."""

    samples: int
    """Samples it consumed in this process (environment steps, or recorded steps)."""
    metrics: dict[str, float]
    """For the log: ``loss/*``, ``schedule/*``, ``perf/*``, ... (``perf/sps`` is added by the
    loop)."""
    episodes: dict[str, npt.NDArray[np.float64]] = field(default_factory=dict)
    """Values of the training episodes that ended (``episode_return``, ...), this process's."""


class Algorithm(ABC):
    """One way to train the network.

    Subclasses set ``name``: the config's ``algo`` for a registered algorithm, and the name of
    the config section holding its ``Settings`` (a dataclass whose fields, with defaults and
    docstrings, become ``<name>.<field>`` keys with ``--help`` text, type checks and
    did-you-mean errors); :attr:`settings` is that section of the run's config.
    """

    name: ClassVar[str]
    Settings: ClassVar[type | None] = None
    """This algorithm's own settings (a dataclass), or None."""
    one_process: ClassVar[bool] = False
    """Trains in one process only (refuses world_size > 1)."""
    learns_from_episodes: ClassVar[bool] = False
    """Learns from the environment's episodes and rewards (the loop then warns when the run
    looks stuck: see entityrl.training.stuck)."""
    defaults: ClassVar[Mapping[str, Any]] = {}
    """The values of the shared sections (``rollout``, ``optim``, ``ppo``, ...) this algorithm
    starts from, by dotted key (``{"optim.lr": 0.0005}``): they replace the dataclasses'
    defaults and lie under every config file and override, as Stable-Baselines3's algorithms
    each have their own rollout length and learning rate."""

    @classmethod
    def num_envs(cls, config: TrainConfig) -> int:
        """Environments the loop builds for the whole run (all processes together)."""
        return config.rollout.num_envs

    @classmethod
    def check(cls, config: TrainConfig) -> None:
        """Refuse settings this algorithm cannot run with (ConfigError naming the key)."""
        if cls.one_process and config.world_size > 1:
            raise ConfigError(f"algo={cls.name} trains in one process: set world_size=1")

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._owned: dict[str, Stateful] = {}

    def own(self, name: str, part: T) -> T:
        """Keep ``part`` (a network, an optimizer, anything with ``state_dict`` and
        ``load_state_dict``) in every checkpoint under ``name``, restored on resume; returns
        it. The loop already keeps ``ctx.net`` and ``ctx.optimizer``."""
        if name in self._owned:
            raise ValueError(f"{type(self).__name__} already owns a part named {name!r}")
        self._owned[name] = part
        return part

    def replicated(self) -> list[torch.nn.Module]:
        """The networks every process of a data-parallel run holds an identical copy of (the
        loop checks them after every iteration); add yours, as GAIL adds its discriminator."""
        return [self.ctx.net]

    @property
    def settings(self) -> Any:
        """This run's values of :attr:`Settings` (the config section ``name``)."""
        return getattr(self.ctx.config, self.name)

    def discount(self) -> float | None:
        """The gamma future rewards are discounted by (None: none, or not one gamma); the
        loop's stuck-training check compares its horizon with the episodes'."""
        return None

    def budget(self) -> int:
        """Samples (all processes together) after which the run ends."""
        return self.ctx.config.total_timesteps

    def begin(self, resumed: bool, pretrained: bool) -> None:
        """Before the first iteration: ``resumed`` from a checkpoint of this run, or
        ``pretrained`` (init_from) weights and input normalization loaded; neither means a
        fresh network, whose input normalization the algorithm initializes from its data."""

    @abstractmethod
    def iterate(self, step: int, lr: float) -> Iteration:
        """One iteration at ``step`` samples with learning rate ``lr`` (set on the optimizer
        by the loop, which sets it back after the call)."""

    def stop_reason(self) -> str | None:
        """Why the run should end now, before its budget (e.g. early stopping)."""
        return None

    def finish(self) -> None:
        """After the last iteration, before the final checkpoint."""

    def restore_environments(self, obs: VecObs) -> None:
        """The environments were set back to a checkpoint's state; ``obs`` is where they are."""

    def state_dict(self) -> dict[str, Any]:
        """This process's state beyond the network and optimizer, stored in the checkpoint
        under top-level keys of the algorithm's choosing (gathered over processes); the parts
        it :meth:`own`-s under ``owned``. Subclasses add their keys to ``super()``'s."""
        if not self._owned:
            return {}
        return {"owned": {name: part.state_dict() for name, part in self._owned.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (this process's part of each key)."""
        for name, part in self._owned.items():
            part.load_state_dict(state["owned"][name])
