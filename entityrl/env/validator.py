"""Checks that an environment keeps the promises its spaces make.

Wrap an environment in :class:`ValidatingEnvironment` (or pass ``validate=True`` to a VecEnv)
while developing it: its declarations, every observation from ``reset`` and ``act``, and every
action given to ``act`` are checked, and the first broken rule raises
:class:`EnvValidationError` naming the environment, the entity or action type, the field, what
was expected and what came. A natively batched environment (``BatchedEnvironment`` with
``validate=True``) has each of its batches checked by :func:`validate_vec_obs`, which also
names the row.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import cached_property
from itertools import chain
from typing import Any, NoReturn

import numpy as np
import numpy.typing as npt

from entityrl.env.actions import kind_of
from entityrl.env.environment import Environment, SimulationWrapper
from entityrl.env.observation import Action, EntityID, Observation
from entityrl.env.spaces import ActionSpace, Image, ObsSpace
from entityrl.env.vec_obs import VecObs
from entityrl.ragged import RaggedArray

# Python and numpy scalars accepted as numbers (complex and strings are not).
_NUMBER_TYPES = (bool, int, float, np.bool_, np.integer, np.floating)
_NUMERIC_KINDS = "biuf"
_OBSERVATION_DICTS = {
    "features": "entity type -> features",
    "ids": "entity type -> ids",
    "visible": "entity type -> booleans",
    "actions": "action name -> action mask",
    "metrics": "metric name -> number",
    "images": "image name -> (height, width, channels) array",
}


class EnvValidationError(ValueError):
    """An environment broke a rule of the API."""


def validate_spaces(obs_space: Any, action_space: Any, env_name: str = "environment") -> None:
    """Check the declarations themselves: types, names."""
    if not isinstance(obs_space, ObsSpace):
        raise EnvValidationError(
            f"{env_name}: obs_space(): expected an ObsSpace, got {type(obs_space).__name__}"
        )
    for kind, names in (("entity type", obs_space.entities), ("image", obs_space.images)):
        for name in names:
            if not isinstance(name, str) or not name:
                raise EnvValidationError(
                    f"{env_name}: obs_space(): expected {kind} names to be non-empty strings, "
                    f"got {name!r}"
                )
    if not isinstance(action_space, Mapping):
        raise EnvValidationError(
            f"{env_name}: action_space(): expected a dict of action name -> action space, "
            f"got {type(action_space).__name__}"
        )
    for name, space in action_space.items():
        if not isinstance(name, str) or not name:
            raise EnvValidationError(
                f"{env_name}: action_space(): expected action names to be non-empty strings, "
                f"got {name!r}"
            )
        try:
            kind_of(space)
        except TypeError as err:
            raise EnvValidationError(f"{env_name}: action_space()[{name!r}]: {err}") from None


def validate_observation(
    obs: Any,
    obs_space: ObsSpace,
    action_space: Mapping[str, ActionSpace],
    env_name: str = "environment",
) -> None:
    """Raise :class:`EnvValidationError` at the first rule ``obs`` breaks."""
    _ObservationCheck(obs, obs_space, action_space, env_name).run()


class _Check:
    """What every set of rules starts from: the value checked (an instance of ``subject``),
    the declared spaces, and the environment to name in messages."""

    subject = ""

    def __init__(
        self,
        obs: Any,
        obs_space: ObsSpace,
        action_space: Mapping[str, ActionSpace],
        env_name: str,
    ) -> None:
        self.obs = obs
        self.obs_space = obs_space
        self.action_space = action_space
        self.env_name = env_name

    def fail(self, field: str, message: str) -> NoReturn:
        raise EnvValidationError(f"{self.env_name}: {self.subject}.{field}: {message}")


class _ObservationCheck(_Check):
    """The rules for one observation. Cheap numpy checks first; the slow per-item search for
    the culprit runs only once a rule is known to be broken."""

    subject = "Observation"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.counts: dict[str, int] = dict.fromkeys(self.obs_space.entities, 0)

    def run(self) -> None:
        if not isinstance(self.obs, Observation):
            raise EnvValidationError(
                f"{self.env_name}: expected reset()/act() to return an Observation, "
                f"got {type(self.obs).__name__}"
            )
        for field, content in _OBSERVATION_DICTS.items():
            value = getattr(self.obs, field)
            if not isinstance(value, Mapping):
                self.fail(field, f"expected a dict of {content}, got {type(value).__name__}")
        self.check_features()
        self.check_global_features()
        self.check_images()
        self.check_ids()
        self.check_visible()
        self.check_action_masks()
        self.check_reward_done_metrics()

    def known_type(self, field: str, name: Any) -> None:
        if not isinstance(name, str) or name not in self.obs_space.entities:
            self.fail(
                field,
                f"unknown entity type {name!r}; declared types: {_names(self.obs_space.entities)}",
            )

    # ---------------------------------------------------------------- features
    def check_features(self) -> None:
        for name, rows in self.obs.features.items():
            field = f"features[{name!r}]"
            self.known_type(field, name)
            self.counts[name] = self.entity_rows(
                field, rows, self.obs_space.entities[name].features
            )

    def entity_rows(self, field: str, rows: Any, names: Sequence[str]) -> int:
        """Check an ``(entities, features)`` array or list of rows; return the entity count."""
        width = len(names)
        want = f"{width} features per entity ({_listed(names)})"
        if not _is_sequence(rows):
            self.fail(
                field,
                f"expected an (entities, {width}) array or a list of rows of {want}, "
                f"got {type(rows).__name__}",
            )
        try:
            array = np.asarray(rows)
            got = f"shape {array.shape}"
        except (TypeError, ValueError) as err:  # rows of different lengths
            array, got = None, f"rows numpy cannot stack ({err})"
        if array is not None and array.ndim == 1 and array.size == 0:
            return 0  # an empty list of rows
        if array is None or array.ndim != 2 or array.shape[1] != width:
            if not isinstance(rows, np.ndarray):
                for i, row in enumerate(rows):
                    if not _is_sequence(row):
                        self.fail(f"{field}[{i}]", f"expected a row of {want}, got {row!r}")
                    if len(row) != width:
                        self.fail(f"{field}[{i}]", f"expected {want}, got {len(row)}: {row!r}")
            self.fail(field, f"expected shape (entities, {width}) with {want}, got {got}")
        self.check_numbers(field, rows, array, names)
        return array.shape[0]

    def check_numbers(
        self, field: str, values: Any, array: npt.NDArray[Any], names: Sequence[str]
    ) -> None:
        """Every value of ``array`` (built from ``values``) is a finite number; the last axis
        of ``array`` runs over the features ``names``."""
        if array.dtype.kind not in _NUMERIC_KINDS:
            # numpy turned the whole array into strings or objects; find the value to blame.
            for index, value in np.ndenumerate(np.asarray(values, dtype=object)):
                if not isinstance(value, _NUMBER_TYPES):
                    self.fail(
                        _at(field, index),
                        f"feature {names[index[-1]]!r}: expected a number, "
                        f"got {type(value).__name__} {value!r}",
                    )
            self.fail(field, f"expected numbers, got an array of dtype {array.dtype}")
        if array.dtype.kind == "f":
            bad = ~np.isfinite(array)
            if bad.any():
                index = tuple(int(k) for k in np.argwhere(bad)[0])
                self.fail(
                    _at(field, index),
                    f"feature {names[index[-1]]!r}: expected a finite number, got {array[index]}",
                )

    def check_global_features(self) -> None:
        names = self.obs_space.global_features
        values = self.obs.global_features
        want = f"{len(names)} global features ({_listed(names)})"
        if not _is_sequence(values):
            self.fail(
                "global_features",
                f"expected a list or 1-D array of {want}, got {type(values).__name__}",
            )
        try:
            array = np.asarray(values)
        except (TypeError, ValueError) as err:
            self.fail("global_features", f"expected {want}, got values numpy cannot stack ({err})")
        if array.shape != (len(names),):
            self.fail("global_features", f"expected {want}, got shape {array.shape}")
        self.check_numbers("global_features", values, array, names)

    def check_images(self) -> None:
        declared = self.obs_space.images
        for name, value in self.obs.images.items():
            if name not in declared:
                self.fail("images", f"unknown image {name!r}; declared images: {_names(declared)}")
            problem = _image_problem(value, declared[name], ())
            if problem:
                self.fail(f"images[{name!r}]", problem)
        missing = [name for name in declared if name not in self.obs.images]
        # Like its features, the images of an observation that ends its episode (and is not
        # cut off) are never read: the next episode's first observation replaces it.
        if missing and not (self.obs.done is True and not self.obs.truncated):
            self.fail(
                "images",
                f"expected one image per declared image ({_names(declared)}), got none for "
                f"{_names(dict.fromkeys(missing))}",
            )

    # ---------------------------------------------------------------- ids, visibility
    def check_ids(self) -> None:
        for name, ids in self.obs.ids.items():
            field = f"ids[{name!r}]"
            self.known_type(field, name)
            if not _is_sequence(ids):
                self.fail(
                    field, f"expected a list of ids, one per entity, got {type(ids).__name__}"
                )
            if len(ids) != self.counts[name]:
                self.fail(
                    field, f"expected one id per entity ({self.counts[name]}), got {len(ids)}"
                )
        if self.obs.ids:
            _ = self.known_ids  # hashable and unique (default ids are both by construction)

    @cached_property
    def known_ids(self) -> set[EntityID]:
        """The ids of all entities; the observation fails if some are unhashable or repeated."""
        by_type = {name: self.obs.entity_ids(name) for name in self.obs_space.entities}
        all_ids = list(chain.from_iterable(by_type.values()))
        try:
            known = set(all_ids)
        except TypeError:
            for name, ids in by_type.items():
                self.hashable(f"ids[{name!r}]", ids)
            raise
        if len(known) != len(all_ids):
            owner: dict[EntityID, str] = {}
            for name, ids in by_type.items():
                for i, entity_id in enumerate(ids):
                    if entity_id in owner:
                        self.fail(
                            f"ids[{name!r}][{i}]",
                            f"expected every entity to have its own id, got {entity_id!r} "
                            f"again (already the id of a {owner[entity_id]!r} entity)",
                        )
                    owner[entity_id] = name
        return known

    def hashable(self, field: str, values: Sequence[Any]) -> set[Any]:
        """``set(values)``; fails naming the first value that cannot be hashed."""
        try:
            return set(values)
        except TypeError:
            for i, value in enumerate(values):
                try:
                    hash(value)
                except TypeError:
                    self.fail(
                        f"{field}[{i}]",
                        f"expected a hashable id, got {type(value).__name__} {value!r}",
                    )
            raise

    def check_visible(self) -> None:
        for name, visible in self.obs.visible.items():
            field = f"visible[{name!r}]"
            self.known_type(field, name)
            count = self.counts[name]
            if not _is_sequence(visible):
                self.fail(
                    field,
                    f"expected {count} booleans (one per entity), got {type(visible).__name__}",
                )
            array = np.asarray(visible)
            if array.size == 0 and count == 0:
                continue
            if array.shape != (count,) or array.dtype != np.bool_:
                self.fail(
                    field,
                    f"expected {count} booleans (one per entity), "
                    f"got {array.dtype} of shape {array.shape}",
                )

    # ---------------------------------------------------------------- action masks
    def check_action_masks(self) -> None:
        for name, spec in self.obs.actions.items():
            field = f"actions[{name!r}]"
            if name not in self.action_space:
                self.fail(
                    field, f"unknown action {name!r}; declared actions: {_names(self.action_space)}"
                )
            space = self.action_space[name]
            kind = kind_of(space)
            if not isinstance(spec, kind.mask):
                self.fail(
                    field,
                    f"expected a {kind.mask.__name__} for a {type(space).__name__}, "
                    f"got {type(spec).__name__}",
                )
            kind.validate_mask(self, field, space, spec)

    def every_row_legal(self, field: str, mask: npt.NDArray[np.bool_] | None, what: str) -> None:
        """Each actor's row of ``mask`` allows at least one ``what``."""
        if mask is not None and mask.size:
            dead = np.flatnonzero(~mask.any(axis=1))
            if dead.size:
                self.fail(
                    f"{field}[{dead[0]}]",
                    f"expected at least one legal {what} for actor {dead[0]}, got a row of "
                    "all False; leave the actor out instead",
                )

    def entities(self, field: str, ids: Any, types: Any) -> int:
        """Check an actor or actee specification; return how many entities it names."""
        role = field.rsplit(".", 1)[1]
        if ids is not None and types is not None:
            self.fail(f"{field}_ids", f"expected {role}_ids or {role}_types, got both")
        if types is not None:
            if not _is_sequence(types):
                self.fail(
                    f"{field}_types",
                    f"expected a list of entity type names, got {type(types).__name__} {types!r}",
                )
            for t in types:
                self.known_type(f"{field}_types", t)
            if len(set(types)) != len(types):
                self.fail(f"{field}_types", f"expected each type once, got {list(types)}")
            return sum(self.counts[t] for t in types)
        if ids is not None:
            if not _is_sequence(ids):
                self.fail(
                    f"{field}_ids", f"expected a list of entity ids, got {type(ids).__name__}"
                )
            given = self.hashable(f"{field}_ids", ids)
            if len(given) != len(ids):
                self.fail(f"{field}_ids", f"expected each id once, got {list(ids)}")
            if not given <= self.known_ids:
                i, missing = next((i, x) for i, x in enumerate(ids) if x not in self.known_ids)
                self.fail(
                    f"{field}_ids[{i}]",
                    f"expected the id of an entity of this observation, got {missing!r}",
                )
            return len(ids)
        return sum(self.counts.values())

    def mask(
        self, field: str, mask: Any, shape: tuple[int, ...], layout: str
    ) -> npt.NDArray[np.bool_] | None:
        """The mask as a boolean array of ``shape``; None if the environment gave none."""
        if mask is None:
            return None
        try:
            array = np.asarray(mask)
        except (TypeError, ValueError) as err:
            self.fail(field, f"expected a boolean array of shape {shape} {layout}, got {err}")
        if array.size == 0 and math.prod(shape) == 0:
            return np.zeros(shape, dtype=np.bool_)
        if array.shape != shape:
            self.fail(field, f"expected shape {shape} {layout}, got shape {array.shape}")
        if array.dtype != np.bool_:
            self.fail(field, f"expected booleans, got dtype {array.dtype}")
        return array

    # ---------------------------------------------------------------- scalars
    def check_reward_done_metrics(self) -> None:
        self.finite_number("reward", self.obs.reward)
        if not isinstance(self.obs.done, (bool, np.bool_)):
            self.fail(
                "done", f"expected a bool, got {type(self.obs.done).__name__} {self.obs.done!r}"
            )
        if self.obs.truncated and not self.obs.done:
            self.fail("truncated", "expected done=True with truncated=True, got done=False")
        for key, value in self.obs.metrics.items():
            if not isinstance(key, str):
                self.fail("metrics", f"expected metric names to be strings, got {key!r}")
            self.finite_number(f"metrics[{key!r}]", value)

    def finite_number(self, field: str, value: Any) -> None:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, _NUMBER_TYPES):
            self.fail(field, f"expected a number, got {type(value).__name__} {value!r}")
        if not math.isfinite(float(value)):
            self.fail(field, f"expected a finite number, got {value}")


