"""Observation stacking: each entity's last ``k`` feature vectors, matched by entity id.

Frame stacking gives a memoryless policy velocities and other differences over time. With
entities the frames cannot simply be laid side by side: entities appear, vanish and change
places within a row from step to step, so each entity's history is found by its id.

:class:`StackedVecEnv` wraps a vectorized environment. Every feature ``x`` of an entity type
(and every global feature) becomes ``k`` features ``x, x@t-1, ..., x@t-(k-1)``: the current
value first, then the values of the same entity (same id, same row) on earlier steps.

* **An entity that appears** (no entity of its id and type in that row on the previous step,
  including every entity of an episode's first observation) has no history: its earlier
  values repeat its current one, as if it had been standing still. Zeros would read as a jump
  from wherever zero lies (the origin, for positions), a large false velocity; repetition
  gives a difference of zero, the least informative history.
* **An entity that vanishes** takes its history with it: an id absent for one step starts
  over if it returns.
* **Episode ends** clear the history of their row: the first observation of the next episode
  starts fresh, while the observation that ended a truncated episode (``VecObs.final``) is
  stacked with the history of the episode it ends.
* **Multi-player games** (:class:`StackedPlayerVecEnv`): each (game, player) row keeps its own
  history over the game's steps, whether or not its player had a move on each of them (in a
  turn-based game, the steps it waited are in its history). A player that joins a game under
  way starts fresh, as at an episode's start.

Entities are matched by the int64 keys of :attr:`VecObs.ids` (which the batcher of a
:class:`~entityrl.env.SerialVecEnv` fills when asked); environments that give none, such as
natively batched ones, are matched by position within their type, the default ids
``(type, i)``. Ids must be unique within a type and row. All matching is vectorized: the
previous step's entities are sorted by ``(row, key)`` once and the current ones are found by
binary search, with no Python loop over rows or entities.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from entityrl.env import plain_state
from entityrl.env.multiplayer_vec import MultiPlayerVecEnv
from entityrl.env.observation import Observation
from entityrl.env.spaces import Entity, ObsSpace
from entityrl.env.vec_env import VecEnv
from entityrl.env.vec_obs import VecObs
from entityrl.ragged import RaggedArray


def stacked_names(names: tuple[str, ...] | list[str], k: int) -> list[str]:
    """``names`` followed by ``name@t-1`` ... ``name@t-(k-1)``."""
    return [*names, *(f"{name}@t-{lag}" for lag in range(1, k) for name in names)]


def stacked_space(space: ObsSpace, k: int) -> ObsSpace:
    """The observation space with every feature stacked ``k`` deep."""
    return ObsSpace(
        entities={
            name: Entity(stacked_names(list(entity.features), k))
            for name, entity in space.entities.items()
        },
        global_features=stacked_names(list(space.global_features), k),
        goal_features=space.goal_features,  # the current step's goal
        images=space.images,  # the current step's images
    )


def unstacked_space(space: ObsSpace, k: int) -> ObsSpace:
    """The observation space that :func:`stacked_space` stacks ``k`` deep into ``space``;
    ValueError naming the entity type whose features are not stacked so."""
    entities = {}
    for name, entity in space.entities.items():
        entities[name] = Entity(_unstacked_names(f"entity type {name!r}", list(entity.features), k))
    globals_ = _unstacked_names("the global features", list(space.global_features), k)
    return ObsSpace(
        entities=entities,
        global_features=globals_,
        goal_features=space.goal_features,
        images=space.images,
    )


def _unstacked_names(what: str, names: list[str], k: int) -> list[str]:
    current = names[: len(names) // k]
    if stacked_names(current, k) != names:
        raise ValueError(
            f"{what}: expected features stacked {k} deep (x, y, x@t-1, y@t-1, ...), got {names}"
        )
    return current


@dataclass
class _History:
    """What the next step is stacked onto: the latest stacked observation's features, and the
    keys of its entities."""

    keys: dict[str, RaggedArray]
    features: dict[str, RaggedArray]
    global_features: npt.NDArray[np.float32]

    def take(self, rows: npt.NDArray[np.int64]) -> _History:
        return _History(
            {name: keys.take(rows) for name, keys in self.keys.items()},
            {name: feats.take(rows) for name, feats in self.features.items()},
            self.global_features[rows],
        )


StackHistory = _History
"""What :func:`stack_onto` stacks the next step onto (for code that stacks by itself)."""


class StackedVecEnv(VecEnv):
    """``env`` with every entity's and the global features stacked ``k`` steps deep."""

    def __init__(self, env: VecEnv, k: int) -> None:
        if not isinstance(k, int) or k < 2:
            raise ValueError(f"StackedVecEnv: k (steps stacked) must be an integer >= 2, got {k!r}")
        self.env = env
        self.k = k
        self.num_envs = env.num_envs
        self.obs_space = stacked_space(env.obs_space, k)
        self.action_space = env.action_space
        batcher = getattr(env, "batcher", None)
        if batcher is not None:
            batcher.entity_keys = True
        self._history: _History | None = None
        self._last: VecObs | None = None

    # ------------------------------------------------------------------ VecEnv
    def reset(self) -> VecObs:
        obs = self.env.reset()
        return self._stack(obs, fresh=np.ones(obs.num_rows, dtype=np.bool_))

    def act(self, actions: Mapping[str, RaggedArray]) -> VecObs:
        obs = self.env.act(actions)
        if obs.final is not None and obs.truncated is not None and self._history is not None:
            ended = self._history.take(np.flatnonzero(obs.truncated))
            obs.final, _ = stack_onto(
                obs.final, ended, np.zeros(obs.final.num_rows, np.bool_), self.k
            )
        return self._stack(obs, fresh=obs.done)

    @property
    def observation(self) -> VecObs:
        """The latest stacked batch (from reset, act or set_state)."""
        if self._last is None:
            raise RuntimeError("call reset() before reading the observation")
        return self._last

    _STATE = ("_history", "_last")

    def get_state(self, allow_pickle: bool = False) -> Any:
        return {
            "env": self.env.get_state(allow_pickle),
            "stacks": plain_state.capture_attributes(self, self._STATE, allow_pickle=allow_pickle),
        }

    def set_state(self, state: Any, allow_pickle: bool = False) -> VecObs:
        if not isinstance(state, dict) or set(state) != {"env", "stacks"}:
            raise plain_state.StateError(
                f"not a state of this version's {type(self).__name__}: expected a dict of 'env' "
                f"and 'stacks', got {type(state).__name__}"
            )
        self.env.set_state(state["env"], allow_pickle)
        plain_state.restore_attributes(
            self, self._STATE, state["stacks"], allow_pickle=allow_pickle
        )
        if self._last is None:
            raise ValueError("the saved state was taken before reset()")
        return self._last

    def render(self, index: int = 0) -> str:
        return self.env.render(index)

    def close(self) -> None:
        self.env.close()

    # ------------------------------------------------------------------ stacking
    def _stack(self, obs: VecObs, fresh: npt.NDArray[np.bool_]) -> VecObs:
        self._last, self._history = stack_onto(obs, self._history, fresh, self.k)
        return self._last


