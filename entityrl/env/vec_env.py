"""Vectorized environments: many copies of an environment stepped as one batch."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType

import numpy as np
import numpy.typing as npt

from entityrl.env.batching import Batcher
from entityrl.env.environment import Environment
from entityrl.env.observation import Observation
from entityrl.env.spaces import ActionSpace, GlobalCategoricalActionSpace, ObsSpace
from entityrl.env.vec_obs import VecCategoricalMask, VecObs
from entityrl.ragged import RaggedArray

EnvFactory = Callable[[], Environment]
"""A callable that builds one environment (picklable, for process-based vectorization)."""


class VecEnv(ABC):
    """A batch of environments that reset together and then step together.

    Environments reset automatically when an episode ends: the row's ``done`` is True, its
    ``reward`` is the last reward of the ended episode, and its features are those of the new
    episode's first observation. Ended episodes report ``episode_return`` and
    ``episode_length`` (and the environment's own metrics) in :attr:`VecObs.metrics`.
    """

    obs_space: ObsSpace
    action_space: dict[str, ActionSpace]
    num_envs: int

    @abstractmethod
    def reset(self) -> VecObs:
        """Reset every environment; returns the first observations."""

    @abstractmethod
    def act(self, actions: Mapping[str, RaggedArray]) -> VecObs:
        """Step every environment. ``actions[name]`` has one int64 per actor of each row."""

    def close(self) -> None:
        """Release environments and any worker processes."""

    def render(self, index: int = 0) -> str:
        """A picture of environment ``index`` for people, if the environment draws one."""
        raise NotImplementedError(f"{type(self).__name__} does not render")

    def __enter__(self) -> VecEnv:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def choices(self) -> dict[str, int]:
        """Number of choices of each categorical action (used to merge masks)."""
        return {
            name: len(space)  # type: ignore[arg-type]
            for name, space in self.action_space.items()
            if hasattr(space, "choices")
        }


class EpisodeTracker:
    """Running return and length of every environment's current episode."""

    def __init__(self, num_envs: int) -> None:
        self.returns = np.zeros(num_envs, dtype=np.float64)
        self.lengths = np.zeros(num_envs, dtype=np.int64)

    def reset(self) -> None:
        self.returns[:] = 0
        self.lengths[:] = 0

    def step(
        self, reward: npt.NDArray[np.float32], done: npt.NDArray[np.bool_]
    ) -> dict[str, npt.NDArray[np.float64]]:
        """Account one step; returns the return and length of the episodes that ended."""
        self.returns += reward
        self.lengths += 1
        if not done.any():
            return {}
        ended = np.flatnonzero(done)
        metrics = {
            "episode_return": self.returns[ended].copy(),
            "episode_length": self.lengths[ended].astype(np.float64),
        }
        self.returns[ended] = 0
        self.lengths[ended] = 0
        return metrics


class SerialVecEnv(VecEnv):
    """``num_envs`` environments stepped one after the other in this process.

    With ``seed``, environment ``i`` is seeded with ``seed + seed_offset + i``, so a batch split
    over processes (see :class:`~entityrl.env.ProcessVecEnv`) plays exactly the same episodes.
    With ``validate``, every observation is checked against the declared spaces.
    """

    def __init__(
        self,
        make_env: EnvFactory,
        num_envs: int,
        seed: int | None = None,
        *,
        validate: bool = False,
        seed_offset: int = 0,
    ) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        envs = [make_env() for _ in range(num_envs)]
        if validate:
            from entityrl.env.validator import ValidatingEnvironment

            envs = [ValidatingEnvironment(env) for env in envs]
        if seed is not None:
            for i, env in enumerate(envs):
                env.seed(seed + seed_offset + i)
        self.envs: list[Environment] = envs
        self.num_envs = num_envs
        self.obs_space = envs[0].obs_space()
        self.action_space = dict(envs[0].action_space())
        self.batcher = Batcher(self.obs_space, self.action_space)
        self.episodes = EpisodeTracker(num_envs)
        self._observations: list[Observation] = []
        self._last: VecObs | None = None

    def reset(self) -> VecObs:
        self._observations = [env.reset() for env in self.envs]
        self.episodes.reset()
        self._last = self.batcher.batch(self._observations)
        return self._last

    def act(self, actions: Mapping[str, RaggedArray]) -> VecObs:
        if self._last is None:
            raise RuntimeError("call reset() before act()")
        check_actions(actions, self._last, self.action_space)
        per_env = self.batcher.unbatch(actions, self._observations)
        observations: list[Observation] = []
        rewards = np.empty(self.num_envs, dtype=np.float32)
        dones = np.zeros(self.num_envs, dtype=np.bool_)
        env_metrics: dict[str, list[float]] = {}
        for i, (env, env_actions) in enumerate(zip(self.envs, per_env, strict=True)):
            obs = env.act(env_actions)
            rewards[i] = obs.reward
            if obs.done:
                dones[i] = True
                for key, value in obs.metrics.items():
                    env_metrics.setdefault(key, []).append(float(value))
                obs = env.reset()
            observations.append(obs)
        self._observations = observations
        batch = self.batcher.batch(observations)
        batch.reward = rewards
        batch.done = dones
        batch.metrics = self.episodes.step(rewards, dones)
        for key, values in env_metrics.items():
            batch.metrics[key] = np.asarray(values, dtype=np.float64)
        self._last = batch
        return batch

    def render(self, index: int = 0) -> str:
        return self.envs[index].render()

    def close(self) -> None:
        for env in self.envs:
            env.close()


def check_actions(
    actions: Mapping[str, RaggedArray], last: VecObs, action_space: Mapping[str, ActionSpace]
) -> None:
    """Reject actions that do not fit the batch they answer: a missing action, a wrong number
    of actors in a row, a choice out of range or one the mask forbids."""
    for name, space in action_space.items():
        mask = last.action_masks[name]
        chosen = actions.get(name)
        if chosen is None:
            if mask.actors.items:
                raise ValueError(f"action {name!r}: no actions given but some rows have actors")
            continue
        if not isinstance(chosen, RaggedArray) or chosen.features != 1:
            raise ValueError(
                f"action {name!r}: expected a RaggedArray with one int64 per actor, got {chosen!r}"
            )
        if not np.array_equal(chosen.lengths, mask.actors.lengths):
            bad = (
                int(np.flatnonzero(chosen.lengths != mask.actors.lengths)[0])
                if (chosen.size0 == mask.actors.size0)
                else None
            )
            where = (
                f"row {bad} has {chosen.lengths[bad]} actions for {mask.actors.lengths[bad]} actors"
                if bad is not None
                else f"{chosen.size0} rows given for {mask.actors.size0} environments"
            )
            raise ValueError(f"action {name!r}: {where}")
        values = chosen.data[:, 0]
        if isinstance(mask, VecCategoricalMask):
            limit = np.full(values.shape[0], len(space), dtype=np.int64)  # type: ignore[arg-type]
        else:
            limit = np.repeat(mask.actees.lengths, mask.actors.lengths)
        out_of_range = (values < 0) | (values >= limit)
        if out_of_range.any():
            k = int(np.flatnonzero(out_of_range)[0])
            kind = "choice" if isinstance(mask, VecCategoricalMask) else "actee position"
            raise ValueError(
                f"action {name!r}: {kind} {values[k]} out of range [0, {limit[k]}) "
                f"for actor {k} of the flattened batch"
            )
        if mask.mask is not None and values.shape[0]:
            if isinstance(mask, VecCategoricalMask):
                legal = mask.mask.data[np.arange(values.shape[0]), values]
            else:
                legal = mask.mask.data[_select_mask_positions(mask.actors, mask.actees, values), 0]
            if not legal.all():
                k = int(np.flatnonzero(~legal)[0])
                raise ValueError(
                    f"action {name!r}: actor {k} of the flattened batch chose {values[k]}, "
                    "which its mask forbids"
                )
        if isinstance(space, GlobalCategoricalActionSpace) and chosen.lengths.max(initial=0) > 1:
            raise ValueError(f"action {name!r}: a global action takes one value per row")


def _select_mask_positions(
    actors: RaggedArray, actees: RaggedArray, chosen: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """Flat position in a select-entity mask of each actor's chosen actee."""
    sizes = actors.lengths * actees.lengths
    row_start = np.repeat(np.cumsum(sizes) - sizes, actors.lengths)
    width = np.repeat(actees.lengths, actors.lengths)
    return row_start + actors.position_in_row() * width + chosen


def split_rows(
    actions: Mapping[str, RaggedArray], bounds: Sequence[int]
) -> list[dict[str, RaggedArray]]:
    """Cut a batch of actions into consecutive row ranges ``bounds[k]:bounds[k+1]``."""
    return [
        {name: a[bounds[k] : bounds[k + 1]] for name, a in actions.items()}  # type: ignore[misc]
        for k in range(len(bounds) - 1)
    ]
