"""entityrl observations and actions as fixed-size Gymnasium arrays, for one environment or a
batch of them.

:class:`PaddedLayout` is the rule (see :class:`~entityrl.interop.gymnasium.EntityGymnasiumEnv`
for what the spaces hold): every method takes a batch (:class:`~entityrl.env.VecObs`) of any
number of rows and answers for all of them at once, with numpy array operations, so a batch of
many copies costs about what one costs in Python overhead.

:class:`EntityGymnasiumVectorEnv` is a Gymnasium vector environment over an entityrl
:class:`~entityrl.env.VecEnv` (a natively batched simulator such as the survival world keeps
its batched speed): ``gymnasium.make_vec("entityrl/<name>-v0", num_envs=64,
vectorization_mode="vector_entry_point", max_entities=...)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import gymnasium
import numpy as np
import numpy.typing as npt
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from entityrl.env import ActionSpace, ObsSpace, VecEnv, VecObs
from entityrl.env.actions import kind_of
from entityrl.env.spaces import SelectEntityActionSpace
from entityrl.env.vec_obs import VecCategoricalMask, VecSelectEntityMask
from entityrl.interop.gym_spaces import UnsupportedSpaceError
from entityrl.ragged import RaggedArray

OBSERVATIONS = ("dict", "global")
"""The forms of the observation: a Dict of padded entities, masks and global features, or
the global features alone."""

Bounds = tuple[float, float]
"""The (low, high) range of observed features."""


class PaddedLayout:
    """How an entityrl environment's observations and actions map to fixed-size Gymnasium
    spaces: ``observation_space`` and ``action_space`` for one environment, and the
    conversions of a batch's rows."""

    def __init__(
        self,
        name: str,
        obs_space: ObsSpace,
        action_space: Mapping[str, ActionSpace],
        max_entities: int | Mapping[str, int] | None = None,
        observation: str = "dict",
        bounds: Bounds | Mapping[str, Bounds] | None = None,
    ) -> None:
        self.name = name
        if observation not in OBSERVATIONS:
            raise ValueError(
                f"{name}: unknown observation {observation!r}; expected one of "
                f"{', '.join(OBSERVATIONS)}"
            )
        if obs_space.images:
            raise ValueError(
                f"{name}: observations with images ({', '.join(map(repr, obs_space.images))}) "
                "cannot be offered to Gymnasium yet; expected an observation space of entities "
                "and global features only"
            )
        self.flat = observation == "global"
        self.entity_types = [] if self.flat else list(obs_space.entity_names)
        if max_entities is None and self.entity_types:
            raise ValueError(
                f"{name}: max_entities is needed for the dict observation of entity types "
                f"{self.entity_types} (or observation='global' for the global features alone)"
            )
        limits = (
            dict(max_entities)
            if isinstance(max_entities, Mapping)
            else dict.fromkeys(self.entity_types, max_entities or 0)
        )
        missing = [t for t in self.entity_types if t not in limits]
        if missing:
            raise ValueError(f"{name}: max_entities has no limit for entity types {missing}")
        self.max_entities = {t: int(limits[t]) for t in self.entity_types}
        self.type_offsets = np.cumsum([0, *self.max_entities.values()])[:-1].astype(np.int64)
        self.slots = sum(self.max_entities.values())
        self.bounds = self._bounds(bounds, [*self.entity_types, "global"])
        self.env_actions = dict(action_space)
        observation_spaces: dict[str, spaces.Space[Any]] = {}
        for entity in self.entity_types:
            rows = (self.max_entities[entity], len(obs_space.entities[entity].features))
            observation_spaces[entity] = spaces.Box(*self.bounds[entity], rows, np.float32)
            observation_spaces[f"{entity}_mask"] = spaces.MultiBinary(self.max_entities[entity])
        globals_box = spaces.Box(
            *self.bounds["global"], (len(obs_space.global_features),), np.float32
        )
        if obs_space.global_features:
            observation_spaces["global"] = globals_box
        # Per action, how many components of the Gymnasium action it takes, its choices, and
        # whether one global actor takes it.
        self.components: dict[str, int] = {}
        self.choices: dict[str, int] = {}
        self.global_actor: dict[str, bool] = {}
        choice_counts: list[int] = []
        for action, space in self.env_actions.items():
            kind = kind_of(space)
            choices = kind.choices(space)
            if isinstance(space, SelectEntityActionSpace) and not self.flat:
                # Each actor's slot picks a slot: the entity there, among the legal candidates.
                choices = [f"slot {i}" for i in range(self.slots)]
            if choices is not None and kind.global_actor:
                self.components[action] = 1
                observation_spaces[f"{action}_mask"] = spaces.MultiBinary(len(choices))
            elif choices is not None and not self.flat:
                self.components[action] = self.slots
                observation_spaces[f"{action}_mask"] = spaces.MultiBinary(
                    (self.slots, len(choices))
                )
            else:
                raise UnsupportedSpaceError(
                    f"{name}: action {action!r}: {type(space).__name__} has no Gymnasium "
                    f"counterpart in this wrapper with observation={observation!r} (actions "
                    "that pick from a fixed list of choices do: global ones such as global "
                    "categorical actions, and with 'dict' those of entities, such as "
                    "categorical and select-entity actions)"
                )
            self.choices[action] = len(choices)
            self.global_actor[action] = kind.global_actor
            choice_counts += [len(choices)] * self.components[action]
        self.observation_space: spaces.Space[Any] = (
            globals_box if self.flat else spaces.Dict(observation_spaces)
        )
        self.action_space: spaces.Space[Any] = (
            spaces.Discrete(choice_counts[0])
            if len(choice_counts) == 1
            else spaces.MultiDiscrete(choice_counts)
        )

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

    # ------------------------------------------------------------------ observations
    def observe(self, batch: VecObs) -> Any:
        """Each row's observation, stacked (a leading axis of the batch's rows)."""
        self._check_bounds("global", batch.global_features)
        if self.flat:
            return batch.global_features
        rows = batch.num_rows
        out: dict[str, Any] = {}
        for entity in self.entity_types:
            feats = batch.features[entity]
            limit = self.max_entities[entity]
            if feats.items and feats.lengths.max() > limit:
                raise ValueError(
                    f"{self.name}: {int(feats.lengths.max())} entities of type {entity!r} in "
                    f"one observation, more than max_entities={limit}"
                )
            self._check_bounds(entity, feats.data)
            padded = np.zeros((rows, limit, feats.data.shape[1]), dtype=np.float32)
            present = np.zeros((rows, limit), dtype=np.int8)
            where = (feats.row_index(), feats.position_in_row())
            padded[where] = feats.data
            present[where] = 1
            visible = batch.visible.get(entity)
            if visible is not None:
                # Entities hidden from the policy (Observation.visible) are left out of what it
                # sees, as entityrl's own policy leaves them out of its attention.
                hidden = ~visible.data[:, 0].astype(np.bool_)
                padded[where[0][hidden], where[1][hidden]] = 0
                present[where[0][hidden], where[1][hidden]] = 0
            out[entity], out[f"{entity}_mask"] = padded, present
        if batch.global_features.shape[1]:
            out["global"] = batch.global_features
        for action in self.env_actions:
            out[f"{action}_mask"] = self.legal(batch, action)
        return out

    def _check_bounds(self, group: str, values: npt.NDArray[np.float32]) -> None:
        low, high = self.bounds[group]
        if values.size and (values.min() < low or values.max() > high):
            raise ValueError(
                f"{self.name}: {group} features from {values.min():.4g} to {values.max():.4g}, "
                f"outside the bounds [{low}, {high}] given for them"
            )

    # ------------------------------------------------------------------ actions
    def _actors(
        self, batch: VecObs, action: str
    ) -> tuple[
        npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.bool_], npt.NDArray[np.int64]
    ]:
        """Every actor of an action of fixed choices: its row, its entity index in the row,
        its legal choices (actors, choices), and the number of actors per row. Built-in masks
        are read whole; another kind's (a registered one) row by row through its ``options``."""
        mask = batch.action_masks[action]
        if isinstance(mask, VecCategoricalMask):
            legal = (
                mask.mask.data.astype(np.bool_)
                if mask.mask is not None
                else np.ones((mask.actors.items, self.choices[action]), dtype=np.bool_)
            )
            return mask.actors.row_index(), mask.actors.data[:, 0], legal, mask.actors.lengths
        space = self.env_actions[action]
        options = [kind_of(space).options(space, mask, row) for row in range(batch.num_rows)]
        lengths = np.array([len(o.actors) for o in options], dtype=np.int64)
        entities = np.array([a for o in options for a in o.actors], dtype=np.int64)
        legal = np.concatenate([np.asarray(o.legal, np.bool_).reshape(-1, self.choices[action])
                                for o in options])  # fmt: skip
        return np.repeat(np.arange(batch.num_rows), lengths), entities, legal, lengths

    def _pairs(self, batch: VecObs, mask: VecSelectEntityMask) -> tuple[npt.NDArray[np.int64], ...]:
        """Every (actor, candidate) pair of a select-entity action, actor-major as its mask's
        flags: the pair's row, its actor's number among all actors, the candidate's position
        among its row's candidates, the actor's slot and the candidate's slot."""
        actor_rows = mask.actors.row_index()
        per_actor = mask.actees.lengths[actor_rows]  # each actor's candidates
        actor = np.repeat(np.arange(mask.actors.items), per_actor)
        rows = actor_rows[actor]
        position = np.arange(per_actor.sum()) - np.repeat(
            np.cumsum(per_actor) - per_actor, per_actor
        )
        actee = mask.actees.offsets[rows] + position
        actor_slot = self.slot_of(batch, rows, mask.actors.data[actor, 0])
        actee_slot = self.slot_of(batch, rows, mask.actees.data[actee, 0])
        return rows, actor, position, actor_slot, actee_slot

    def slot_of(
        self, batch: VecObs, rows: npt.NDArray[np.int64], entity: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.int64]:
        """The padded slot of entities (``entity``: index within its row ``rows``; entities
        indexed type after type)."""
        counts = np.stack([batch.features[t].lengths for t in self.entity_types], axis=1)
        starts = np.cumsum(counts, axis=1) - counts  # (rows, types)
        # The last type starting at or before the entity (empty types start where the next does).
        type_index = (entity[:, None] >= starts[rows]).sum(axis=1) - 1
        return self.type_offsets[type_index] + entity - starts[rows, type_index]

    def legal(self, batch: VecObs, action: str) -> npt.NDArray[np.int8]:
        """Each row's legal choices of ``action``: (rows, choices) for a global action (all
        legal where it is not offered), (rows, slots, choices) for one of entities (for a
        select-entity action, the choices are the slots of the legal candidates)."""
        selection = batch.action_masks[action]
        if isinstance(selection, VecSelectEntityMask):
            out = np.zeros((batch.num_rows, self.slots, self.slots), dtype=np.int8)
            rows, _, _, actor_slot, actee_slot = self._pairs(batch, selection)
            flags = (
                np.ones(rows.size, np.bool_)
                if selection.mask is None
                else selection.mask.data[:, 0]
            )
            out[rows[flags], actor_slot[flags], actee_slot[flags]] = 1
            return out
        rows, entities, legal, _ = self._actors(batch, action)
        if self.global_actor[action]:
            out = np.ones((batch.num_rows, self.choices[action]), dtype=np.int8)
            out[rows] = legal
            return out
        out = np.zeros((batch.num_rows, self.slots, self.choices[action]), dtype=np.int8)
        out[rows, self.slot_of(batch, rows, entities)] = legal
        return out

    def action_masks(self, batch: VecObs) -> npt.NDArray[np.bool_]:
        """(rows, every component's choices): the legal choices of every component of each
        row's action, flattened in the order of :attr:`action_space` (what MaskablePPO
        expects). A component that does not act may take only its first choice, ignored."""
        masks = []
        for action in self.env_actions:
            legal = self.legal(batch, action).reshape(
                batch.num_rows, self.components[action], -1
            ).astype(np.bool_)  # fmt: skip
            idle = ~legal.any(axis=2)
            legal[idle, 0] = True
            masks.append(legal.reshape(batch.num_rows, -1))
        return np.concatenate(masks, axis=1)

    def actions(self, batch: VecObs, values: npt.ArrayLike) -> dict[str, RaggedArray]:
        """The Gymnasium actions of the batch's rows ((rows, components)) as entityrl's:
        each actor's choice read from its component. An illegal choice becomes the actor's
        first legal one (a choice out of range is left for the environment's check to name)."""
        picks = np.asarray(values, dtype=np.int64).reshape(batch.num_rows, -1)
        expected = sum(self.components.values())
        if picks.shape[1] != expected:
            raise ValueError(
                f"{self.name}: expected an action of {expected} components per environment "
                f"({self.action_space}), got {picks.shape[1]}"
            )
        ends = np.cumsum(list(self.components.values()))
        out = {}
        for action, part in zip(self.env_actions, np.split(picks, ends[:-1], axis=1), strict=True):
            selection = batch.action_masks[action]
            if isinstance(selection, VecSelectEntityMask):
                out[action] = self._selected(batch, selection, part)
                continue
            rows, entities, legal, lengths = self._actors(batch, action)
            if self.global_actor[action]:
                picked = part[rows, 0]
            else:
                picked = part[rows, self.slot_of(batch, rows, entities)]
            known = (picked >= 0) & (picked < legal.shape[1])
            illegal = known.copy()
            illegal[known] = ~legal[np.flatnonzero(known), picked[known]]
            picked[illegal] = legal[illegal].argmax(axis=1)
            out[action] = RaggedArray(picked.reshape(-1, 1), lengths.copy())
        return out

    def _selected(
        self, batch: VecObs, mask: VecSelectEntityMask, part: npt.NDArray[np.int64]
    ) -> RaggedArray:
        """Each actor's pick (a slot, read from its own slot's component) as the position of
        that candidate among its row's candidates; a slot that holds no legal candidate
        becomes the actor's first legal one."""
        rows, actor, position, actor_slot, actee_slot = self._pairs(batch, mask)
        legal = np.ones(rows.size, np.bool_) if mask.mask is None else mask.mask.data[:, 0]
        chosen_slot = part[rows, actor_slot]
        picked = np.full(mask.actors.items, -1, dtype=np.int64)
        hit = legal & (actee_slot == chosen_slot)
        picked[actor[hit]] = position[hit]
        missed = picked < 0
        if missed.any():
            first = np.full(mask.actors.items, -1, dtype=np.int64)
            # The first legal pair of each actor: pairs are actor-major, so reversed order
            # leaves each actor's first one written last.
            legal_pairs = np.flatnonzero(legal)[::-1]
            first[actor[legal_pairs]] = position[legal_pairs]
            picked[missed] = first[missed]
        return RaggedArray(picked.reshape(-1, 1), mask.actors.lengths.copy())