class StackedPlayerVecEnv(StackedVecEnv, MultiPlayerVecEnv):
    """A batch of multi-player games with every row's features stacked ``k`` deep (see the
    module docstring); its seats are the wrapped batch's. :attr:`observations` (what scripted
    players read) are the games' own observations, not stacked: a scripted player is written
    for the game as it is."""

    def __init__(self, env: MultiPlayerVecEnv, k: int) -> None:
        super().__init__(env, k)
        self.games_env = env
        self.name = env.name
        self.players = env.players
        self.num_games = env.num_games
        self.group_names = env.group_names
        self.groups = env.groups

    @property
    def observations(self) -> list[Observation]:
        return self.games_env.observations

    def _stack(self, obs: VecObs, fresh: npt.NDArray[np.bool_]) -> VecObs:
        # A player that joins a game under way has no history in it: what its row showed
        # before (nothing, as it was not in the game) must not read as its past.
        if self._last is not None and obs.active is not None and self._last.active is not None:
            fresh = fresh | (obs.active & ~self._last.active)
        return super()._stack(obs, fresh)


def stack(env: VecEnv, k: int) -> VecEnv:
    """``env`` stacked ``k`` deep: a :class:`StackedPlayerVecEnv` for a batch of multi-player
    games, else a :class:`StackedVecEnv`."""
    if isinstance(env, MultiPlayerVecEnv):
        return StackedPlayerVecEnv(env, k)
    return StackedVecEnv(env, k)


