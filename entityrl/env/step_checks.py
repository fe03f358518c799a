"""Checks that every vectorized environment runs by default, cheap enough never to turn off.

Full validation (``validate=True``, :mod:`entityrl.env.validator`) checks every rule on every
step and costs as much as a light simulator's own step. Without it, a simulator's bug would
flow silently into training: NaN features or rewards, ``done='yes'``, unknown entity types or
actions that the batcher never reads, ids one short. So, always:

* the declared spaces are validated once, when the vectorized environment is built;
* the first :data:`FULLY_VALIDATED_STEPS` batches (the reset included) are fully validated,
  every environment's observation (as Gymnasium's passive checker does for the first step);
* after that, every batch gets a few vectorized checks: finite features, global features and
  rewards, feature widths, boolean ``done``, declared entity types and actions only, one id
  ids of actors matching the entities batched; all ids (one per entity, unique) in a rotating
  sample of environments (see :data:`UNIQUE_IDS_STRIDE`). A batch that fails (or that the batcher cannot even stack) is then fully
  validated, environment by environment, so the error is the validator's precise message
  naming the environment, the entity type or action, and the field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

import numpy as np
import numpy.typing as npt

from entityrl.env.observation import Observation
from entityrl.env.spaces import ActionSpace, ObsSpace
from entityrl.env.validator import (
    EnvValidationError,
    validate_observation,
    validate_spaces,
    validate_vec_obs,
)
from entityrl.env.vec_obs import VecObs

FULLY_VALIDATED_STEPS = 8
"""Batches validated in full before only the vectorized checks run: the reset and the first
steps, where a simulator's mistakes in building observations usually show."""

UNIQUE_IDS_STRIDE = 8
"""After the fully validated batches, each call checks the ids (one per entity, all unique) of
one environment in every this many, a different one each call: hashing every id of every
environment on every step would cost more than the rest of the checks together (10% of
MineSweeper's stepping). Ids that name actors are checked on every step where they are used:
actors whose ids do not match the entities batched are refused when the actions are mapped
back to them."""

# Exceptions the batcher raises on malformed observations (a failed reshape, an unknown id,
# a mask of the wrong size): they mean "validate to find out what is wrong".
BATCHING_ERRORS = (ValueError, TypeError, KeyError, IndexError, AttributeError)

_BOOL_TYPES = frozenset({bool, np.bool_})