def validate_vec_obs(
    obs: Any,
    obs_space: ObsSpace,
    action_space: Mapping[str, ActionSpace],
    env_name: str = "environment",
    rows: int | None = None,
) -> None:
    """Raise :class:`EnvValidationError` at the first rule the batch ``obs`` breaks.

    The batch-level counterpart of :func:`validate_observation`, for environments that build
    their :class:`~entityrl.env.vec_obs.VecObs` directly: every entity type's features are
    float32 of the declared width and finite, and so are the global features; every declared
    image is there, one per row, of its shape and dtype (float32 ones in [0, 1]); visibility
    has one flag per entity; each action's actors (and actees) are entities of their row, listed
    once, and a global action's actor is the row's pseudo-entity; masks have one row per actor
    and leave every actor a legal choice; reward is finite and done boolean, one per row
    (``rows`` of them, if given); metrics are finite, at most one value per ended episode.
    All rows are checked at once; the message names the row of the first offender.
    """
    _VecObsCheck(obs, obs_space, action_space, env_name).run(rows)


class _VecObsCheck(_Check):
    """The rules for one batch, each a few numpy calls over all rows; locating the row (and
    entity or actor) to blame happens only once a rule is known to be broken."""

    subject = "VecObs"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.rows = 0
        self.counts = np.zeros(0, dtype=np.int64)  # entities per row

    def run(self, rows: int | None) -> None:
        if not isinstance(self.obs, VecObs):
            raise EnvValidationError(
                f"{self.env_name}: expected a VecObs, got {type(self.obs).__name__}"
            )
        self.check_reward_done(rows)
        self.check_features()
        self.check_global_features()
        self.check_images()
        self.check_visible()
        self.check_action_masks()
        self.check_metrics()

    # ---------------------------------------------------------------- per-row scalars
    def check_reward_done(self, rows: int | None) -> None:
        reward = self.per_row("reward", self.obs.reward, rows, "one reward per row")
        self.rows = reward.shape[0]
        if reward.dtype.kind != "f":
            self.fail("reward", f"expected floating-point rewards, got dtype {reward.dtype}")
        bad = ~np.isfinite(reward)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            self.fail("reward", f"row {row}: expected a finite number, got {reward[row]}")
        done = self.per_row("done", self.obs.done, self.rows, "one flag per row")
        if done.dtype != np.bool_:
            self.fail("done", f"expected booleans, got dtype {done.dtype}")

    def per_row(self, field: str, value: Any, rows: int | None, what: str) -> npt.NDArray[Any]:
        if not isinstance(value, np.ndarray):
            self.fail(field, f"expected a numpy array ({what}), got {type(value).__name__}")
        if value.ndim != 1 or (rows is not None and value.shape[0] != rows):
            want = "(rows,)" if rows is None else f"({rows},)"
            self.fail(field, f"expected shape {want} ({what}), got shape {value.shape}")
        return value

    # ---------------------------------------------------------------- entities
    def check_features(self) -> None:
        self.same_names("features", self.obs.features, self.obs_space.entities, "entity type")
        self.counts = np.zeros(self.rows, dtype=np.int64)
        for name, entity in self.obs_space.entities.items():
            field = f"features[{name!r}]"
            names = entity.features
            features = self.ragged(
                field,
                self.obs.features[name],
                np.float32,
                len(names),
                f"{len(names)} features per entity ({_listed(names)})",
            )
            bad = ~np.isfinite(features.data)
            if bad.any():
                item, column = (int(k) for k in np.argwhere(bad)[0])
                row, k = _place(features, item)
                self.fail(
                    field,
                    f"row {row}, entity {k}: feature {names[column]!r}: expected a finite "
                    f"number, got {features.data[item, column]}",
                )
            self.counts += features.lengths

    def check_global_features(self) -> None:
        names = self.obs_space.global_features
        values = self.obs.global_features
        shape = (self.rows, len(names))
        want = f"{len(names)} global features per row ({_listed(names)})"
        if not isinstance(values, np.ndarray) or values.shape != shape:
            got = (
                f"shape {values.shape}" if isinstance(values, np.ndarray) else type(values).__name__
            )
            self.fail("global_features", f"expected shape {shape} with {want}, got {got}")
        if values.dtype != np.float32:
            self.fail("global_features", f"expected dtype float32, got {values.dtype}")
        bad = ~np.isfinite(values)
        if bad.any():
            row, column = (int(k) for k in np.argwhere(bad)[0])
            self.fail(
                "global_features",
                f"row {row}: global feature {names[column]!r}: expected a finite number, "
                f"got {values[row, column]}",
            )

    def check_images(self) -> None:
        declared = self.obs_space.images
        self.same_names("images", self.obs.images, declared, "image")
        for name, image in declared.items():
            problem = _image_problem(self.obs.images[name], image, (self.rows,))
            if problem:
                self.fail(f"images[{name!r}]", problem)

    def check_visible(self) -> None:
        for name, visible in self.obs.visible.items():
            field = f"visible[{name!r}]"
            if name not in self.obs_space.entities:
                self.fail(
                    field,
                    f"unknown entity type {name!r}; declared types: "
                    f"{_names(self.obs_space.entities)}",
                )
            flags = self.ragged(field, visible, np.bool_, 1, "one flag per entity")
            self.same_lengths(
                field, flags, self.obs.features[name].lengths, f"flags (one per {name} entity)"
            )

    # ---------------------------------------------------------------- actions
    def check_action_masks(self) -> None:
        self.same_names("action_masks", self.obs.action_masks, self.action_space, "action")
        for name, space in self.action_space.items():
            field = f"action_masks[{name!r}]"
            mask = self.obs.action_masks[name]
            kind = kind_of(space)
            if not isinstance(mask, kind.vec_mask):
                self.fail(
                    field,
                    f"expected a {kind.vec_mask.__name__} for a {type(space).__name__}, "
                    f"got {type(mask).__name__}",
                )
            kind.validate_vec_mask(self, field, space, mask)

    def global_actor(self, field: str, actors: RaggedArray) -> None:
        """At most one actor per row: the pseudo-entity whose index is the entity count."""
        crowded = np.flatnonzero(actors.lengths > 1)
        if crowded.size:
            row = int(crowded[0])
            self.fail(
                field,
                f"row {row}: expected at most one actor (the row's pseudo-entity), "
                f"got {actors.lengths[row]}",
            )
        rows = actors.row_index()
        wrong = np.flatnonzero(actors.data[:, 0] != self.counts[rows])
        if wrong.size:
            item = int(wrong[0])
            row = int(rows[item])
            self.fail(
                field,
                f"row {row}: expected the pseudo-entity {self.counts[row]} (the number of "
                f"entities in the row) to take the global action, got {actors.data[item, 0]}",
            )

    def entities_of_row(self, field: str, indices: RaggedArray, role: str) -> None:
        """Every index names an entity of its row, and none twice in a row."""
        rows = indices.row_index()
        index = indices.data[:, 0]
        outside = np.flatnonzero((index < 0) | (index >= self.counts[rows]))
        if outside.size:
            item = int(outside[0])
            row = int(rows[item])
            self.fail(
                field,
                f"row {row}: expected {role}s among the row's entities [0, {self.counts[row]}), "
                f"got {role} index {index[item]}",
            )
        # One number per (row, entity): equal numbers are the same entity twice in a row.
        keys = rows * (int(self.counts.max(initial=0)) + 1) + index
        order = np.argsort(keys, kind="stable")
        repeated = np.flatnonzero(keys[order][1:] == keys[order][:-1])
        if repeated.size:
            item = int(order[repeated[0] + 1])
            self.fail(
                field,
                f"row {rows[item]}: expected each {role} once, got entity {index[item]} again",
            )

    # ---------------------------------------------------------------- metrics
    def check_metrics(self) -> None:
        metrics = self.obs.metrics
        if not isinstance(metrics, Mapping):
            self.fail(
                "metrics",
                f"expected a dict of metric name -> values, got {type(metrics).__name__}",
            )
        # In a multi-player batch, each player of an ended game reports its episode.
        over = self.obs.game_over
        ended = int((self.obs.done if over is None else over).sum())
        for key, values in metrics.items():
            if not isinstance(key, str):
                self.fail("metrics", f"expected metric names to be strings, got {key!r}")
            field = f"metrics[{key!r}]"
            want = f"at most one value per episode that ended on this step ({ended})"
            if not isinstance(values, np.ndarray) or values.ndim != 1 or values.size > ended:
                got = (
                    f"shape {values.shape}"
                    if isinstance(values, np.ndarray)
                    else type(values).__name__
                )
                self.fail(field, f"expected a 1-D array of {want}, got {got}")
            if values.dtype.kind not in _NUMERIC_KINDS:
                self.fail(field, f"expected numbers, got dtype {values.dtype}")
            bad = np.flatnonzero(~np.isfinite(values))
            if bad.size:
                self.fail(f"{field}[{bad[0]}]", f"expected a finite number, got {values[bad[0]]}")

    # ---------------------------------------------------------------- shared
    def same_names(self, field: str, given: Any, declared: Mapping[str, Any], kind: str) -> None:
        """``given`` is a dict with exactly the ``declared`` keys."""
        if not isinstance(given, Mapping):
            self.fail(field, f"expected a dict of {kind} -> values, got {type(given).__name__}")
        missing = [name for name in declared if name not in given]
        unknown = [name for name in given if name not in declared]
        problems = []
        if missing:
            problems.append(f"none for {', '.join(map(repr, missing))}")
        if unknown:
            problems.append(f"unknown {', '.join(map(repr, unknown))}")
        if problems:
            self.fail(
                field,
                f"expected one entry per declared {kind} ({_names(declared)}), got "
                + "; ".join(problems),
            )

    def ragged(self, field: str, value: Any, dtype: type, width: int, what: str) -> RaggedArray:
        """``value`` as a RaggedArray of one row per environment, ``width`` columns of
        ``dtype`` (``what`` says what the columns are) and consistent row lengths."""
        if not isinstance(value, RaggedArray):
            self.fail(field, f"expected a RaggedArray, got {type(value).__name__}")
        if value.size0 != self.rows:
            self.fail(field, f"expected {self.rows} rows (one per environment), got {value.size0}")
        if value.features != width:
            self.fail(field, f"expected {what}, got width {value.features}")
        if value.dtype != dtype:
            self.fail(field, f"expected dtype {np.dtype(dtype)}, got {value.dtype}")
        negative = np.flatnonzero(value.lengths < 0)
        if negative.size:
            row = int(negative[0])
            self.fail(field, f"row {row}: expected a length >= 0, got {value.lengths[row]}")
        if int(value.lengths.sum()) != value.items:
            self.fail(
                field,
                f"expected row lengths that add up to its {value.items} items, "
                f"got {int(value.lengths.sum())}",
            )
        return value

    def same_lengths(
        self, field: str, value: RaggedArray, lengths: npt.NDArray[np.int64], what: str
    ) -> None:
        """Row ``r`` of ``value`` has ``lengths[r]`` items (``what`` says what they are)."""
        wrong = np.flatnonzero(value.lengths != lengths)
        if wrong.size:
            row = int(wrong[0])
            self.fail(field, f"row {row}: expected {lengths[row]} {what}, got {value.lengths[row]}")