def stack_onto(
    obs: VecObs, history: _History | None, fresh: npt.NDArray[np.bool_], k: int
) -> tuple[VecObs, _History]:
    """``obs`` stacked ``k`` deep onto ``history`` (rows marked ``fresh`` start over; None: all
    rows do), and the history the next step stacks onto. ``obs`` needs its entities' keys
    (:attr:`VecObs.ids`, from a batcher with ``entity_keys``) unless matched by position."""
    if history is None:
        fresh = np.ones(obs.num_rows, dtype=np.bool_)
    keys = {
        name: obs.ids.get(name, RaggedArray(feats.position_in_row().reshape(-1, 1), feats.lengths))
        for name, feats in obs.features.items()
    }
    features = {
        name: RaggedArray(
            _stack_entities(
                feats,
                keys[name].data[:, 0],
                None if history is None else history.keys[name],
                None if history is None else history.features[name].data,
                fresh,
                k,
            ),
            feats.lengths,
        )
        for name, feats in obs.features.items()
    }
    global_features = _repeat(obs.global_features, k)
    if history is not None:
        width = obs.global_features.shape[1]
        kept = ~fresh
        global_features[kept, width:] = history.global_features[kept, : (k - 1) * width]
    # Masks, rewards and metrics are the inner batch's; only the features grow.
    stacked = dataclasses.replace(obs, features=features, global_features=global_features, ids={})
    return stacked, _History(keys, features, global_features)


def _repeat(values: npt.NDArray[np.float32], k: int) -> npt.NDArray[np.float32]:
    """Each row of ``values`` followed by ``k - 1`` copies of itself (no history yet)."""
    return np.tile(values, (1, k))


def _stack_entities(
    feats: RaggedArray,
    keys: npt.NDArray[np.int64],
    previous_keys: RaggedArray | None,
    previous: npt.NDArray[np.float32] | None,
    fresh: npt.NDArray[np.bool_],
    k: int,
) -> npt.NDArray[np.float32]:
    """The stacked features of one entity type: each entity's current values, then the
    previous step's stacked values of the entity with its key in its row, shifted by one step
    (the oldest dropped); entities without one repeat their current values."""
    current = feats.data
    stacked = _repeat(current, k)
    if previous_keys is None or previous is None or not previous_keys.items or not keys.size:
        return stacked
    rows = feats.row_index()
    previous_rows = previous_keys.row_index()
    # Dense ranks of all keys, so that (row, key) packs into one sortable int64.
    _, rank = np.unique(np.concatenate([previous_keys.data[:, 0], keys]), return_inverse=True)
    span = int(rank.max()) + 1
    n_previous = previous_rows.shape[0]
    previous_code = previous_rows * span + rank[:n_previous]
    code = rows * span + rank[n_previous:]
    order = np.argsort(previous_code, kind="stable")
    sorted_codes = previous_code[order]
    position = np.minimum(np.searchsorted(sorted_codes, code), n_previous - 1)
    found = (sorted_codes[position] == code) & ~fresh[rows]
    width = current.shape[1]
    stacked[found, width:] = previous[order[position[found]], : (k - 1) * width]
    return stacked


def stacking(k: int) -> Callable[[VecEnv], VecEnv] | None:
    """The (picklable) wrapper that stacks ``k`` steps, None for ``k == 1``."""
    return None if k == 1 else functools.partial(stack, k=k)
