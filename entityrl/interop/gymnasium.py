"""Gymnasium, both ways.

* :class:`GymnasiumEnvironment`: any Gymnasium environment as an entityrl
  :class:`~entityrl.env.Environment` (``entityrl train gymnasium:CartPole-v1``);
  :class:`GymnasiumVecEnv`: a Gymnasium vector environment as an entityrl
  :class:`~entityrl.env.VecEnv`. Spaces translate by the rule of
  :mod:`entityrl.interop.gym_spaces`; ``terminated`` and ``truncated`` stay apart (a truncated
  episode is bootstrapped from its last observation's value). The numeric scalars of an
  episode's last ``info`` (``is_success``, say) become its metrics, logged as ``episode/<key>``
  and reported by ``entityrl eval``.
* :class:`EntityGymnasiumEnv`: any entityrl environment as a Gymnasium environment, entities
  padded to a declared maximum per type with a presence mask, so Gymnasium-speaking trainers
  (Stable-Baselines3, CleanRL) can run entityrl's worlds.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium
import numpy as np
import numpy.typing as npt
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import concatenate, create_empty_array

from entityrl.env import (
    Action,
    ActionSpace,
    BatchedEnvironment,
    Batcher,
    Environment,
    EpisodeTracker,
    Observation,
    ObsSpace,
    VecEnv,
    VecObs,
)
from entityrl.env.actions import kind_of
from entityrl.env.actions.kind import Options
from entityrl.env.vec_env import check_actions
from entityrl.interop.gym_spaces import ActionRule, ObservationRule, UnsupportedSpaceError
from entityrl.ragged import RaggedArray

MINIGRID_PREFIXES = ("MiniGrid-", "BabyAI-")
"""Ids of MiniGrid's tasks, which entityrl reads as entity worlds (``minigrid:<id>``)."""


def check_id(env_id: str) -> None:
    """Raise KeyError (with close matches) if Gymnasium has no environment ``env_id``; a
    MiniGrid task is pointed to ``minigrid:`` (its mission text has no feature form here)."""
    if env_id.startswith(MINIGRID_PREFIXES):
        raise KeyError(
            f"gymnasium:{env_id} is a MiniGrid task, which entityrl reads as an entity world "
            f"under the name minigrid:{env_id} (pip install 'entityrl[minigrid]'); for its raw "
            f"image, pass GymnasiumEnvironment(gymnasium.make({env_id!r}), ignore=['mission'])"
        )
    if env_id not in gymnasium.registry:
        close = difflib.get_close_matches(env_id, list(gymnasium.registry), n=3, cutoff=0.6)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise KeyError(f"Gymnasium has no environment {env_id!r}.{hint}")


RESERVED_METRICS = ("episode_return", "episode_length")
"""Episode metrics entityrl computes itself; an ``info`` key of the same name is not forwarded."""


def _is_scalar(value: Any) -> bool:
    return isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating))


def _forwarded(key: str) -> bool:
    """Whether ``info[key]`` may become an episode metric (Gymnasium's ``_key`` masks and
    entityrl's own metrics may not)."""
    return not key.startswith("_") and key not in RESERVED_METRICS


def info_metrics(info: Mapping[str, Any]) -> dict[str, float]:
    """The numeric scalars of one environment's last ``info`` of an episode (``is_success``,
    say), as the episode's metrics; other values (arrays, strings, dicts) are left out."""
    return {k: float(v) for k, v in info.items() if _forwarded(k) and _is_scalar(v)}


def final_info_metrics(
    info: Mapping[str, Any], ended: npt.NDArray[np.int64]
) -> dict[str, npt.NDArray[np.float64]]:
    """:func:`info_metrics` of the episodes a vector environment ended this step (rows
    ``ended``), from its ``final_info``: per key, the values of the episodes that reported it."""
    final = info.get("final_info", {})
    metrics: dict[str, npt.NDArray[np.float64]] = {}
    for key, values in final.items():
        array = np.asarray(values)
        if not _forwarded(key) or array.ndim != 1 or array.dtype.kind not in "biuf":
            continue
        reported = np.asarray(final.get(f"_{key}", np.ones(array.shape[0], np.bool_)))
        rows = ended[reported[ended]]
        if rows.size:
            metrics[key] = array[rows].astype(np.float64)
    return metrics