def validate_actions(
    actions: Any,
    last: Observation,
    obs_space: ObsSpace,
    action_space: Mapping[str, ActionSpace],
    env_name: str = "environment",
) -> None:
    """Check actions given to ``act`` against the observation they answer: every action the
    observation offered to some actor is answered, by exactly the offered actors, each with a
    choice in range that its mask allows (or, for select-entity, one of its candidates)."""
    if not isinstance(actions, Mapping):
        raise EnvValidationError(
            f"{env_name}: act(): expected a dict of action name -> action, "
            f"got {type(actions).__name__}"
        )
    for name in actions:
        where = f"{env_name}: act(actions[{name!r}])"
        if name not in action_space:
            raise EnvValidationError(
                f"{where}: unknown action; declared actions: {_names(action_space)}"
            )
        if name not in last.actions:
            raise EnvValidationError(
                f"{where}: expected only actions the last observation offered "
                f"({_names(last.actions)}), got this one"
            )
    type_order = list(obs_space.entities)
    for name, spec in last.actions.items():
        where = f"{env_name}: act(actions[{name!r}])"
        action = actions.get(name)
        if action is None:
            offered = kind_of(action_space[name]).offered(last, type_order, spec)
            if offered:
                raise EnvValidationError(
                    f"{where}: expected an action for the {offered} actors the last "
                    "observation offered it to, got none"
                )
            continue
        expected = kind_of(action_space[name]).action
        if not isinstance(action, expected):
            raise EnvValidationError(
                f"{where}: expected a {expected.__name__}, got {type(action).__name__}"
            )
        _ActionCheck(where, action, spec, last, type_order, action_space[name]).run()


