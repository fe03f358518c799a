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
from entityrl.env.vec_env import CUT_OFF_METRIC, check_actions
from entityrl.interop.gym_spaces import ActionRule, ObservationRule, UnsupportedSpaceError
from entityrl.interop.padded import Bounds, PaddedLayout, make_gymnasium_vector
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


RESERVED_METRICS = ("episode_return", "episode_length", CUT_OFF_METRIC)
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
            images={name: pixels[0] for name, pixels in rule.images(obs, 1).items()},
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
            images=self.observation_rule.images(obs, rows),
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
    :meth:`action_masks` (sb3-contrib's MaskablePPO calls it). A select-entity action is one
    component per entity row too, whose choices are the entity rows: each actor picks the row
    of the candidate it selects (``<action>_mask``: (rows, rows), which candidates each actor
    may select; a row that holds no legal candidate is taken as the first legal one).
    Continuous actions have no counterpart here yet and are refused, as are entity actions
    with the ``global`` observation.
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
        self.source = _OneCopy(env) if isinstance(env, BatchedEnvironment) else _OneEnvironment(env)
        self.layout = PaddedLayout(self.name, self.source.obs_space, self.source.action_space,
                                   max_entities, observation, bounds)  # fmt: skip
        self.observation_space: spaces.Space[Any] = self.layout.observation_space
        self.action_space: spaces.Space[Any] = self.layout.action_space
        self._batch: VecObs | None = None

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
        step = self.source.act(self.layout.actions(self._batch, np.reshape(action, (1, -1))))
        return self._observe(step.batch), step.reward, step.terminated, step.truncated, step.info

    def action_masks(self) -> npt.NDArray[np.bool_]:
        """The legal choices of every component of the action, flattened in the order of
        :attr:`action_space` (what MaskablePPO expects). A row that does not act this step
        may take only its first choice, which is ignored."""
        if self._batch is None:
            raise RuntimeError(f"{self.name}: call reset() before action_masks()")
        return self.layout.action_masks(self._batch)[0]

    def _observe(self, batch: VecObs) -> Any:
        self._batch = batch
        stacked = self.layout.observe(batch)
        return stacked[0] if self.layout.flat else {k: v[0] for k, v in stacked.items()}

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
    env_kwargs: Mapping[str, Any] | None = None,
    **more_env_kwargs: Any,
) -> EntityGymnasiumEnv:
    """The registered entityrl environment ``name`` as a Gymnasium environment; what
    ``gymnasium.make("entityrl/<name>-v0", ...)`` calls. The environment's constructor
    arguments are the other keyword arguments, and ``env_kwargs`` for those whose names this
    function takes itself (the survival world's ``observation``, say)."""
    from entityrl.envs import lookup, make, make_vec

    kwargs = {**(env_kwargs or {}), **more_env_kwargs}
    if issubclass(lookup(name), BatchedEnvironment):
        env: Environment | BatchedEnvironment = make_vec(name, 1, **kwargs)  # type: ignore[assignment]
    else:
        env = make(name, **kwargs)
    return EntityGymnasiumEnv(env, max_entities, observation=observation, bounds=bounds)


def register_environments() -> None:
    """Register every single-player environment of entityrl's registry with Gymnasium as
    ``entityrl/<name>-v0`` (those whose actions the wrapper cannot express fail in
    ``gymnasium.make``, naming the action)."""
    from entityrl.envs import REGISTRY

    for name, cls in REGISTRY.items():
        env_id = f"{GYMNASIUM_NAMESPACE}/{name}-v0"
        if issubclass(cls, (Environment, BatchedEnvironment)) and env_id not in gymnasium.registry:
            gymnasium.register(
                env_id,
                entry_point=make_gymnasium,
                vector_entry_point=make_gymnasium_vector,
                kwargs={"name": name},
            )


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
    "make_gymnasium_vector",
    "register_environments",
]

ADAPTER = GymnasiumEnvironment
"""What ``gymnasium:<id>`` names in entityrl's registry."""