class GymnasiumEnvironment(Environment):
    """One Gymnasium environment, made from its id (with ``make_kwargs``) or given built.

    ``entities`` names top-level Dict observation keys that hold a set of entities (key ->
    the key of its presence mask, or None), ``ignore`` keys to drop; see
    :mod:`entityrl.interop.gym_spaces` for the whole rule.
    """

    def __init__(
        self,
        env_id: str | gymnasium.Env[Any, Any],
        entities: Mapping[str, str | None] | None = None,
        ignore: Sequence[str] = (),
        **make_kwargs: Any,
    ) -> None:
        if isinstance(env_id, str):
            check_id(env_id)
            self.env = gymnasium.make(env_id, **make_kwargs)
        else:
            self.env = env_id
        name = self.env.spec.id if self.env.spec else type(self.env.unwrapped).__name__
        self.observation_rule = ObservationRule(
            self.env.observation_space, entities, ignore, env_name=name
        )
        self.action_rule = ActionRule(self.env.action_space, env_name=name)
        self._seed: int | None = None
        self._last = np.zeros(len(self.observation_rule.obs_space.global_features), np.float32)

    def obs_space(self) -> ObsSpace:
        return self.observation_rule.obs_space

    def action_space(self) -> dict[str, ActionSpace]:
        return self.action_rule.action_space

    def seed(self, seed: int) -> None:
        super().seed(seed)
        self._seed = seed  # Gymnasium seeds at the next reset

    def reset(self) -> Observation:
        obs, _ = self.env.reset(seed=self._seed)
        self._seed = None
        return self._observe(obs)

    def render(self) -> str:
        """The latest observation's features, by name."""
        names = self.observation_rule.obs_space.global_features
        return "  ".join(f"{n}={v:.3g}" for n, v in zip(names, self._last, strict=True))

    def act(self, actions: Mapping[str, Action]) -> Observation:
        obs, reward, terminated, truncated, info = self.env.step(
            self.action_rule.decode(self.action_rule.values(actions))[0]
        )
        done = bool(terminated or truncated)
        # Both flags: the task ended, so nothing is bootstrapped.
        return self._observe(
            obs,
            reward=float(reward),  # type: ignore[arg-type]
            done=done,
            truncated=bool(truncated and not terminated),
            metrics=info_metrics(info) if done else {},
        )

    def _observe(self, obs: Any, **step: Any) -> Observation:
        rule = self.observation_rule
        self._last = rule.global_features(obs, 1)[0]
        return Observation(
            features={name: rows.data for name, rows in rule.entities(obs, 1).items()},
            global_features=self._last,
            actions={
                name: kind_of(space).mask() for name, space in self.action_rule.action_space.items()
            },
            **step,
        )

    def close(self) -> None:
        self.env.close()