class _ActionCheck:
    """One action against the mask it answers."""

    def __init__(
        self,
        where: str,
        action: Action,
        spec: Any,
        last: Observation,
        type_order: list[str],
        space: ActionSpace,
    ) -> None:
        self.where = where
        self.action = action
        self.spec = spec
        self.last = last
        self.type_order = type_order
        self.space = space

    def fail(self, message: str) -> NoReturn:
        raise EnvValidationError(f"{self.where}: {message}")

    def run(self) -> None:
        kind_of(self.space).validate_action(self, self.space, self.action, self.spec)

    def legal(self) -> npt.NDArray[np.bool_] | None:
        """The mask the action answers, as booleans (None if it had none)."""
        mask = getattr(self.spec, "mask", None)
        return None if mask is None else np.asarray(mask, dtype=np.bool_)

    def actor_rows(self) -> tuple[list[Any], npt.NDArray[np.int64]]:
        """The action's actors, once they are checked to be the offered ones, and each one's
        row in the mask (its place among the offered actors)."""
        actors = list(self.action.actors)  # type: ignore[union-attr]
        spec = self.spec
        offered = self.last.named_entities(self.type_order, spec.actor_ids, spec.actor_types)
        if len(actors) != len(offered) or set(actors) != set(offered):
            self.fail(f"expected actions from the offered actors {offered}, got from {actors}")
        row_of = dict(zip(offered, range(len(offered)), strict=True))
        rows = np.fromiter((row_of[a] for a in actors), dtype=np.int64, count=len(actors))
        return actors, rows

    def check_range(
        self, actors: Sequence[Any] | None, chosen: npt.NDArray[np.int64], limit: int, what: str
    ) -> None:
        outside = np.flatnonzero((chosen < 0) | (chosen >= limit))
        if outside.size:
            k = int(outside[0])
            self.fail(f"{_who(actors, k)} chose {chosen[k]}, expected a {what} in [0, {limit})")

    def check_legal(
        self,
        actors: Sequence[Any] | None,
        rows: npt.NDArray[np.int64],
        chosen: npt.NDArray[np.int64],
        mask: npt.NDArray[np.bool_] | None,
        what: str,
    ) -> None:
        if mask is None or not chosen.size:
            return
        legal = mask[rows, chosen] if mask.ndim == 2 else mask[chosen]
        if not legal.all():
            k = int(np.flatnonzero(~legal)[0])
            self.fail(f"{_who(actors, k)} chose {what} {chosen[k]}, which its mask forbids")


