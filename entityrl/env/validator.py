"""Checks that an environment keeps the promises its spaces make.

Wrap an environment in :class:`ValidatingEnvironment` (or pass ``validate=True`` to a VecEnv)
while developing it: every observation from ``reset`` and ``act`` is checked, and the first
broken rule raises :class:`EnvValidationError` naming the environment, the entity or action type,
the field, what was expected and what came.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from entityrl.env.environment import Environment
from entityrl.env.observation import (
    Action,
    CategoricalAction,
    CategoricalActionMask,
    EntityID,
    GlobalCategoricalAction,
    GlobalCategoricalActionMask,
    Observation,
    SelectEntityAction,
    SelectEntityActionMask,
)
from entityrl.env.spaces import (
    ActionSpace,
    CategoricalActionSpace,
    GlobalCategoricalActionSpace,
    ObsSpace,
    SelectEntityActionSpace,
)

_MASK_FOR_SPACE: dict[type, type] = {
    CategoricalActionSpace: CategoricalActionMask,
    SelectEntityActionSpace: SelectEntityActionMask,
    GlobalCategoricalActionSpace: GlobalCategoricalActionMask,
}
_ACTION_FOR_SPACE: dict[type, type] = {
    CategoricalActionSpace: CategoricalAction,
    SelectEntityActionSpace: SelectEntityAction,
    GlobalCategoricalActionSpace: GlobalCategoricalAction,
}


class EnvValidationError(ValueError):
    """An environment broke a rule of the API."""


def validate_spaces(obs_space: Any, action_space: Any, env_name: str = "environment") -> None:
    """Check the declarations themselves: types, names."""
    if not isinstance(obs_space, ObsSpace):
        raise EnvValidationError(
            f"{env_name}: obs_space(): expected an ObsSpace, got {type(obs_space).__name__}"
        )
    if not isinstance(action_space, Mapping):
        raise EnvValidationError(
            f"{env_name}: action_space(): expected a dict of action name -> action space, "
            f"got {type(action_space).__name__}"
        )
    for name, space in action_space.items():
        if not isinstance(name, str) or not name:
            raise EnvValidationError(
                f"{env_name}: action_space(): action names must be non-empty strings, got {name!r}"
            )
        if type(space) not in _MASK_FOR_SPACE:
            raise EnvValidationError(
                f"{env_name}: action_space()[{name!r}]: expected CategoricalActionSpace, "
                f"SelectEntityActionSpace or GlobalCategoricalActionSpace, got {type(space).__name__}"
            )
    for name in obs_space.entities:
        if not isinstance(name, str) or not name:
            raise EnvValidationError(
                f"{env_name}: obs_space(): entity type names must be non-empty strings, got {name!r}"
            )


def validate_observation(
    obs: Any,
    obs_space: ObsSpace,
    action_space: Mapping[str, ActionSpace],
    env_name: str = "environment",
) -> None:
    """Raise :class:`EnvValidationError` at the first rule ``obs`` breaks."""
    _ObservationCheck(obs, obs_space, action_space, env_name).run()


class _ObservationCheck:
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
        self.counts: dict[str, int] = {}
        self.id_types: dict[EntityID, str] = {}

    def fail(self, field: str, message: str) -> None:
        raise EnvValidationError(f"{self.env_name}: Observation.{field}: {message}")

    def run(self) -> None:
        if not isinstance(self.obs, Observation):
            raise EnvValidationError(
                f"{self.env_name}: expected reset()/act() to return an Observation, "
                f"got {type(self.obs).__name__}"
            )
        self.check_features()
        self.check_global_features()
        self.check_ids()
        self.check_visible()
        self.check_actions()
        self.check_reward_done_metrics()

    # ---------------------------------------------------------------- entities
    def check_features(self) -> None:
        declared = self.obs_space.entities
        for name, feats in self.obs.features.items():
            if name not in declared:
                self.fail(
                    f"features[{name!r}]",
                    f"unknown entity type {name!r}; declared types: {_names(declared)}",
                )
            expected = declared[name].features
            array = self._numeric_rows(f"features[{name!r}]", feats, expected)
            self.counts[name] = array.shape[0]
        for name in declared:
            self.counts.setdefault(name, 0)

    def _numeric_rows(
        self, field: str, rows: Any, expected: Sequence[str]
    ) -> npt.NDArray[np.float64]:
        width = len(expected)
        want = f"{width} features per entity ({', '.join(expected) or 'none'})"
        if not isinstance(rows, np.ndarray):
            if not isinstance(rows, Sequence) or isinstance(rows, (str, bytes)):
                self.fail(
                    field, f"expected a 2-D array or a list of rows, got {type(rows).__name__}"
                )
            for i, row in enumerate(rows):
                if not isinstance(row, (Sequence, np.ndarray)) or isinstance(row, (str, bytes)):
                    self.fail(f"{field}[{i}]", f"expected a row of {want}, got {row!r}")
                if len(row) != width:
                    self.fail(f"{field}[{i}]", f"expected {want}, got {len(row)} values")
        try:
            array = np.asarray(rows, dtype=np.float64)
        except (TypeError, ValueError) as err:
            self.fail(field, f"expected numbers, got values numpy cannot read as floats ({err})")
        if array.size == 0:
            array = array.reshape(0, width)
        if array.ndim != 2 or array.shape[1] != width:
            self.fail(
                field, f"expected shape (entities, {width}) with {want}, got shape {array.shape}"
            )
        bad = ~np.isfinite(array)
        if bad.any():
            i, j = (int(k) for k in np.argwhere(bad)[0])
            self.fail(
                f"{field}[{i}]",
                f"feature {expected[j]!r} is {array[i, j]}; features must be finite",
            )
        return array

    def check_global_features(self) -> None:
        expected = self.obs_space.global_features
        values = self.obs.global_features
        try:
            array = np.asarray(values, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError) as err:
            self.fail(
                "global_features", f"expected {len(expected)} numbers, got {values!r} ({err})"
            )
        if array.shape[0] != len(expected):
            self.fail(
                "global_features",
                f"expected {len(expected)} values ({', '.join(expected) or 'none declared'}), "
                f"got {array.shape[0]}",
            )
        bad = np.flatnonzero(~np.isfinite(array))
        if bad.size:
            self.fail(
                "global_features",
                f"{expected[bad[0]]!r} is {array[bad[0]]}; features must be finite",
            )

    def check_ids(self) -> None:
        for name in self.obs_space.entities:
            for entity_id in self.obs.entity_ids(name):
                if not isinstance(entity_id, Hashable):
                    self.fail(f"ids[{name!r}]", f"ids must be hashable, got {entity_id!r}")
                if entity_id in self.id_types:
                    self.fail(
                        f"ids[{name!r}]",
                        f"duplicate id {entity_id!r} (also used by a {self.id_types[entity_id]!r} "
                        "entity); every entity needs its own id",
                    )
                self.id_types[entity_id] = name
        for name, ids in self.obs.ids.items():
            if name not in self.obs_space.entities:
                self.fail(
                    f"ids[{name!r}]",
                    f"unknown entity type {name!r}; declared types: {_names(self.obs_space.entities)}",
                )
            if len(ids) != self.counts[name]:
                self.fail(
                    f"ids[{name!r}]",
                    f"expected one id per entity ({self.counts[name]}), got {len(ids)}",
                )

    def check_visible(self) -> None:
        for name, visible in self.obs.visible.items():
            if name not in self.obs_space.entities:
                self.fail(
                    f"visible[{name!r}]",
                    f"unknown entity type {name!r}; declared types: {_names(self.obs_space.entities)}",
                )
            array = np.asarray(visible)
            if array.shape != (self.counts[name],) or array.dtype != np.bool_:
                self.fail(
                    f"visible[{name!r}]",
                    f"expected {self.counts[name]} booleans (one per entity), "
                    f"got {array.dtype} of shape {array.shape}",
                )

    # ---------------------------------------------------------------- actions
    def check_actions(self) -> None:
        for name, spec in self.obs.actions.items():
            field = f"actions[{name!r}]"
            if name not in self.action_space:
                self.fail(
                    field, f"unknown action {name!r}; declared actions: {_names(self.action_space)}"
                )
            space = self.action_space[name]
            expected_mask = _MASK_FOR_SPACE[type(space)]
            if not isinstance(spec, expected_mask):
                self.fail(
                    field,
                    f"expected a {expected_mask.__name__} for a {type(space).__name__}, "
                    f"got {type(spec).__name__}",
                )
            if isinstance(spec, GlobalCategoricalActionMask):
                self._check_mask(f"{field}.mask", spec.mask, (len(space),), "choices")  # type: ignore[arg-type]
                continue
            actors = self._entities(f"{field}.actor", spec.actor_ids, spec.actor_types)
            if isinstance(spec, CategoricalActionMask):
                self._check_mask(
                    f"{field}.mask",
                    spec.mask,
                    (actors, len(space)),
                    "choices",  # type: ignore[arg-type]
                )
            else:
                actees = self._entities(f"{field}.actee", spec.actee_ids, spec.actee_types)
                if actors and not actees:
                    self.fail(
                        field,
                        f"{actors} actors but no entity to select; omit the action when nothing "
                        "can be selected",
                    )
                self._check_mask(f"{field}.mask", spec.mask, (actors, actees), "actees")

    def _entities(
        self, field: str, ids: Sequence[EntityID] | None, types: Sequence[str] | None
    ) -> int:
        """Check an actor/actee specification; return how many entities it names."""
        if ids is not None and types is not None:
            self.fail(f"{field}_ids", f"give {field.rsplit('.', 1)[1]}_ids or _types, not both")
        if types is not None:
            if isinstance(types, str):
                self.fail(
                    f"{field}_types",
                    f"expected a list of entity type names, got the string {types!r}",
                )
            for t in types:
                if t not in self.obs_space.entities:
                    self.fail(
                        f"{field}_types",
                        f"unknown entity type {t!r}; declared types: {_names(self.obs_space.entities)}",
                    )
            if len(set(types)) != len(types):
                self.fail(f"{field}_types", f"entity types listed twice: {list(types)}")
            return sum(self.counts[t] for t in types)
        if ids is not None:
            seen: set[EntityID] = set()
            for entity_id in ids:
                if not isinstance(entity_id, Hashable) or entity_id not in self.id_types:
                    self.fail(
                        f"{field}_ids",
                        f"id {entity_id!r} is not an entity of this observation",
                    )
                if entity_id in seen:
                    self.fail(f"{field}_ids", f"id {entity_id!r} listed twice")
                seen.add(entity_id)
            return len(ids)
        return sum(self.counts.values())

    def _check_mask(self, field: str, mask: Any, shape: tuple[int, ...], what: str) -> None:
        if mask is None:
            if len(shape) == 1 and shape[0] == 0:
                self.fail(field, "no choices declared")
            return
        array = np.asarray(mask)
        if array.dtype != np.bool_ and array.size:
            self.fail(field, f"expected booleans, got dtype {array.dtype}")
        if array.shape != shape and not (array.size == 0 and math.prod(shape) == 0):
            labels = "(choices,)" if len(shape) == 1 else f"(actors, {what})"
            self.fail(field, f"expected shape {shape} {labels}, got {array.shape}")
        if array.size == 0:
            return
        if array.ndim == 1:
            if not array.any():
                self.fail(field, "every choice is masked out; at least one must be legal")
            return
        dead = np.flatnonzero(~array.any(axis=1))
        if dead.size:
            self.fail(
                field,
                f"actor {int(dead[0])} has no legal {what} (its mask row is all False); "
                "leave it out of the actors instead",
            )

    # ---------------------------------------------------------------- scalars
    def check_reward_done_metrics(self) -> None:
        reward = self.obs.reward
        if isinstance(reward, (bool, np.bool_)) or not isinstance(reward, (int, float, np.number)):
            self.fail("reward", f"expected a number, got {type(reward).__name__} {reward!r}")
        if not math.isfinite(float(reward)):
            self.fail("reward", f"expected a finite number, got {reward}")
        if not isinstance(self.obs.done, (bool, np.bool_)):
            self.fail(
                "done", f"expected a bool, got {type(self.obs.done).__name__} {self.obs.done!r}"
            )
        for key, value in self.obs.metrics.items():
            if not isinstance(key, str):
                self.fail("metrics", f"metric names must be strings, got {key!r}")
            if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
                self.fail(f"metrics[{key!r}]", f"expected a number, got {value!r}")
            if not math.isfinite(float(value)):
                self.fail(f"metrics[{key!r}]", f"expected a finite number, got {value}")


def validate_actions(
    actions: Mapping[str, Action],
    last: Observation,
    action_space: Mapping[str, ActionSpace],
    env_name: str = "environment",
) -> None:
    """Check actions given to ``act`` against the observation they answer."""
    for name, action in actions.items():
        where = f"{env_name}: act(actions[{name!r}])"
        if name not in action_space:
            raise EnvValidationError(
                f"{where}: unknown action; declared actions: {_names(action_space)}"
            )
        if name not in last.actions:
            raise EnvValidationError(f"{where}: the last observation did not offer this action")
        expected = _ACTION_FOR_SPACE[type(action_space[name])]
        if not isinstance(action, expected):
            raise EnvValidationError(
                f"{where}: expected a {expected.__name__}, got {type(action).__name__}"
            )


class ValidatingEnvironment(Environment):
    """Wraps an environment and validates its declarations, observations and the actions it gets."""

    def __init__(self, env: Environment, name: str | None = None) -> None:
        self.env = env
        self.name = name or type(env).__name__
        self._obs_space = env.obs_space()
        self._action_space = dict(env.action_space())
        validate_spaces(self._obs_space, self._action_space, self.name)
        self._last: Observation | None = None

    def obs_space(self) -> ObsSpace:
        return self._obs_space

    def action_space(self) -> dict[str, ActionSpace]:
        return self._action_space

    def reset(self) -> Observation:
        return self._checked(self.env.reset())

    def act(self, actions: Mapping[str, Action]) -> Observation:
        if self._last is None:
            raise EnvValidationError(f"{self.name}: act() called before reset()")
        validate_actions(actions, self._last, self._action_space, self.name)
        return self._checked(self.env.act(actions))

    def _checked(self, obs: Observation) -> Observation:
        validate_observation(obs, self._obs_space, self._action_space, self.name)
        self._last = obs
        return obs

    def seed(self, seed: int) -> None:
        self.env.seed(seed)

    def render(self) -> str:
        return self.env.render()

    def close(self) -> None:
        self.env.close()


def _names(mapping: Mapping[str, Any]) -> str:
    return ", ".join(repr(k) for k in mapping) or "none"
