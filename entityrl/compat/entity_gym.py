"""Run environments written for entity-gym 0.1.x on entityrl, unchanged.

::

    import entityrl
    from entity_gym.examples import CherryPick
    from entityrl.compat.entity_gym import from_entity_gym

    entityrl.train(from_entity_gym(CherryPick), overrides=["total_timesteps=250000"])

:func:`from_entity_gym` returns a picklable factory, usable wherever entityrl takes one
(``SerialVecEnv``, ``ProcessVecEnv``, ``entityrl.train``); :class:`EntityGymEnvironment` wraps
one environment instance.

The two APIs describe the same things, so the wrapper translates names and passes data through:
entity-gym's ``index_to_label`` becomes ``choices``, its masks become entityrl masks with the
same fields, and the chosen actions come back as the environment's own ``CategoricalAction``,
``SelectEntityAction`` and ``GlobalCategoricalAction`` objects. Feature arrays, id lists,
visibility masks and metrics are handed on as they are (no copy). entityrl never imports
entity-gym: it reads entity-gym objects by attribute name and recognizes spaces and masks by
class name, and it builds the actions from the classes of the module that defines the
environment's action spaces. Differences worth knowing:

- Entities the environment gives no ids are named ``(entity type, index)``, as everywhere in
  entityrl (entity-gym would name them ``None``, or fail for actors).
- Actions carry no ``probs`` (entity-gym's trainer fills them; environments rarely read them).
- An action missing from an observation's ``actions`` is not passed to ``act`` on the next step.
- ``SelectEntityActionMask.mask`` is honoured (entity-gym 0.1.x ignores it).
- ``reset_filter``/``act_filter`` are not used: entityrl always observes every feature.

Seeding: entity-gym environments draw from Python's global :mod:`random` and numpy's global
``np.random``, which all environments of a process share. :meth:`EntityGymEnvironment.seed`
seeds both global generators (and calls the environment's own ``seed`` method if it has one).
A vectorized environment seeds its environments in order, so a run is reproducible for a given
seed and layout (number of environments and worker processes); but environments do not get
independent streams, and splitting the same batch over a different number of processes plays
different episodes. Pickling an environment (checkpoints) saves the global generators' state
and unpickling restores it, so a resumed run continues exactly.

By name: ``entity_gym:<module>:<Class>`` (``entity_gym:entity_gym.examples:CherryPick``) names
an entity-gym environment class in entityrl's registry, so ``entityrl train``, ``eval`` and
``play`` build it from the command line. A run trained on ``from_entity_gym(Class, **kwargs)``
records that name and the keyword arguments (when the class can be imported again and the
arguments are plain YAML values), so ``entityrl eval RUN_DIR`` rebuilds its environment.

numpy 2: entity-gym 0.1.x uses ``np.bool8``, an alias numpy 2 removed. Importing this module
puts the alias back (as ``np.bool_``) when it is missing, so import it before ``entity_gym``.
"""

from __future__ import annotations

import functools
import importlib
import random
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from entityrl.env.batching import ActionConstructor
from entityrl.env.environment import Environment
from entityrl.env.observation import (
    Action,
    ActionMask,
    CategoricalAction,
    CategoricalActionMask,
    GlobalCategoricalActionMask,
    Observation,
    SelectEntityAction,
    SelectEntityActionMask,
)
from entityrl.env.spaces import (
    ActionSpace,
    CategoricalActionSpace,
    Entity,
    GlobalCategoricalActionSpace,
    ObsSpace,
    SelectEntityActionSpace,
)

# entity-gym 0.1.x annotates with np.bool8 at import time; numpy 2 removed that alias of np.bool_.
if np.lib.NumpyVersion(np.__version__) >= "2.0.0" and "bool8" not in np.__dict__:
    np.bool8 = np.bool_  # type: ignore[attr-defined]

# entity-gym class name -> entityrl space class, and the entity-gym action class it takes.
_SPACES: dict[str, tuple[type, str]] = {
    "CategoricalActionSpace": (CategoricalActionSpace, "CategoricalAction"),
    "GlobalCategoricalActionSpace": (GlobalCategoricalActionSpace, "GlobalCategoricalAction"),
    "SelectEntityActionSpace": (SelectEntityActionSpace, "SelectEntityAction"),
}

