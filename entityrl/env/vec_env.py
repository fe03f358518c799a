"""Vectorized environments: many copies of an environment stepped as one batch."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any

import numpy as np
import numpy.typing as npt

from entityrl.env import plain_state
from entityrl.env.actions import kind_of
from entityrl.env.batching import Batcher
from entityrl.env.environment import Environment, NativeStepping, simulation_name
from entityrl.env.observation import Observation
from entityrl.env.spaces import ActionSpace, ObsSpace
from entityrl.env.step_checks import BATCHING_ERRORS, FULLY_VALIDATED_STEPS, StepChecks
from entityrl.env.vec_obs import VecObs
from entityrl.ragged import RaggedArray

EnvFactory = Callable[[], Environment]
"""A callable that builds one environment (picklable, for process-based vectorization)."""


_BOOLS = (bool, np.bool_)


CUT_OFF_METRIC = "episode_truncated"
"""An episode metric the trainer adds (not the environments): per finished episode, 1 if a
time limit cut it off (truncated), 0 if the task ended it."""


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
        """Step every environment. ``actions[name]`` has one row of values per actor of each
        row (one int64 for categorical and select-entity actions, one float32 per component
        for continuous ones; see :mod:`entityrl.env.actions`)."""

    def close(self) -> None:
        """Release environments and any worker processes."""

    def get_state(self, allow_pickle: bool = False) -> Any:
        """The environments' complete state (to continue exactly here after a restart), as
        plain data (:mod:`entityrl.env.plain_state`). Raises ``NotImplementedError`` naming
        the value that is not plain data; with ``allow_pickle``, such values are pickled
        (signed with this user's key) instead."""
        raise NotImplementedError(f"{type(self).__name__} cannot save its state")

    def set_state(self, state: Any, allow_pickle: bool = False) -> VecObs:
        """Restore a state from :meth:`get_state` (pickled parts only with ``allow_pickle``,
        and only if this user signed them); returns the observation at that point."""
        raise NotImplementedError(f"{type(self).__name__} cannot restore a state")

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
    With ``validate``, every observation is checked against the declared spaces; without it,
    the cheap default checks of :mod:`entityrl.env.step_checks` run.
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
        action_space = envs[0].action_space()
        # Environments wrapping another API are stepped in it, skipping a translation of every
        # observation and action (see NativeStepping). Validation checks entityrl's own
        # observations: its wrappers are not NativeStepping.
        self._native = all(isinstance(env, NativeStepping) for env in envs)
        make_actions = envs[0].native_actions if self._native else None  # type: ignore[attr-defined]
        # Observations in another API's classes are that API's to check; validated
        # environments check themselves fully on every step. Built first: it validates the
        # spaces the batcher reads.
        self.checks = StepChecks(
            self.obs_space,
            action_space,
            simulation_name(envs[0]),
            first_env=seed_offset,
            full_steps=0 if validate or self._native else FULLY_VALIDATED_STEPS,
        )
        self.action_space = self.checks.action_space
        self.batcher = Batcher(self.obs_space, self.action_space, make_actions)
        self.episodes = EpisodeTracker(num_envs)
        self._observations: list[Observation] = []
        # Each environment's metrics so far this episode: the latest value of each is reported
        # when the episode ends.
        self._metrics: list[dict[str, float]] = []
        self._last: VecObs | None = None

    def _reset_env(self, env: Environment) -> Observation:
        return env.native_reset() if self._native else env.reset()  # type: ignore[attr-defined,no-any-return]

    def reset(self) -> VecObs:
        observations = [self._reset_env(env) for env in self.envs]
        self._check(observations)
        self._observations = observations
        self._metrics = [dict(obs.metrics) for obs in observations]
        self.episodes.reset()
        self._last = self._batch(observations)
        self.checks.batched(self._last, observations)
        return self._last

    def _check(self, observations: list[Observation], envs: Sequence[int] | None = None) -> None:
        if not self._native:
            self.checks.observations(observations, envs)

    def _batch(
        self,
        observations: list[Observation],
        rewards: npt.NDArray[np.float32] | None = None,
        dones: npt.NDArray[np.bool_] | None = None,
    ) -> VecObs:
        """Batch ``observations`` (one per environment); what the batcher cannot read is
        explained by validating them."""
        try:
            return self.batcher.batch(observations, rewards, dones)
        except BATCHING_ERRORS as err:
            if self._native:
                raise
            self.checks.explain(observations, None, f"cannot batch the observations ({err!r})")

    @property
    def observations(self) -> list[Observation]:
        """Each environment's latest observation, as it gave it (entity ids included)."""
        return self._observations

    @property
    def observation(self) -> VecObs:
        """The latest batch of observations (from reset, act or set_state)."""
        if self._last is None:
            raise RuntimeError("call reset() before reading the observation")
        return self._last

    def act(self, actions: Mapping[str, RaggedArray]) -> VecObs:
        if self._last is None:
            raise RuntimeError("call reset() before act()")
        check_actions(actions, self._last, self.action_space)
        try:
            per_env = self.batcher.unbatch(actions, self._observations)
        except BATCHING_ERRORS as err:  # ids of the observations that do not fit their entities
            if self._native:
                raise
            self.checks.explain(self._observations, None, f"cannot name the actors ({err!r})")
        native = self._native
        steps: list[Observation] = []  # what act() returned
        observations: list[Observation] = []  # what is batched: a new episode's after an end
        ended: list[int] = []
        # Each environment is reset right after the step that ends its episode, before the
        # next one steps: simulators that share a random generator depend on that order.
        for i, (env, env_actions) in enumerate(zip(self.envs, per_env, strict=True)):
            obs = env.native_act(env_actions) if native else env.act(env_actions)  # type: ignore[attr-defined]
            steps.append(obs)
            # A malformed observation (without done, or done an array) is the checks' to report,
            # below: only a bool ends an episode here.
            done = getattr(obs, "done", False)
            if type(done) in _BOOLS and done:
                ended.append(i)
                obs = self._reset_env(env)
            observations.append(obs)
        self._check(steps)
        if ended:
            self._check([observations[i] for i in ended], ended)
        try:
            rewards = np.array([obs.reward for obs in steps], dtype=np.float32)
            dones = np.array([obs.done for obs in steps], dtype=np.bool_)
        except BATCHING_ERRORS as err:
            self.checks.explain(steps, None, f"cannot read reward and done ({err!r})")
        for i, obs in enumerate(steps):
            if obs.metrics:
                self._metrics[i].update(obs.metrics)
        env_metrics: dict[str, list[float]] = {}
        for i in ended:
            for key, value in self._metrics[i].items():
                env_metrics.setdefault(key, []).append(float(value))
            self._metrics[i] = dict(observations[i].metrics)
        self._observations = observations
        batch = self._batch(observations, rewards, dones)
        batch.metrics = self.episodes.step(rewards, dones)
        for key, values in env_metrics.items():
            batch.metrics[key] = np.asarray(values, dtype=np.float64)
        # Episodes cut short (not ended in the task) keep their last observation, whose value
        # GAE bootstraps from; native observations (another API's) have no truncation flag.
        cut = [i for i in ended if getattr(steps[i], "truncated", False)]
        if cut:
            batch.truncated = np.zeros(self.num_envs, dtype=np.bool_)
            batch.truncated[cut] = True
            batch.final = self.batcher.batch([steps[i] for i in cut])
        # Another API's observations are not validated here: a failure names only the field.
        if self._native:
            self.checks.batched(batch, [])
        else:
            self.checks.batched(
                batch, [*observations, *steps], [*range(self.num_envs), *range(self.num_envs)]
            )
        self._last = batch
        return batch

    _STATE = ("envs", "_observations", "_metrics", "episodes", "_last")
    """The attributes that make up the state (the environments' own hold their RNGs)."""

    def get_state(self, allow_pickle: bool = False) -> Any:
        return plain_state.capture_attributes(self, self._STATE, allow_pickle=allow_pickle)

    def set_state(self, state: Any, allow_pickle: bool = False) -> VecObs:
        plain_state.restore_attributes(self, self._STATE, state, allow_pickle=allow_pickle)
        if self._last is None:
            raise ValueError("the saved state was taken before reset()")
        return self._last

    def render(self, index: int = 0) -> str:
        return self.envs[index].render()

    def close(self) -> None:
        for env in self.envs:
            env.close()


def check_actions(
    actions: Mapping[str, RaggedArray], last: VecObs, action_space: Mapping[str, ActionSpace]
) -> None:
    """Reject actions that do not fit the batch they answer: an unknown or missing action, a
    wrong number of actors in a row, and what each action's kind refuses (values of the wrong
    type or width, a choice out of range or one the mask forbids, non-finite numbers)."""
    if not isinstance(actions, Mapping):
        raise TypeError(
            f"expected a dict of action name -> RaggedArray, got {type(actions).__name__}"
        )
    for name in actions:
        if name not in action_space:
            raise ValueError(
                f"action {name!r}: unknown action; declared actions: "
                + (", ".join(repr(k) for k in action_space) or "none")
            )
    for name, space in action_space.items():
        mask = last.action_masks[name]
        chosen = actions.get(name)
        if chosen is None:
            if mask.actors.items:
                row = int(np.flatnonzero(mask.actors.lengths)[0])
                raise ValueError(
                    f"action {name!r}: expected one value per actor, got no actions although "
                    f"row {row} has {mask.actors.lengths[row]} actors"
                )
            continue
        kind = kind_of(space)
        if not isinstance(chosen, RaggedArray):
            raise ValueError(
                f"action {name!r}: expected {kind.expected(space)}, got {type(chosen).__name__}"
            )
        if chosen.size0 != mask.actors.size0:
            raise ValueError(
                f"action {name!r}: expected {mask.actors.size0} rows (one per environment), "
                f"got {chosen.size0}"
            )
        if not np.array_equal(chosen.lengths, mask.actors.lengths):
            row = int(np.flatnonzero(chosen.lengths != mask.actors.lengths)[0])
            raise ValueError(
                f"action {name!r}: row {row}: expected {mask.actors.lengths[row]} values "
                f"(one per actor), got {chosen.lengths[row]}"
            )
        kind.check_values(name, space, chosen, mask)


def split_rows(
    actions: Mapping[str, RaggedArray], bounds: Sequence[int]
) -> list[dict[str, RaggedArray]]:
    """Cut a batch of actions into consecutive row ranges ``bounds[k]:bounds[k+1]``."""
    return [
        {name: a[bounds[k] : bounds[k + 1]] for name, a in actions.items()}  # type: ignore[misc]
        for k in range(len(bounds) - 1)
    ]