class GymnasiumVecEnv(VecEnv):
    """A Gymnasium vector environment (every copy stepped by Gymnasium) as an entityrl VecEnv.

    The vector environment must reset ended episodes in the same step
    (``vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP}``), as entityrl's batches do:
    ``gymnasium.make_vec(id, n, vectorization_mode="sync", vector_kwargs=...)``. ``seed``
    seeds the first reset. ``entities``/``ignore`` as in :class:`GymnasiumEnvironment`.
    """

    def __init__(
        self,
        env: VectorEnv[Any, Any, Any],
        seed: int | None = None,
        entities: Mapping[str, str | None] | None = None,
        ignore: Sequence[str] = (),
    ) -> None:
        mode = env.metadata.get("autoreset_mode")
        name = env.spec.id if env.spec else type(env).__name__
        if mode != AutoresetMode.SAME_STEP:
            raise ValueError(
                f"{name}: expected a vector environment with autoreset_mode SAME_STEP (make it "
                "with vector_kwargs={'autoreset_mode': AutoresetMode.SAME_STEP}), got "
                f"{mode}"
            )
        self.env = env
        self.num_envs = env.num_envs
        self.seed = seed
        self.observation_rule = ObservationRule(
            env.single_observation_space, entities, ignore, env_name=name
        )
        self.action_rule = ActionRule(env.single_action_space, env_name=name)
        self.obs_space = self.observation_rule.obs_space
        self.action_space = dict(self.action_rule.action_space)
        self.episodes = EpisodeTracker(self.num_envs)
        self._last: VecObs | None = None

    def reset(self) -> VecObs:
        obs, _ = self.env.reset(seed=self.seed)
        self.episodes.reset()
        self._last = self._batch(
            obs, self.num_envs, np.zeros(self.num_envs, np.float32), np.zeros(self.num_envs, bool)
        )
        return self._last

    def act(self, actions: Mapping[str, RaggedArray]) -> VecObs:
        if self._last is None:
            raise RuntimeError("call reset() before act()")
        check_actions(actions, self._last, self.action_space)
        choices = np.concatenate([actions[name].data for name in self.action_space], axis=1)
        obs, reward, terminated, truncated, info = self.env.step(self.action_rule.decode(choices))
        done = np.logical_or(terminated, truncated)
        reward = np.asarray(reward, dtype=np.float32)
        batch = self._batch(obs, self.num_envs, reward, done)
        batch.metrics = self.episodes.step(reward, done)
        batch.metrics.update(final_info_metrics(info, np.flatnonzero(done)))
        cut_off = np.logical_and(truncated, np.logical_not(terminated))
        if cut_off.any():
            rows = np.flatnonzero(cut_off)
            space = self.env.single_observation_space
            finals = concatenate(
                space, [info["final_obs"][i] for i in rows], create_empty_array(space, rows.size)
            )
            batch.truncated = cut_off
            batch.final = self._batch(
                finals, rows.size, np.zeros(rows.size, np.float32), np.ones(rows.size, bool)
            )
        self._last = batch
        return batch

    def _batch(
        self, obs: Any, rows: int, reward: npt.NDArray[np.float32], done: npt.NDArray[np.bool_]
    ) -> VecObs:
        features = self.observation_rule.entities(obs, rows)
        entity_count = sum((f.lengths for f in features.values()), np.zeros(rows, np.int64))
        # A global action is taken by the row's pseudo-entity, whose index is the entity count.
        actors = RaggedArray(entity_count.reshape(-1, 1), np.ones(rows, dtype=np.int64))
        return VecObs(
            features=features,
            global_features=self.observation_rule.global_features(obs, rows),
            action_masks={
                name: kind_of(space).vec_mask(actors) for name, space in self.action_space.items()
            },
            reward=reward,
            done=done,
        )

    def close(self) -> None:
        self.env.close()


@dataclass
class _Step:
    """What one step of the wrapped environment gave, in Gymnasium's terms."""

    batch: VecObs
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]


class _OneEnvironment:
    """An :class:`Environment`, stepped through the batch form the wrapper reads."""

    def __init__(self, env: Environment) -> None:
        self.env = env
        self.obs_space = env.obs_space()
        self.action_space = dict(env.action_space())
        self.batcher = Batcher(self.obs_space, self.action_space)
        self._obs: Observation | None = None

    def seed(self, seed: int) -> None:
        self.env.seed(seed)

    def reset(self) -> VecObs:
        self._obs = self.env.reset()
        return self.batcher.batch([self._obs])

    def act(self, per_row: Mapping[str, RaggedArray]) -> _Step:
        assert self._obs is not None
        (actions,) = self.batcher.unbatch(per_row, [self._obs])
        obs = self._obs = self.env.act(actions)
        truncated = bool(obs.truncated)
        terminated = bool(obs.done) and not truncated
        batch = self.batcher.batch([obs])
        return _Step(batch, float(obs.reward), terminated, truncated, dict(obs.metrics))

    def close(self) -> None:
        self.env.close()


class _OneCopy:
    """The one copy of a :class:`BatchedEnvironment`, stepped without its automatic reset, so
    the step that ends an episode shows that episode's last observation, as Gymnasium expects;
    the next :meth:`reset` starts a new one."""

    def __init__(self, env: BatchedEnvironment) -> None:
        if env.num_envs != 1:
            raise ValueError(
                f"{type(env).__name__}: expected one copy (num_envs=1) to wrap as a Gymnasium "
                f"environment, got num_envs={env.num_envs}"
            )
        self.env = env
        self.obs_space = env.obs_space
        self.action_space = dict(env.action_space)
        self._last: VecObs | None = None

    def seed(self, seed: int) -> None:
        self.env.reseed(seed)

    def reset(self) -> VecObs:
        self._last = self.env.reset()
        return self._last

    def act(self, per_row: Mapping[str, RaggedArray]) -> _Step:
        assert self._last is not None
        check_actions(per_row, self._last, self.action_space)
        # The wrapper builds categorical choices only, which reach the simulation unchanged.
        reward, done = self.env.step(per_row)
        copy = np.zeros(1, dtype=np.int64)
        info: dict[str, Any] = {}
        truncated = False
        if done[0]:
            info = {k: float(v[0]) for k, v in self.env.episode_metrics(copy).items()}
            cut_off = self.env.truncated(copy)
            truncated = cut_off is not None and bool(cut_off[0])
        self._last = self.env.observe()
        terminated = bool(done[0]) and not truncated
        return _Step(self._last, float(reward[0]), terminated, truncated, info)

    def close(self) -> None:
        self.env.close()