class EntityGymnasiumVectorEnv(gymnasium.vector.VectorEnv[Any, Any, Any]):
    """A batch of entityrl environments (a :class:`~entityrl.env.VecEnv`) as one Gymnasium
    vector environment, observations and actions as :class:`PaddedLayout` lays them out.

    Environments reset themselves when their episodes end (Gymnasium's same-step autoreset):
    the step that ends an episode returns the next episode's first observation, with
    ``terminated`` or ``truncated`` set; for a truncated episode, ``info["final_obs"]`` holds the
    observation it was cut off in (to bootstrap from), ``info["_final_obs"]`` which rows have
    one. Ended episodes report ``episode_return``, ``episode_length`` and the environment's own
    metrics in ``info`` (with ``_<key>`` masks, as Gymnasium's vector infos are).
    :meth:`action_masks` gives every row's legal choices (sb3-contrib's MaskablePPO).
    ``make``: seed -> the VecEnv (built again by ``reset(seed=...)``)."""

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.SAME_STEP}  # noqa: RUF012

    def __init__(
        self,
        make: Callable[[int], VecEnv],
        seed: int = 0,
        max_entities: int | Mapping[str, int] | None = None,
        *,
        observation: str = "dict",
        bounds: Bounds | Mapping[str, Bounds] | None = None,
    ) -> None:
        self.make = make
        self.env = make(seed)
        self.num_envs = self.env.num_envs
        self.layout = PaddedLayout(type(self.env).__name__, self.env.obs_space,
                                   self.env.action_space, max_entities, observation, bounds)  # fmt: skip
        self.single_observation_space = self.layout.observation_space
        self.single_action_space = self.layout.action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._batch: VecObs | None = None

    def reset(
        self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        if seed is not None:
            if not isinstance(seed, int):
                raise ValueError(
                    f"{self.layout.name}: reset takes one seed for the whole batch (the copies "
                    f"are seeded from it in order), got {seed!r}"
                )
            self.env.close()
            self.env = self.make(seed)
        self._batch = self.env.reset()
        return self.layout.observe(self._batch), {}

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        if self._batch is None:
            raise RuntimeError(f"{self.layout.name}: call reset() before step()")
        batch = self.env.act(self.layout.actions(self._batch, actions))
        self._batch = batch
        cut_off = (
            batch.truncated if batch.truncated is not None else np.zeros(batch.done.shape, bool)
        )
        info: dict[str, Any] = {}
        ended = np.flatnonzero(batch.done)
        for key, values in batch.metrics.items():
            if len(values) != len(
                ended
            ):  # a metric some episodes did not report: no row of its own
                continue
            info[key] = np.zeros(self.num_envs)
            info[key][ended[: len(values)]] = values
            info[f"_{key}"] = batch.done.copy()
        if batch.final is not None and cut_off.any():
            final = self.layout.observe(batch.final)
            info["final_obs"] = np.full(self.num_envs, None, dtype=object)
            for i, row in enumerate(np.flatnonzero(cut_off)):
                info["final_obs"][row] = (
                    final[i] if self.layout.flat else {k: v[i] for k, v in final.items()}
                )
            info["_final_obs"] = cut_off.copy()
        return (self.layout.observe(batch), batch.reward.astype(np.float64),
                batch.done & ~cut_off, cut_off.copy(), info)  # fmt: skip

    def action_masks(self) -> npt.NDArray[np.bool_]:
        """(num_envs, every component's choices): see :meth:`PaddedLayout.action_masks`."""
        if self._batch is None:
            raise RuntimeError(f"{self.layout.name}: call reset() before action_masks()")
        return self.layout.action_masks(self._batch)

    def close_extras(self, **kwargs: Any) -> None:
        self.env.close()


def make_gymnasium_vector(
    name: str,
    num_envs: int,
    max_entities: int | Mapping[str, int] | None = None,
    *,
    seed: int = 0,
    observation: str = "dict",
    bounds: Bounds | Mapping[str, Bounds] | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    **more_env_kwargs: Any,
) -> EntityGymnasiumVectorEnv:
    """``num_envs`` copies of the registered entityrl environment ``name`` as one Gymnasium
    vector environment; what ``gymnasium.make_vec("entityrl/<name>-v0", num_envs,
    vectorization_mode="vector_entry_point")`` calls. The environment's constructor arguments
    are the other keyword arguments, and ``env_kwargs`` for those whose names this function
    takes itself (the survival world's ``observation``, say)."""
    from entityrl.envs import make_vec

    kwargs = {**(env_kwargs or {}), **more_env_kwargs}

    def make(copies_seed: int) -> VecEnv:
        return make_vec(name, num_envs, seed=copies_seed, **kwargs)

    return EntityGymnasiumVectorEnv(make, seed, max_entities, observation=observation,
                                    bounds=bounds)  # fmt: skip