# entity-gym mask class name -> the same mask as an entityrl object (fields have equal names).
_MASKS: dict[str, Callable[[Any], ActionMask]] = {
    "CategoricalActionMask": lambda m: CategoricalActionMask(
        actor_ids=m.actor_ids, actor_types=m.actor_types, mask=m.mask
    ),
    "SelectEntityActionMask": lambda m: SelectEntityActionMask(
        actor_ids=m.actor_ids,
        actor_types=m.actor_types,
        actee_ids=m.actee_ids,
        actee_types=m.actee_types,
        mask=m.mask,
    ),
    "GlobalCategoricalActionMask": lambda m: GlobalCategoricalActionMask(mask=m.mask),
}

ActionBuilder = Callable[[Action], Any]
"""Turns the action entityrl chose into the entity-gym action object the environment takes."""


def _api_base(obj: object, known: Mapping[str, Any]) -> type | None:
    """The class of ``obj``'s MRO that bears one of the ``known`` entity-gym class names."""
    for cls in type(obj).__mro__:
        if cls.__name__ in known:
            return cls
    return None


def _api_class(base: type, name: str) -> type:
    """The class ``name`` of the library that defines the API class ``base``.

    Looks in ``base``'s module and then in its parent packages, so it finds entity-gym's own
    classes (``entity_gym.env.action``), those of a package that re-exports them, and those of
    a module that mimics the API.
    """
    module = base.__module__
    while module:
        found = getattr(importlib.import_module(module), name, None)
        if isinstance(found, type):
            return found
        module = module.rpartition(".")[0]
    raise TypeError(
        f"cannot find class {name!r} next to {base.__qualname__} (module "
        f"{base.__module__!r}): expected the module that defines the action spaces, or a "
        "package above it, to define the entity-gym action classes"
    )


def convert_obs_space(space: Any, env_name: str = "environment") -> ObsSpace:
    """entityrl's :class:`ObsSpace` for an entity-gym ``ObsSpace``."""
    try:
        entities = {name: Entity(list(e.features)) for name, e in space.entities.items()}
        return ObsSpace(entities=entities, global_features=list(space.global_features))
    except AttributeError as err:
        raise TypeError(
            f"{env_name}.obs_space(): expected an entity-gym ObsSpace (entities: name -> "
            f"Entity(features), global_features), got {type(space).__name__}: {err}"
        ) from None


def convert_action_space(
    name: str, space: Any, env_name: str = "environment"
) -> tuple[ActionSpace, ActionBuilder]:
    """entityrl's space for one entity-gym action space, and the builder of its actions."""
    ours, native = _convert_action_space(name, space, env_name)
    return ours, functools.partial(_rebuild, native)


def _convert_action_space(
    name: str, space: Any, env_name: str
) -> tuple[ActionSpace, ActionConstructor]:
    """entityrl's space for one entity-gym action space, and the constructor of its entity-gym
    actions from entityrl's arguments (see :data:`~entityrl.env.batching.ActionConstructor`)."""
    base = _api_base(space, _SPACES)
    if base is None:
        raise TypeError(
            f"{env_name}.action_space()[{name!r}]: expected an entity-gym "
            f"{', '.join(_SPACES)}, got {type(space).__name__}"
        )
    ours, action_name = _SPACES[base.__name__]
    action_class = _api_class(base, action_name)
    # entity-gym's action classes take entityrl's arguments in the same order, except that a
    # categorical action carries the environment's own label list (so that ``action.labels``
    # reads exactly as it wrote it).
    if ours is SelectEntityActionSpace:
        return SelectEntityActionSpace(), action_class
    labels = space.index_to_label
    if ours is GlobalCategoricalActionSpace:
        return GlobalCategoricalActionSpace(list(labels)), action_class
    return (
        CategoricalActionSpace(list(labels)),
        lambda actors, indices, _choices: action_class(actors, indices, labels),
    )


def _rebuild(native: ActionConstructor, action: Action) -> Any:
    """entityrl's ``action`` as the environment's own, built by ``native`` from its fields."""
    if isinstance(action, CategoricalAction):
        return native(action.actors, action.indices, action.choices)
    if isinstance(action, SelectEntityAction):
        return native(action.actors, action.actees)
    return native(action.index, action.label)