OBSERVATIONS = ("dict", "global")
"""The forms of :class:`EntityGymnasiumEnv`'s observation."""


Bounds = tuple[float, float]
"""The (low, high) range of observed features."""


class EntityGymnasiumEnv(gymnasium.Env[Any, Any]):
    """An entityrl environment as a Gymnasium environment: an :class:`Environment`, or a
    :class:`BatchedEnvironment` of one copy (``num_envs=1``), such as the survival world.

    Observation (``observation="dict"``): a Dict with, per entity type ``T``, ``T`` (a Box of
    ``max_entities[T]`` rows, zero past the entities present) and ``T_mask`` (MultiBinary: which
    rows are present), and ``global`` (the global features, when there are any). With
    ``observation="global"``, a plain Box of the global features alone, for environments whose
    observation is one fixed-size vector there (the survival world's ``raw`` and fixed-size
    observations, where the only entity is the actor): the entities are not observed and
    ``max_entities`` is not needed. The Boxes are unbounded unless ``bounds`` gives the
    features' range: one ``(low, high)`` for all, or one per entity type and ``"global"``
    (an observation outside its range raises ValueError).

    Actions whose kind picks from a fixed list of choices
    (:meth:`~entityrl.env.actions.ActionKind.choices`) have one component per actor: a global
    one (global categorical) one component, one taken by entities (categorical) one per entity
    row (all types' rows in order; rows that do not act this step are ignored). One global
    action is a Discrete; anything else one MultiDiscrete holding every action's components,
    in the order of the environment's action space, which trainers such as Stable-Baselines3
    train as they are. An illegal choice is replaced by the first legal one. The legal choices
    are in the Dict, ``<action>_mask`` (MultiBinary (rows, choices), or (choices,) for a global
    action), and, flattened in the order of the action's components, from
    :meth:`action_masks` (sb3-contrib's MaskablePPO calls it). Other kinds (select-entity,
    continuous) have no counterpart here yet and are refused, as are entity actions with the
    ``global`` observation.
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 (Gymnasium's convention)

    def __init__(
        self,
        env: Environment | BatchedEnvironment,
        max_entities: int | Mapping[str, int] | None = None,
        *,
        observation: str = "dict",
        bounds: Bounds | Mapping[str, Bounds] | None = None,
    ) -> None:
        self.env = env
        self.name = type(env).__name__
        if observation not in OBSERVATIONS:
            raise ValueError(
                f"{self.name}: unknown observation {observation!r}; expected one of "
                f"{', '.join(OBSERVATIONS)}"
            )
        self.source = _OneCopy(env) if isinstance(env, BatchedEnvironment) else _OneEnvironment(env)
        space = self.source.obs_space
        self.flat = observation == "global"
        self.entity_types = [] if self.flat else list(space.entity_names)
        if max_entities is None and self.entity_types:
            raise ValueError(
                f"{self.name}: max_entities is needed for the dict observation of entity types "
                f"{self.entity_types} (or observation='global' for the global features alone)"
            )
        limits = (
            dict(max_entities)
            if isinstance(max_entities, Mapping)
            else dict.fromkeys(self.entity_types, max_entities or 0)
        )
        missing = [t for t in self.entity_types if t not in limits]
        if missing:
            raise ValueError(f"{self.name}: max_entities has no limit for entity types {missing}")
        self.max_entities = {t: int(limits[t]) for t in self.entity_types}
        self.offsets = dict(
            zip(self.entity_types, np.cumsum([0, *self.max_entities.values()])[:-1], strict=True)
        )
        self.slots = sum(self.max_entities.values())
        self.bounds = self._bounds(bounds, [*self.entity_types, "global"])
        self.env_actions = self.source.action_space
        observation_spaces: dict[str, spaces.Space[Any]] = {}
        for name in self.entity_types:
            rows = (self.max_entities[name], len(space.entities[name].features))
            observation_spaces[name] = spaces.Box(*self.bounds[name], rows, np.float32)
            observation_spaces[f"{name}_mask"] = spaces.MultiBinary(self.max_entities[name])
        globals_box = spaces.Box(*self.bounds["global"], (len(space.global_features),), np.float32)
        if space.global_features:
            observation_spaces["global"] = globals_box
        # Per action, how many components of the Gymnasium action it takes, and its choices.
        self.components: dict[str, int] = {}
        choice_counts: list[int] = []
        for name, action_space in self.env_actions.items():
            kind = kind_of(action_space)
            choices = kind.choices(action_space)
            if choices is not None and kind.global_actor:
                self.components[name] = 1
                observation_spaces[f"{name}_mask"] = spaces.MultiBinary(len(choices))
            elif choices is not None and not self.flat:
                self.components[name] = self.slots
                observation_spaces[f"{name}_mask"] = spaces.MultiBinary((self.slots, len(choices)))
            else:
                raise UnsupportedSpaceError(
                    f"{self.name}: action {name!r}: {type(action_space).__name__} has no "
                    f"Gymnasium counterpart in this wrapper with observation={observation!r} "
                    "(actions that pick from a fixed list of choices do: global ones such as "
                    "global categorical actions, and with 'dict' those of entities, such as "
                    "categorical actions)"
                )
            choice_counts += [len(choices)] * self.components[name]
        self.observation_space: spaces.Space[Any] = (
            globals_box if self.flat else spaces.Dict(observation_spaces)
        )
        self.action_space: spaces.Space[Any] = (
            spaces.Discrete(choice_counts[0])
            if len(choice_counts) == 1
            else spaces.MultiDiscrete(choice_counts)
        )
        self._batch: VecObs | None = None

    def _bounds(
        self, bounds: Bounds | Mapping[str, Bounds] | None, groups: list[str]
    ) -> dict[str, Bounds]:
        """Per entity type and ``global``, the range of its features."""
        if bounds is None or not isinstance(bounds, Mapping):
            return dict.fromkeys(groups, bounds or (-np.inf, np.inf))
        unknown = sorted(set(bounds) - set(groups))
        if unknown:
            raise ValueError(
                f"{self.name}: bounds for unknown feature groups {unknown}; expected entity "
                f"types or 'global': {groups}"
            )
        return {group: bounds.get(group, (-np.inf, np.inf)) for group in groups}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:
            self.source.seed(seed)
        return self._observe(self.source.reset()), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        if self._batch is None:
            raise RuntimeError(f"{self.name}: call reset() before step()")
        values = np.asarray(action, dtype=np.int64).reshape(-1)
        expected = sum(self.components.values())
        if values.size != expected:
            raise ValueError(
                f"{self.name}: expected an action of {expected} components "
                f"({self.action_space}), got {values.size}"
            )
        ends = np.cumsum(list(self.components.values()))
        per_row = {
            name: self._choices(name, part)
            for name, part in zip(self.env_actions, np.split(values, ends[:-1]), strict=True)
        }
        step = self.source.act(per_row)
        return self._observe(step.batch), step.reward, step.terminated, step.truncated, step.info

    def action_masks(self) -> npt.NDArray[np.bool_]:
        """The legal choices of every component of the action, flattened in the order of
        :attr:`action_space` (what MaskablePPO expects). A row that does not act this step
        may take only its first choice, which is ignored."""
        if self._batch is None:
            raise RuntimeError(f"{self.name}: call reset() before action_masks()")
        masks = []
        for name in self.env_actions:
            legal = self._legal(name).reshape(self.components[name], -1).astype(np.bool_)
            legal[~legal.any(axis=1), 0] = True
            masks.append(legal.reshape(-1))
        return np.concatenate(masks)

    def _choices(self, name: str, values: npt.NDArray[np.int64]) -> RaggedArray:
        """The choice of every actor of action ``name`` this step, read from the padded slots."""
        offered = self._options(name)
        actors = np.asarray(offered.actors, dtype=np.int64)
        if kind_of(self.env_actions[name]).global_actor:
            picked = np.repeat(values[:1], actors.size)
        else:
            picked = values[self._slot_of(actors)]
        legal = offered.legal
        if not legal.all():  # (a pick out of range is left for the VecEnv's check to name)
            illegal = ~legal[np.arange(picked.size), picked]
            picked[illegal] = legal[illegal].argmax(axis=1)
        lengths = np.array([actors.size], dtype=np.int64)  # the batch's one row
        return RaggedArray(picked.astype(np.int64).reshape(-1, 1), lengths)

    def _options(self, name: str) -> Options:
        """What the actors of action ``name`` may choose this step."""
        assert self._batch is not None
        space = self.env_actions[name]
        return kind_of(space).options(space, self._batch.action_masks[name], 0)

    def _slot_of(self, entity_index: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The padded slot of each entity (entities indexed in the row, types in order)."""
        assert self._batch is not None
        counts = np.array([self._batch.features[t].lengths[0] for t in self.entity_types])
        starts = np.cumsum([0, *counts])[:-1]
        type_index = np.searchsorted(starts, entity_index, side="right") - 1
        offsets = np.array(list(self.offsets.values()), dtype=np.int64)
        return offsets[type_index] + entity_index - starts[type_index]

    def _check_bounds(self, group: str, values: npt.NDArray[np.float32]) -> None:
        low, high = self.bounds[group]
        if values.size and (values.min() < low or values.max() > high):
            raise ValueError(
                f"{self.name}: {group} features from {values.min():.4g} to {values.max():.4g}, "
                f"outside the bounds [{low}, {high}] given for them"
            )

    def _observe(self, batch: VecObs) -> Any:
        self._batch = batch
        self._check_bounds("global", batch.global_features)
        if self.flat:
            return batch.global_features[0]
        out: dict[str, Any] = {}
        for name in self.entity_types:
            rows = batch.features[name].data
            limit = self.max_entities[name]
            if rows.shape[0] > limit:
                raise ValueError(
                    f"{self.name}: {rows.shape[0]} entities of type {name!r} in one "
                    f"observation, more than max_entities={limit}"
                )
            self._check_bounds(name, rows)
            padded = np.zeros((limit, rows.shape[1]), dtype=np.float32)
            padded[: rows.shape[0]] = rows
            present = np.zeros(limit, dtype=np.int8)
            present[: rows.shape[0]] = 1
            out[name], out[f"{name}_mask"] = padded, present
        if batch.global_features.shape[1]:
            out["global"] = batch.global_features[0]
        for name in self.env_actions:
            out[f"{name}_mask"] = self._legal(name)
        return out

    def _legal(self, name: str) -> npt.NDArray[np.int8]:
        offered = self._options(name)
        choices = len(offered.labels)
        if kind_of(self.env_actions[name]).global_actor:
            legal = offered.legal[0] if offered.actors else np.ones(choices, np.bool_)
            return legal.astype(np.int8)
        out = np.zeros((self.slots, choices), dtype=np.int8)
        out[self._slot_of(np.asarray(offered.actors, dtype=np.int64))] = offered.legal
        return out

    def close(self) -> None:
        self.source.close()


