"""Base class for natively batched simulators: all copies stepped at once in numpy.

A :class:`BatchedEnvironment` keeps the state of every copy in arrays and builds the
:class:`VecObs` directly, with no per-copy Python objects. It is the fast path for simulators
written against entityrl: the per-environment loop of :class:`SerialVecEnv` disappears.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from entityrl.env import plain_state
from entityrl.env.actions import ActionKind, kind_of
from entityrl.env.step_checks import StepChecks
from entityrl.env.validator import validate_vec_obs
from entityrl.env.vec_env import EpisodeTracker, VecEnv, check_actions
from entityrl.env.vec_obs import VecObs
from entityrl.ragged import RaggedArray


class BatchedEnvironment(VecEnv):
    """``num_envs`` copies of a simulation held in numpy arrays.

    Subclasses set :attr:`obs_space` and :attr:`action_space` and implement
    :meth:`reset_envs` (start new episodes in some copies), :meth:`step` (advance every copy,
    returning reward and done) and :meth:`observe` (the current state as a VecObs; reward,
    done and metrics are filled in here), and may implement :meth:`episode_metrics`. Copies
    whose episode ended are reset automatically.

    With ``validate`` (also settable as the attribute :attr:`validate` before the first
    ``reset``, which is how ``make_vec(..., validate=True)`` turns it on for any subclass), the
    declared spaces and every batch from ``reset`` and ``act`` are checked
    (:func:`~entityrl.env.validator.validate_vec_obs`). Without it, the default checks of
    :mod:`entityrl.env.step_checks` run: the spaces and the first batches in full, then a
    few vectorized checks of every batch.
    """

    def __init__(self, num_envs: int, seed: int | None = None, *, validate: bool = False) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        self.num_envs = num_envs
        self.rng = np.random.default_rng(seed)
        self.episodes = EpisodeTracker(num_envs)
        self.validate = validate
        self._last: VecObs | None = None
        self._checks: StepChecks | None = None
        self._kinds: dict[str, ActionKind] | None = None  # once the spaces are declared

    @abstractmethod
    def reset_envs(self, envs: npt.NDArray[np.int64]) -> None:
        """Start a new episode in each of the copies ``envs``."""

    @abstractmethod
    def step(
        self, actions: Mapping[str, RaggedArray]
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.bool_]]:
        """Advance every copy by one step; return (reward, done) per copy."""

    @abstractmethod
    def observe(self) -> VecObs:
        """The current state of every copy (reward/done/metrics need not be set)."""

    def episode_metrics(self, ended: npt.NDArray[np.int64]) -> dict[str, npt.NDArray[np.float64]]:
        """The environment's own metrics of the episodes that just ended in copies ``ended``
        (one value per copy, in that order), read before those copies are reset."""
        return {}

    def truncated(self, ended: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_] | None:
        """Of the copies ``ended`` whose episodes just ended, which were cut off (a time limit)
        rather than ended by the task (one flag per copy, in that order; None: none were).
        Their final observations are then kept for bootstrapping."""
        return None

    def reseed(self, seed: int) -> None:
        """Restart :attr:`rng` from ``seed``, in place: the simulation's parts that hold it
        draw from the restarted sequence (the next reset is then that of a copy built with
        ``seed``, for simulations drawing from :attr:`rng` alone)."""
        self.rng.bit_generator.state = np.random.default_rng(seed).bit_generator.state

    def reset(self) -> VecObs:
        self.reset_envs(np.arange(self.num_envs, dtype=np.int64))
        self.episodes.reset()
        obs = self.observe()
        obs.reward = np.zeros(self.num_envs, dtype=np.float32)
        obs.done = np.zeros(self.num_envs, dtype=np.bool_)
        # Built at the first reset: subclasses declare their spaces after calling __init__.
        self._checks = StepChecks(self.obs_space, self.action_space, type(self).__name__)
        return self._checked(obs)

    def act(self, actions: Mapping[str, RaggedArray]) -> VecObs:
        if self._last is None:
            raise RuntimeError("call reset() before act()")
        check_actions(actions, self._last, self.action_space)
        reward, done = self.step(self._to_env(actions))
        ended = np.flatnonzero(done)
        env_metrics = self.episode_metrics(ended) if ended.size else {}
        cut_off = self.truncated(ended) if ended.size else None
        final = None
        if cut_off is not None and cut_off.any():
            final = self.observe().take(ended[cut_off])
        if ended.size:
            self.reset_envs(ended)
        obs = self.observe()
        if final is not None:
            obs.truncated = np.zeros(self.num_envs, dtype=np.bool_)
            obs.truncated[ended[cut_off]] = True  # type: ignore[index]
            obs.final = final
        obs.reward = reward.astype(np.float32, copy=False)
        obs.done = done
        obs.metrics = self.episodes.step(obs.reward, done)
        obs.metrics.update(env_metrics)
        return self._checked(obs)

    def _to_env(self, actions: Mapping[str, RaggedArray]) -> Mapping[str, RaggedArray]:
        """The actions as the simulation receives them (continuous values clipped to their
        bounds, see :mod:`entityrl.env.actions`)."""
        if self._kinds is None:
            self._kinds = {name: kind_of(space) for name, space in self.action_space.items()}
        return {
            name: self._kinds[name].to_env(self.action_space[name], values)
            for name, values in actions.items()
        }

    def _checked(self, obs: VecObs) -> VecObs:
        if self.validate:
            name = type(self).__name__
            validate_vec_obs(obs, self.obs_space, self.action_space, name, rows=self.num_envs)
        elif self._checks is not None:
            self._checks.checked_batch(obs, self.num_envs)
        self._last = obs
        return obs

    def _state_names(self) -> list[str]:
        # All state lives in this object's arrays and random generator; validation and the
        # default checks watch the simulation and are not part of its state.
        return [name for name in vars(self) if name not in ("validate", "_checks")]

    def get_state(self, allow_pickle: bool = False) -> Any:
        return plain_state.capture_attributes(self, self._state_names(), allow_pickle=allow_pickle)

    def set_state(self, state: Any, allow_pickle: bool = False) -> VecObs:
        plain_state.restore_attributes(self, self._state_names(), state, allow_pickle=allow_pickle)
        if self._last is None:
            raise ValueError("the saved state was taken before reset()")
        return self._last