class ValidatingEnvironment(SimulationWrapper, Environment):
    """Wraps an environment and validates its declarations, observations and the actions it gets."""

    def __init__(self, env: Environment, name: str | None = None) -> None:
        self.env = env
        self.name = name or type(env).__name__
        self._obs_space = env.obs_space()
        self._action_space = env.action_space()
        validate_spaces(self._obs_space, self._action_space, self.name)
        self._action_space = dict(self._action_space)
        self._last: Observation | None = None

    def obs_space(self) -> ObsSpace:
        return self._obs_space

    def action_space(self) -> dict[str, ActionSpace]:
        return self._action_space

    def reset(self) -> Observation:
        obs = self._checked(self.env.reset())
        if obs.done:
            # A vectorized env resets an ended episode at once: it would never get to play.
            raise EnvValidationError(
                f"{self.name}: reset(): expected a first observation with done=False, got done=True"
            )
        return obs

    def act(self, actions: Mapping[str, Action]) -> Observation:
        if self._last is None:
            raise EnvValidationError(f"{self.name}: act() called before reset()")
        validate_actions(actions, self._last, self._obs_space, self._action_space, self.name)
        return self._checked(self.env.act(actions))

    def _checked(self, obs: Observation) -> Observation:
        validate_observation(obs, self._obs_space, self._action_space, self.name)
        self._last = obs
        return obs


