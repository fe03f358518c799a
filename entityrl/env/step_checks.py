"""Checks that every vectorized environment runs by default, cheap enough never to turn off.

Full validation (``validate=True``, :mod:`entityrl.env.validator`) checks every rule on every
step and costs as much as a light simulator's own step. Without it, a simulator's bug would
flow silently into training: NaN features or rewards, ``done='yes'``, unknown entity types or
actions that the batcher never reads, ids one short, complex or string features that batching
casts to float32, a mask of 0.5 that it casts to True. So, always:

* the declared spaces are validated once, when the vectorized environment is built;
* the first :data:`FULLY_VALIDATED_STEPS` batches (the reset included) are fully validated,
  every environment's observation (as Gymnasium's passive checker does for the first step);
* after that, every batch gets a few vectorized checks: finite features, global features and
  rewards, feature widths, the batch's dtypes, boolean ``done`` and numeric rewards, declared
  entity types and actions only, a legal choice (or entity to select) for every actor; ids of
  actors matching the entities batched. What batching converts or ignores without a word is
  checked in random samples of environments (see :data:`SAMPLE_STRIDE` and
  :data:`ARRAYS_STRIDE`): one id per entity, all unique; as many global features as declared;
  numeric features of rank 2 and numeric global features, boolean masks and visibility, where
  the observation gives arrays. A batch that fails (or that the batcher
  cannot even stack) is then fully validated, environment by environment, so the error is the
  validator's precise message naming the environment, the entity type or action, and the
  field.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn

import numpy as np
import numpy.typing as npt

from entityrl.env.actions import kind_of
from entityrl.env.actions.categorical import VecCategoricalMask
from entityrl.env.actions.select_entity import VecSelectEntityMask
from entityrl.env.observation import Observation
from entityrl.env.rows import locate
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

SAMPLE_STRIDE = 8
"""After the fully validated batches, each call checks the ids (one per entity, all unique) of
one environment in every this many (from a random start): hashing every id of every
environment on every step would cost more than the rest of the checks together (10% of
MineSweeper's stepping). Ids that name actors are checked on every step where they are used:
actors whose ids do not match the entities batched are refused when the actions are mapped
back to them."""

ARRAYS_STRIDE = 32
"""After the fully validated batches, each call looks into one environment in every this many
(from a random start; one at least) for what batching would cast or ignore without a word:
the dtypes (and the features' rank) of the arrays an observation gives, and the number of its
global features. Reading every array of every environment on every step would cost twice as
much as the rest of the checks together (CherryPick). A simulator gets these wrong on every
step, or in every environment, more often than not; then the first call finds it."""

# Exceptions the batcher raises on malformed observations (a failed reshape, an unknown id,
# a mask of the wrong size): they mean "validate to find out what is wrong".
BATCHING_ERRORS = (ValueError, TypeError, KeyError, IndexError, AttributeError)

_BOOL_TYPES = frozenset({bool, np.bool_})
# The dtype kinds the validator accepts as numbers (booleans, integers, floats).
_NUMERIC_KINDS = frozenset("biuf")


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
        # Seeded: a run's checks, like its environments, repeat exactly.
        self._sample_rng = random.Random(0)
        self._types = frozenset(obs_space.entities)
        self._actions = frozenset(action_space)
        self._widths = {name: len(e.features) for name, e in obs_space.entities.items()}
        self._num_global = len(obs_space.global_features)
        # Per action whose batched mask can leave an actor nothing to pick, what finds that.
        self._stranded = {
            name: _STRANDED[kind_of(space).vec_mask]
            for name, space in self.action_space.items()
            if kind_of(space).vec_mask in _STRANDED
        }

    # ------------------------------------------------------------------ per-environment steps
    def observations(
        self, observations: Sequence[Observation], envs: Sequence[int] | None = None
    ) -> None:
        """Check observations of environments ``envs`` (default: one per environment) from
        ``reset`` or ``act``, before they are batched: fully for the first batches, else the
        checks a batch cannot repeat (the types of ``done`` and ``reward``; the names of entity
        types, actions and ids, which batching ignores; in samples, one id per entity, the
        number of global features and the dtypes of arrays, which batching casts)."""
        if self.full_steps_left > 0:
            self.validate(observations, envs)
            return
        try:
            types_ok = _keys(o.features for o in observations) <= self._types
            ids_ok = _keys(o.ids for o in observations) <= self._types and all(
                _ids_fit(o) for o in self._sample(observations, SAMPLE_STRIDE) if o.ids
            )
            actions_ok = _keys(o.actions for o in observations) <= self._actions
            done_ok = {type(o.done) for o in observations} <= _BOOL_TYPES
            rewards_ok = all(map(_is_number_type, {type(o.reward) for o in observations}))
            arrays_ok = all(map(self._arrays_fit, self._sample(observations, ARRAYS_STRIDE)))
        except BATCHING_ERRORS:
            self.explain(observations, envs)
        if not (types_ok and actions_ok and done_ok and rewards_ok and ids_ok and arrays_ok):
            self.explain(observations, envs)

    def _sample(self, observations: Sequence[Observation], stride: int) -> Sequence[Observation]:
        """Every ``stride``-th observation from a random start (among the first ``stride``,
        or all of them if fewer). A start that moved on by one each call would fall in step
        with a vectorized environment whose steps make a multiple of the stride of calls
        (resets included) and never look at some environments."""
        start = self._sample_rng.randrange(max(1, min(stride, len(observations))))
        return observations[start::stride]

    def _arrays_fit(self, obs: Observation) -> bool:
        """Whether the arrays ``obs`` gives are what the validator accepts where batching would
        cast them without a word: numbers (no complex numbers, strings or objects) in features
        of rank 2 (or no features: an empty 1-D array) and in global features, as many of
        these as declared (the batcher ignores any given where none are); booleans in masks
        and visibility that are not empty. Lists are left alone: reading their every value is
        the validator's work. (Plain loops: this runs for every observation of the sample.)"""
        for rows in obs.features.values():
            if (
                type(rows) is np.ndarray
                and (rows.ndim != 2 or rows.dtype.kind not in _NUMERIC_KINDS)
                and (rows.ndim != 1 or rows.size)
            ):
                return False
        values = obs.global_features
        if len(values) != self._num_global or (
            type(values) is np.ndarray and values.dtype.kind not in _NUMERIC_KINDS
        ):
            return False
        for spec in obs.actions.values():
            mask = getattr(spec, "mask", None)
            if type(mask) is np.ndarray and mask.dtype.kind != "b" and mask.size:
                return False
        for flags in obs.visible.values():
            if type(flags) is np.ndarray and flags.dtype.kind != "b" and flags.size:
                return False
        return True

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
            # A natively batched simulator's own arrays; the batcher's are float32 already.
            if data.dtype != np.float32:
                return f"features[{name!r}]: expected dtype float32, got {data.dtype}"
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
        if batch.global_features.dtype != np.float32:
            return f"global_features: expected dtype float32, got {batch.global_features.dtype}"
        if not _all_finite(batch.global_features):
            row = int(np.flatnonzero(~np.isfinite(batch.global_features).all(axis=1))[0])
            return f"global_features: row {row}: expected finite numbers"
        for name, image in batch.images.items():
            # A uint8 image cannot leave its range; a float32 one must stay within [0, 1]
            # (NaN fails both comparisons).
            if (
                image.dtype == np.float32
                and image.size
                and not (0 <= image.min() <= image.max() <= 1)
            ):
                inside = ((image >= 0) & (image <= 1)).reshape(len(image), -1).all(axis=1)
                row = int(np.flatnonzero(~inside)[0])
                return f"images[{name!r}]: row {row}: expected values in [0, 1] (float32 image)"
        if batch.done.dtype != np.bool_:
            return f"done: expected booleans, got dtype {batch.done.dtype}"
        if batch.reward.dtype.kind != "f":
            return f"reward: expected floating-point rewards, got dtype {batch.reward.dtype}"
        if not _all_finite(batch.reward):
            row = int(np.flatnonzero(~np.isfinite(batch.reward))[0])
            return f"reward: row {row}: expected a finite number, got {batch.reward[row]}"
        for key, values in batch.metrics.items():
            if not np.isfinite(values).all():
                return f"metrics[{key!r}]: expected finite numbers, got {values.tolist()}"
        for name, stranded in self._stranded.items():
            problem = stranded(batch.action_masks[name])
            if problem:
                return f"action_masks[{name!r}].{problem}"
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


def _stranded_choice(mask: VecCategoricalMask) -> str:
    """Where an actor of a batched categorical (or global categorical) mask has no legal
    choice ('' if none): the policy could only pick a forbidden one."""
    legal = mask.mask
    if legal is None:
        return ""
    if legal.dtype != np.bool_:
        return f"mask: expected booleans, got dtype {legal.dtype}"
    dead = _dead_block(legal.data.reshape(-1), np.arange(legal.items) * legal.features)
    return "" if dead < 0 else f"mask: {locate(legal, dead)}: expected a legal choice, got none"


def _stranded_actee(mask: VecSelectEntityMask) -> str:
    """Where an actor of a batched select-entity mask has no entity it may select ('' if
    none): no candidates in its row, or every candidate masked out."""
    actors, actees = mask.actors, mask.actees
    # A row with actors (their count capped at 1) and no actees (0); rarely any row without.
    if not actees.lengths.all() and (np.minimum(actors.lengths, 1) > actees.lengths).any():
        row = int(np.flatnonzero((actors.lengths > 0) & (actees.lengths == 0))[0])
        return f"actees: row {row}: expected an entity to select for its actors, got none"
    legal = mask.mask
    if legal is None:
        return ""
    if legal.dtype != np.bool_:
        return f"mask: expected booleans, got dtype {legal.dtype}"
    # Actor-major: each actor's flags are one contiguous block, never empty (checked above).
    widths = np.repeat(actees.lengths, actors.lengths)
    dead = _dead_block(legal.data[:, 0], np.cumsum(widths) - widths)
    return "" if dead < 0 else f"mask: {locate(actors, dead)}: expected a legal actee, got none"


def _dead_block(flags: npt.NDArray[np.bool_], starts: npt.NDArray[np.int64]) -> int:
    """The first of the blocks of ``flags`` that begin at ``starts`` (in order, none empty)
    with no True flag; -1 if none. One ``reduceat`` pass: a reduction along the rows of a
    narrow 2-D array costs numpy twice as much."""
    if not starts.size:
        return -1
    alive = np.logical_or.reduceat(flags, starts)
    return -1 if alive.all() else int(np.argmin(alive))


_STRANDED: dict[type, Callable[[Any], str]] = {
    VecCategoricalMask: _stranded_choice,
    VecSelectEntityMask: _stranded_actee,
}
"""Per batched mask class, what finds an actor left nothing to pick (continuous masks allow
every value)."""


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