GYMNASIUM_NAMESPACE = "entityrl"
"""Built-in environments are ``gymnasium.make("entityrl/<name>-v0", max_entities=...)``."""


def make_gymnasium(
    name: str,
    max_entities: int | Mapping[str, int] | None = None,
    *,
    observation: str = "dict",
    bounds: Bounds | Mapping[str, Bounds] | None = None,
    **env_kwargs: Any,
) -> EntityGymnasiumEnv:
    """The registered entityrl environment ``name`` (built with ``env_kwargs``) as a Gymnasium
    environment; what ``gymnasium.make("entityrl/<name>-v0", ...)`` calls."""
    from entityrl.envs import lookup, make, make_vec

    if issubclass(lookup(name), BatchedEnvironment):
        env: Environment | BatchedEnvironment = make_vec(name, 1, **env_kwargs)  # type: ignore[assignment]
    else:
        env = make(name, **env_kwargs)
    return EntityGymnasiumEnv(env, max_entities, observation=observation, bounds=bounds)


def register_environments() -> None:
    """Register every single-player environment of entityrl's registry with Gymnasium as
    ``entityrl/<name>-v0`` (those whose actions the wrapper cannot express fail in
    ``gymnasium.make``, naming the action)."""
    from entityrl.envs import REGISTRY

    for name, cls in REGISTRY.items():
        env_id = f"{GYMNASIUM_NAMESPACE}/{name}-v0"
        if issubclass(cls, (Environment, BatchedEnvironment)) and env_id not in gymnasium.registry:
            gymnasium.register(env_id, entry_point=make_gymnasium, kwargs={"name": name})


register_environments()

__all__ = [
    "EntityGymnasiumEnv",
    "GymnasiumEnvironment",
    "GymnasiumVecEnv",
    "UnsupportedSpaceError",
    "check_id",
    "final_info_metrics",
    "info_metrics",
    "make_gymnasium",
    "register_environments",
]

ADAPTER = GymnasiumEnvironment
"""What ``gymnasium:<id>`` names in entityrl's registry."""