class StepChecks:
    """The default checks of one vectorized environment (see the module's description).

    ``env_name`` names the environment in messages; ``first_env`` is the batch index of the
    first environment checked here (a worker process holds a slice of a larger batch).
    ``full_steps`` batches are fully validated before only the vectorized checks run.
    """

    def __init__(
        self,
        obs_space: ObsSpace,
        action_space: Mapping[str, ActionSpace],
        env_name: str,
        *,
        first_env: int = 0,
        full_steps: int = FULLY_VALIDATED_STEPS,
    ) -> None:
        validate_spaces(obs_space, action_space, env_name)
        self.obs_space = obs_space
        self.action_space = dict(action_space)
        self.env_name = env_name
        self.first_env = first_env
        self.full_steps_left = full_steps
        self._sample_start = 0
        self._types = frozenset(obs_space.entities)
        self._actions = frozenset(action_space)
        self._widths = {name: len(e.features) for name, e in obs_space.entities.items()}
        self._num_global = len(obs_space.global_features)

    # ------------------------------------------------------------------ per-environment steps
    def observations(
        self, observations: Sequence[Observation], envs: Sequence[int] | None = None
    ) -> None:
        """Check observations of environments ``envs`` (default: one per environment) from
        ``reset`` or ``act``, before they are batched: fully for the first batches, else the
        checks a batch cannot repeat (``done``'s type; the names of entity types, actions and
        ids, which batching ignores; one id per entity)."""
        if self.full_steps_left > 0:
            self.validate(observations, envs)
            return
        try:
            types_ok = _keys(o.features for o in observations) <= self._types
            ids = _keys(o.ids for o in observations)
            actions_ok = _keys(o.actions for o in observations) <= self._actions
            done_ok = {type(o.done) for o in observations} <= _BOOL_TYPES
            rewards_ok = all(map(_is_number_type, {type(o.reward) for o in observations}))
            ids_ok = ids <= self._types and all(
                _ids_fit(o) for o in self._rotating_sample(observations) if o.ids
            )
        except BATCHING_ERRORS:
            self.explain(observations, envs)
        if not (types_ok and actions_ok and done_ok and rewards_ok and ids_ok):
            self.explain(observations, envs)

    def _rotating_sample(self, observations: Sequence[Observation]) -> Sequence[Observation]:
        """Every :data:`UNIQUE_IDS_STRIDE`-th observation, starting one further each call."""
        self._sample_start = (self._sample_start + 1) % UNIQUE_IDS_STRIDE
        return observations[self._sample_start :: UNIQUE_IDS_STRIDE]

    def validate(
        self, observations: Sequence[Observation], envs: Sequence[int] | None = None
    ) -> None:
        """Validate every observation in full; the error names the environment."""
        indices = range(len(observations)) if envs is None else envs
        for i, obs in zip(indices, observations, strict=True):
            validate_observation(obs, self.obs_space, self.action_space, self._name(i))

    def explain(
        self,
        observations: Sequence[Observation],
        envs: Sequence[int] | None = None,
        cause: str = "",
    ) -> NoReturn:
        """Raise the validator's message for the first environment whose observation breaks
        a rule; ``cause`` (what a vectorized check found) if none does."""
        self.validate(observations, envs)
        raise EnvValidationError(
            f"{self.env_name}: VecObs.{cause or 'a check failed but no observation breaks a rule'}"
        )

    def batched(
        self,
        batch: VecObs,
        observations: Sequence[Observation],
        envs: Sequence[int] | None = None,
    ) -> None:
        """The vectorized checks of ``batch``; ``observations`` of environments ``envs`` are
        what it was built from (validated to explain a failure)."""
        if self.full_steps_left > 0:
            self.full_steps_left -= 1
            return
        problem = self.batch_problem(batch)
        if problem:
            self.explain(observations, envs, problem)

    # ------------------------------------------------------------------ whole batches
    def batch_problem(self, batch: VecObs) -> str:
        """What is wrong with ``batch`` by the vectorized checks, or '' if nothing."""
        if batch.features.keys() != self._types:
            return (
                f"features: expected the entity types {sorted(self._types)}, "
                f"got {sorted(batch.features)}"
            )
        for name, features in batch.features.items():
            data = features.data
            if data.ndim != 2 or data.shape[1] != self._widths.get(name, -1):
                return (
                    f"features[{name!r}]: expected {self._widths.get(name)} features per "
                    f"entity, got shape {data.shape}"
                )
            if not _all_finite(data):
                return f"features[{name!r}]: {_first_non_finite(features.data, features.offsets)}"
        if batch.global_features.shape[1:] != (self._num_global,):
            return (
                f"global_features: expected {self._num_global} per row, "
                f"got shape {batch.global_features.shape}"
            )
        if not _all_finite(batch.global_features):
            row = int(np.flatnonzero(~np.isfinite(batch.global_features).all(axis=1))[0])
            return f"global_features: row {row}: expected finite numbers"
        if batch.done.dtype != np.bool_:
            return f"done: expected booleans, got dtype {batch.done.dtype}"
        if not _all_finite(batch.reward):
            row = int(np.flatnonzero(~np.isfinite(batch.reward))[0])
            return f"reward: row {row}: expected a finite number, got {batch.reward[row]}"
        for key, values in batch.metrics.items():
            if not np.isfinite(values).all():
                return f"metrics[{key!r}]: expected finite numbers, got {values.tolist()}"
        return ""

    def checked_batch(self, batch: VecObs, rows: int) -> None:
        """Checks for a batch built directly by a natively batched simulator: in full for
        the first batches, then vectorized; the precise error comes from the full check."""
        if self.full_steps_left > 0:
            self.full_steps_left -= 1
            validate_vec_obs(batch, self.obs_space, self.action_space, self.env_name, rows=rows)
            return
        try:
            problem = self.batch_problem(batch)
            if not problem and batch.reward.shape != (rows,):
                problem = f"reward: expected shape ({rows},), got {batch.reward.shape}"
        except BATCHING_ERRORS as err:  # not even arrays where arrays belong
            problem = f"unreadable ({err!r})"
        if problem:
            validate_vec_obs(batch, self.obs_space, self.action_space, self.env_name, rows=rows)
            raise EnvValidationError(f"{self.env_name}: VecObs.{problem}")

    def _name(self, i: int) -> str:
        return f"{self.env_name} (environment {self.first_env + i})"


def _keys(dicts: Any) -> set[Any]:
    """The union of the keys of ``dicts`` (one C-level pass per dict)."""
    keys: set[Any] = set()
    keys.update(*dicts)
    return keys


def _is_number_type(kind: type) -> bool:
    return issubclass(kind, (int, float, np.integer, np.floating)) and kind not in _BOOL_TYPES


def _ids_fit(obs: Observation) -> bool:
    """Whether ``obs`` gives one id per entity of each type it gives ids for, all unique."""
    total = 0
    for name, ids in obs.ids.items():
        rows = obs.features.get(name)
        if len(ids) != (0 if rows is None else len(rows)):
            return False
        total += len(ids)
    return len(set().union(*obs.ids.values())) == total


def _all_finite(values: npt.NDArray[np.floating[Any]]) -> bool:
    """Whether every value is finite. A sum is one pass without a temporary array, and NaN and
    infinity carry through it; only when it is not finite (also when finite values overflow)
    are the values looked at one by one."""
    return bool(np.isfinite(values.sum())) or bool(np.isfinite(values).all())


def _first_non_finite(data: npt.NDArray[np.float32], offsets: npt.NDArray[np.int64]) -> str:
    item, column = (int(k) for k in np.argwhere(~np.isfinite(data))[0])
    row = int(np.searchsorted(offsets, item, side="right")) - 1
    return (
        f"row {row}, entity {item - int(offsets[row])}, feature {column}: expected a finite "
        f"number, got {data[item, column]}"
    )