def _who(actors: Sequence[Any] | None, k: int) -> str:
    """Actor ``k`` in a message; ``actors`` is None for a global action."""
    return "the global action" if actors is None else f"actor {actors[k]!r}"


def _is_sequence(value: Any) -> bool:
    return isinstance(value, (Sequence, np.ndarray)) and not isinstance(value, (str, bytes))


def _at(field: str, index: tuple[int, ...]) -> str:
    """The field of one value: ``field[i]`` for entity ``i``; the last axis is the feature."""
    return field + "".join(f"[{k}]" for k in index[:-1])


def _place(array: RaggedArray, item: int) -> tuple[int, int]:
    """The row of flat item ``item`` of ``array`` and its position within that row."""
    row = int(np.searchsorted(array.offsets, item, side="right")) - 1
    return row, item - int(array.offsets[row])


def _image_problem(value: Any, image: Image, rows: tuple[int, ...]) -> str | None:
    """What is wrong with ``value`` as the image(s) ``image`` declares (``rows``: the leading
    axes of a batch), or None."""
    shape = (*rows, *image.shape)
    want = f"an array of shape {shape} ({'rows, ' if rows else ''}height, width, channels)"
    if not isinstance(value, np.ndarray):
        return f"expected {want} of {image.dtype}, got {type(value).__name__}"
    if value.shape != shape:
        return f"expected {want}, got shape {value.shape}"
    if value.dtype != image.dtype:
        return f"expected dtype {image.dtype}, got {value.dtype}"
    if image.dtype == "float32":
        outside = ~((value >= 0) & (value <= 1))  # NaN included
        if outside.any():
            index = tuple(int(k) for k in np.argwhere(outside)[0])
            return (
                f"at {list(index)}: expected a value in [0, 1] (float32 image), got {value[index]}"
            )
    return None


def _listed(names: Sequence[str]) -> str:
    return ", ".join(names) or "none"


def _names(mapping: Mapping[str, Any]) -> str:
    return ", ".join(repr(k) for k in mapping) or "none"