class EntityGymEnvironment(Environment):
    """An entity-gym environment instance behind entityrl's :class:`Environment` API.

    ``name`` (default: the environment's class name) appears in error messages. See the
    module documentation for what is translated, and for seeding.

    It is also :class:`~entityrl.env.environment.NativeStepping`: a SerialVecEnv batches the
    entity-gym observations directly (their fields and their masks' fields have entityrl's
    names) and builds entity-gym actions, skipping the translation of every step. Each
    environment's first observation of every class is still checked as :meth:`act` checks it.
    """

    def __init__(self, env: Any, name: str | None = None) -> None:
        self.env = env
        self.name = name or type(env).__name__
        self._obs_space = convert_obs_space(env.obs_space(), self.name)
        self._bind()

    def _bind(self) -> None:
        """Translate the action spaces (and forget learned mask types): after init and unpickling."""
        self._action_space: dict[str, ActionSpace] = {}
        self._builders: dict[str, ActionBuilder] = {}
        self.native_actions: dict[str, ActionConstructor] = {}
        for action, space in dict(self.env.action_space()).items():
            ours, native = _convert_action_space(action, space, self.name)
            self._action_space[action] = ours
            self._builders[action] = functools.partial(_rebuild, native)
            self.native_actions[action] = native
        self._mask_converters: dict[type, Callable[[Any], ActionMask]] = {}
        self._checked: set[type] = set()

    # ------------------------------------------------------------------ Environment API
    def obs_space(self) -> ObsSpace:
        return self._obs_space

    def action_space(self) -> dict[str, ActionSpace]:
        return self._action_space

    def reset(self) -> Observation:
        return self._observation(self.env.reset(), "reset")

    def act(self, actions: Mapping[str, Action]) -> Observation:
        builders = self._builders
        return self._observation(
            self.env.act({name: builders[name](a) for name, a in actions.items()}), "act"
        )

    def native_reset(self) -> Any:
        return self._checked_native(self.env.reset(), "reset")

    def native_act(self, actions: Mapping[str, Any]) -> Any:
        return self._checked_native(self.env.act(actions), "act")

    def _checked_native(self, obs: Any, method: str) -> Any:
        if type(obs) not in self._checked:
            self._observation(obs, method)  # raises a clear error for a malformed observation
            self._checked.add(type(obs))
        return obs

    def seed(self, seed: int) -> None:
        """Seed the global generators entity-gym environments draw from (see module docs)."""
        random.seed(seed)
        np.random.seed(seed % 2**32)
        own = getattr(self.env, "seed", None)
        if callable(own):
            own(seed)

    def render(self) -> str:
        picture = self.env.render()
        if isinstance(picture, str):
            return picture
        raise NotImplementedError(
            f"{self.name}.render() returns {type(picture).__name__}, not text; "
            "entityrl shows environments as text"
        )

    def close(self) -> None:
        self.env.close()

    # ------------------------------------------------------------------ translation
    def _observation(self, obs: Any, method: str) -> Observation:
        """entityrl's Observation for an entity-gym one: the same data, masks re-typed."""
        converters = self._mask_converters
        try:
            masks = {
                action: (converters.get(type(mask)) or self._learn_mask(action, mask))(mask)
                for action, mask in obs.actions.items()
            }
            return Observation(
                features=obs.features,
                actions=masks,
                reward=obs.reward,
                done=obs.done,
                ids=obs.ids,
                global_features=obs.global_features,
                visible=obs.visible,
                metrics=obs.metrics,
            )
        except AttributeError as err:
            raise TypeError(
                f"{self.name}.{method}(): expected an entity-gym Observation (features, "
                f"actions, reward, done, ids, global_features, visible, metrics), got "
                f"{type(obs).__name__}: {err}"
            ) from None

    def _learn_mask(self, action: str, mask: Any) -> Callable[[Any], ActionMask]:
        """The converter of a mask type seen for the first time (then looked up by type)."""
        base = _api_base(mask, _MASKS)
        if base is None:
            raise TypeError(
                f"{self.name}: observation actions[{action!r}]: expected an entity-gym "
                f"{', '.join(_MASKS)}, got {type(mask).__name__}"
            )
        convert = self._mask_converters[type(mask)] = _MASKS[base.__name__]
        return convert

    # ------------------------------------------------------------------ pickling
    def __getstate__(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if k not in _REBUILT}
        # The environment's randomness lives in the global generators: a checkpoint needs them.
        state["_global_rng"] = (random.getstate(), np.random.get_state())
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        python_rng, numpy_rng = state.pop("_global_rng")
        self.__dict__.update(state)
        random.setstate(python_rng)
        np.random.set_state(numpy_rng)
        self._bind()


_REBUILT = ("_action_space", "_builders", "native_actions", "_mask_converters", "_checked")
"""Attributes rebuilt from the environment after unpickling (they hold closures)."""


class EntityGymFactory:
    """A picklable zero-argument factory: ``EntityGymEnvironment(env_class(**kwargs))``.

    Its ``__name__`` is the environment class's. ``env_id`` is the registry name that builds
    the same environments (``entity_gym:<module>:<Class>``, with ``env_kwargs``), or None when
    the class cannot be imported by name (defined in ``__main__`` or in a function) or the
    arguments are not plain YAML values; a training run records it, so that ``entityrl eval``
    and ``entityrl play`` rebuild the environment.
    """

    def __init__(self, env_class: Callable[..., Any], kwargs: Mapping[str, Any]) -> None:
        if not callable(env_class):
            raise TypeError(
                f"from_entity_gym: expected an entity-gym Environment class (or a callable "
                f"returning an environment), got {env_class!r}"
            )
        self.env_class = env_class
        self.kwargs = dict(kwargs)
        self.__name__ = getattr(env_class, "__name__", type(env_class).__name__)
        path = _import_path(env_class)
        plain = all(_is_plain(value) for value in self.kwargs.values())
        self.env_id = f"{LIBRARY}:{path}" if path and plain else None
        self.env_kwargs = self.kwargs if self.env_id else {}

    def __call__(self) -> EntityGymEnvironment:
        return EntityGymEnvironment(self.env_class(**self.kwargs), self.__name__)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.kwargs.items())
        return f"from_entity_gym({self.__name__}{', ' if args else ''}{args})"


def from_entity_gym(env_class: Callable[..., Any], **kwargs: Any) -> EntityGymFactory:
    """A factory of wrapped ``env_class(**kwargs)`` environments (picklable for processes)."""
    return EntityGymFactory(env_class, kwargs)


def _import_path(env_class: Callable[..., Any]) -> str | None:
    """``module:Class`` if importing ``module`` gives back ``env_class`` under that name."""
    module = getattr(env_class, "__module__", None)
    name = getattr(env_class, "__qualname__", "")
    if not isinstance(env_class, type) or module in (None, "__main__") or "." in name:
        return None  # "." in a qualified name: nested in a class or a function (<locals>)
    return f"{module}:{name}"


def _is_plain(value: Any) -> bool:
    """A value a run's YAML config can hold (so that the run records it)."""
    if isinstance(value, (list, tuple)):
        return all(_is_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_plain(v) for k, v in value.items())
    return value is None or isinstance(value, (bool, int, float, str))


# ---------------------------------------------------------------------------- registry
LIBRARY = "entity_gym"
"""The registry prefix: ``entity_gym:<module>:<Class>``."""


def load_class(env_id: str) -> type:
    """The class named ``module:Class``; KeyError saying what is wrong otherwise."""
    module_name, _, class_name = env_id.partition(":")
    if not module_name or not class_name:
        raise KeyError(
            f"{LIBRARY}:{env_id}: expected {LIBRARY}:<module>:<Class>, e.g. "
            f"{LIBRARY}:entity_gym.examples:CherryPick"
        )
    try:
        env_class = getattr(importlib.import_module(module_name), class_name)
    except ImportError as err:
        raise KeyError(
            f"{LIBRARY}:{env_id}: cannot import {module_name!r} ({err}); entity-gym's "
            "installation beside entityrl is described in docs/interop.md"
        ) from None
    except AttributeError:
        raise KeyError(
            f"{LIBRARY}:{env_id}: module {module_name!r} has no {class_name!r}"
        ) from None
    if not isinstance(env_class, type):
        raise KeyError(f"{LIBRARY}:{env_id}: expected an environment class, got {env_class!r}")
    return env_class


def check_id(env_id: str) -> None:
    """Raise KeyError unless ``env_id`` (``module:Class``) imports a class."""
    load_class(env_id)


class NamedEntityGymEnvironment(EntityGymEnvironment):
    """The entity-gym environment class named ``module:Class`` (what
    ``entity_gym:<module>:<Class>`` names in entityrl's registry), built with ``kwargs``."""

    def __init__(self, env_id: str, **kwargs: Any) -> None:
        env_class = load_class(env_id)
        super().__init__(env_class(**kwargs), env_class.__name__)


ADAPTER = NamedEntityGymEnvironment
"""What ``entity_gym:<module>:<Class>`` names in entityrl's registry."""


__all__ = [
    "ADAPTER",
    "EntityGymEnvironment",
    "EntityGymFactory",
    "NamedEntityGymEnvironment",
    "check_id",
    "convert_action_space",
    "convert_obs_space",
    "from_entity_gym",
    "load_class",
]
