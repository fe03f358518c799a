"""One observation straight to the one-observation model's inputs, and its outputs straight back
to actions: the runtime's path for single decisions.

The general path batches the observation (:class:`~entityrl.env.Batcher`, a ragged
:class:`~entityrl.env.vec_obs.VecObs` of one row), slices that row into the model's inputs
(:func:`entityrl.inference.runtime.model_inputs`) and unbatches the choices. For one
observation all that bookkeeping collapses to a few small arrays, which this module builds
directly, with the same semantics: the entity types in the observation space's order, actors
and candidates named by id or by type as the batcher resolves them, masks, visibility and
global features converted as the batcher converts them, and the actions built as
``Batcher.unbatch`` builds them. The observation's own float32 feature arrays are fed as
they are (no copy); arrays that every call of the same shape needs alike (all-legal masks,
all-visible flags, entity ranges) are made once and reused, read-only.

:class:`SingleObservation` applies to the built-in action kinds only; the runtime keeps the
general path for anything else (and for stacked policies, whose stacking works on batches).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from entityrl.env.actions import kind_of
from entityrl.env.actions.categorical import CategoricalKind
from entityrl.env.actions.continuous import ContinuousKind
from entityrl.env.actions.global_categorical import GlobalCategoricalKind
from entityrl.env.actions.global_continuous import GlobalContinuousKind
from entityrl.env.actions.select_entity import SelectEntityKind
from entityrl.env.batching import checked_image
from entityrl.env.entities import EntityID, named_entities, num_entities
from entityrl.env.observation import Action
from entityrl.env.rows import stack_rows
from entityrl.env.spaces import ActionSpace, ObsSpace
from entityrl.inference import signature

Array = npt.NDArray[Any]

_KINDS = (
    CategoricalKind,
    GlobalCategoricalKind,
    SelectEntityKind,
    ContinuousKind,
    GlobalContinuousKind,
)
"""The kinds whose batching and unbatching this module reproduces (exactly these classes: a kind
registered in place of one of them may batch otherwise)."""

_CACHED = 256
"""At most this many reused arrays per table (entity counts vary; the table is emptied when
full)."""


@dataclass(frozen=True)
class _Action:
    """What one action needs, computed once: its layout and names, and how its actions are
    built."""

    name: str
    layout: signature.Layout
    kind: Any
    space: Any
    width: int  # choices, or components of a Gaussian
    make: Callable[..., Any]
    actors_input: str
    actees_input: str
    mask_input: str
    probs_output: str
    mean_output: str
    std_output: str
    low: Array | None  # a Gaussian's bounds, float32
    high: Array | None


@dataclass
class Prepared:
    """One observation's model inputs, and per action how many actors (1 or 0 for a global
    action: offered or not) and candidates it has; ``padded``: the inputs are the
    one-observation model's, else the unpadded model's (see :attr:`SingleObservation.unpadded`)."""

    feeds: dict[str, Array]
    actors: dict[str, int]
    candidates: dict[str, int]
    padded: bool = True


def applies(action_space: Mapping[str, ActionSpace]) -> bool:
    """Whether :class:`SingleObservation` reproduces the batcher for every action of the
    space."""
    try:
        return all(type(kind_of(space)) in _KINDS for space in action_space.values())
    except TypeError:
        return False


class SingleObservation:
    """Converts one observation of ``obs_space`` to the model's inputs (those named in
    ``wanted``: the model may not take every input of the format) and the model's outputs
    back to actions (see the module's docstring).

    ``unpadded``: the inputs of the model for the common observation
    (:data:`signature.UNPADDED_KEY`), if there is one; the observations it applies to are
    prepared for it (:attr:`Prepared.padded` False), the others for the one-observation
    model."""

    def __init__(
        self,
        obs_space: ObsSpace,
        action_space: Mapping[str, ActionSpace],
        wanted: set[str],
        unpadded: set[str] | None = None,
    ) -> None:
        self.type_names = list(obs_space.entities)
        self.type_column = {name: t for t, name in enumerate(self.type_names)}
        self.widths = [len(entity.features) for entity in obs_space.entities.values()]
        self.features_inputs = [signature.features_input(name) for name in self.type_names]
        self.num_global = len(obs_space.global_features)
        self.images = [
            (name, image, signature.image_input(name)) for name, image in obs_space.images.items()
        ]
        # The model may have dropped inputs its graph does not read: then only the others.
        every = {spec.name for spec in signature.input_specs(obs_space, action_space)}
        self.wanted = None if every <= wanted else wanted
        self.unpadded = unpadded
        """The unpadded model's inputs (None: prepare every observation for the
        one-observation model)."""
        every.discard(signature.VISIBLE)
        self.unpadded_wanted = None if unpadded is None or every <= unpadded else unpadded
        self.actions: list[_Action] = []
        for name, space in action_space.items():
            kind = kind_of(space)
            layout = signature.action_layout(name, space)
            bounded = layout.gaussian
            self.actions.append(
                _Action(
                    name,
                    layout,
                    kind,
                    space,
                    0 if layout is signature.Layout.CANDIDATES else signature.choices(space),
                    kind.action,
                    signature.actors_input(name),
                    signature.actees_input(name),
                    signature.mask_input(name),
                    signature.probs_output(name),
                    signature.mean_output(name),
                    signature.std_output(name),
                    np.asarray(space.low, dtype=np.float32) if bounded else None,
                    np.asarray(space.high, dtype=np.float32) if bounded else None,
                )
            )
        self._empty = [np.zeros((0, width), np.float32) for width in self.widths]
        self._ones: dict[tuple[int, ...], Array] = {}
        self._ranges: dict[tuple[int, int], Array] = {}

    # ------------------------------------------------------------------ observation -> inputs
    def prepare(self, obs: Any) -> Prepared:
        """The model inputs of ``obs`` (the model's own only) and its actor and candidate
        counts; raises as the batcher would for what it cannot convert."""
        feeds: dict[str, Array] = {}
        counts: list[int] = []
        flags: list[Array] | None = None
        given_visible = obs.visible
        for t, (name, width) in enumerate(zip(self.type_names, self.widths, strict=True)):
            rows = obs.features.get(name)
            if rows is None:
                data = self._empty[t]
            elif (
                type(rows) is np.ndarray
                and rows.dtype == np.float32
                and rows.ndim == 2
                and rows.shape[1] == width
                and rows.flags.c_contiguous
            ):
                data = rows  # fed as it is: onnxruntime only reads it
            else:
                data = stack_rows([rows], width, np.float32)
            n = 0 if rows is None else len(rows)
            if data.shape[0] != n:
                raise ValueError(
                    f"features of {name!r}: expected {n} rows of {width} features, got an "
                    f"array of shape {data.shape}"
                )
            feeds[self.features_inputs[t]] = data
            counts.append(n)
            if given_visible and name in given_visible:
                if flags is None:
                    flags = [self._all((c,)) for c in counts[:-1]]
                shown = stack_rows([given_visible[name]], 1, np.bool_)
                if shown.shape[0] != n:
                    raise ValueError(
                        f"visible of {name!r}: expected {n} flags (one per entity), got "
                        f"{shown.shape[0]}"
                    )
                flags.append(shown[:, 0])
            elif flags is not None:
                flags.append(self._all((n,)))
        total = sum(counts)
        if flags is None:
            feeds[signature.VISIBLE] = self._all((total,))
        else:
            feeds[signature.VISIBLE] = np.concatenate(flags)
        if self.num_global:
            feeds[signature.GLOBAL_FEATURES] = np.asarray(
                obs.global_features, dtype=np.float32
            ).reshape(self.num_global)
        for name, image, input_name in self.images:
            # Fed as it is, one row of the model's (rows, height, width, channels).
            feeds[input_name] = checked_image(name, obs.images.get(name), image)[None]
        entities = _Entities(self, obs, counts, total)
        # The unpadded model takes at least one entity, all visible, and candidates for every
        # select-entity action (cleared below where one has none).
        unpadded = (
            self.unpadded is not None
            and total > 0
            and (flags is None or bool(feeds[signature.VISIBLE].all()))
        )
        actors: dict[str, int] = {}
        candidates: dict[str, int] = {}
        specs = obs.actions
        layouts = signature.Layout
        for action in self.actions:
            spec = specs.get(action.name)
            layout = action.layout
            if layout is layouts.GLOBAL or layout is layouts.GLOBAL_VALUES:
                actors[action.name] = 0 if spec is None else 1
                if layout is layouts.GLOBAL:
                    if spec is None or spec.mask is None:
                        legal = self._all((1, action.width))
                    else:
                        legal = np.array([spec.mask], dtype=np.bool_).reshape(1, action.width)
                    feeds[action.mask_input] = legal
                continue
            if spec is None:
                acting = self._range(0, 0)
            else:
                acting = entities.select(spec.actor_ids, spec.actor_types)
            count = acting.shape[0]
            actors[action.name] = count
            feeds[action.actors_input] = acting
            if layout is layouts.VALUES:
                continue
            mask = None if spec is None else spec.mask
            if layout is layouts.CANDIDATES:
                if count:
                    among = entities.select(spec.actee_ids, spec.actee_types)
                else:  # candidates matter only to actors
                    among = self._range(0, 0)
                candidates[action.name] = width = among.shape[0]
                unpadded = unpadded and width > 0
                feeds[action.actees_input] = among
                if mask is None:
                    legal = self._all((count, width))
                else:
                    legal = np.ascontiguousarray(mask, dtype=np.bool_).reshape(count, width)
            elif mask is None:
                legal = self._all((count, action.width))
            else:
                legal = _choice_rows(mask, count, action.width)
            feeds[action.mask_input] = legal
        wanted = self.wanted
        if unpadded:
            del feeds[signature.VISIBLE]
            wanted = self.unpadded_wanted
        if wanted is not None:
            feeds = {name: value for name, value in feeds.items() if name in wanted}
        return Prepared(feeds, actors, candidates, not unpadded)

    def _all(self, shape: tuple[int, ...]) -> Array:
        """All True of ``shape``, made once (read-only: the caller must not write to it)."""
        found = self._ones.get(shape)
        if found is None:
            if len(self._ones) >= _CACHED:
                self._ones.clear()
            found = self._ones[shape] = np.ones(shape, np.bool_)
            found.flags.writeable = False
        return found

    def _range(self, start: int, stop: int) -> Array:
        """``arange(start, stop)`` in int64, made once (read-only)."""
        found = self._ranges.get((start, stop))
        if found is None:
            if len(self._ranges) >= _CACHED:
                self._ranges.clear()
            found = self._ranges[start, stop] = np.arange(start, stop, dtype=np.int64)
            found.flags.writeable = False
        return found

    # ------------------------------------------------------------------ outputs -> actions
    def actions_of(
        self,
        obs: Any,
        prepared: Prepared,
        outputs: Mapping[str, Array],
        choose: Callable[[Array], npt.NDArray[np.int64]],
        sample: Callable[[Array, Array], Array],
    ) -> dict[str, Action]:
        """The actions of ``obs`` from the model's ``outputs`` for it, picked by ``choose``
        (probabilities, one row per actor, to one index per actor) and ``sample`` (means and
        std to values), as :meth:`Batcher.unbatch` builds them: every action offered, in the
        action space's order. ``choose`` and ``sample`` are called for every action in that
        order, offered or not, as the general path calls them."""
        chosen: dict[str, Array] = {}
        layouts = signature.Layout
        for action in self.actions:
            count = prepared.actors[action.name]
            layout = action.layout
            if layout.gaussian:
                mean = outputs[action.mean_output]
                if layout is layouts.GLOBAL_VALUES:
                    mean = mean[:count]
                chosen[action.name] = sample(mean, outputs[action.std_output])
            else:
                probs = outputs[action.probs_output]
                if layout is layouts.GLOBAL:
                    probs = probs[:count]
                chosen[action.name] = choose(probs)
        taken: dict[str, Action] = {}
        for action in self.actions:
            spec = obs.actions.get(action.name)
            if spec is None:
                continue
            picks = chosen[action.name]
            layout = action.layout
            if layout is layouts.GLOBAL:
                index = int(picks[0])
                taken[action.name] = action.make(index, action.space.choices[index])
                continue
            if layout is layouts.GLOBAL_VALUES:
                values = np.clip(picks, action.low, action.high)
                taken[action.name] = action.make(values[0], action.space.dims)
                continue
            count = prepared.actors[action.name]
            names = self.named(obs, spec.actor_ids, spec.actor_types) if count else []
            if len(names) != count:  # ids that do not match the entities batched
                raise ValueError(
                    f"row 0: action {action.name!r}: {count} actors were batched, but their ids "
                    f"name {len(names)}"
                )
            if layout is layouts.CANDIDATES:
                if count:
                    selected = self.picked(obs, spec.actee_ids, spec.actee_types, picks.tolist())
                    taken[action.name] = action.make(names, selected)
                else:
                    taken[action.name] = action.make([], [])
            elif layout is layouts.CHOICES:
                taken[action.name] = action.make(names, picks, action.space.choices)
            else:  # per-actor values
                values = np.clip(picks, action.low, action.high)
                taken[action.name] = action.make(names, values, action.space.dims)
        return taken

    def named(
        self, obs: Any, ids: Sequence[EntityID] | None, types: Sequence[str] | None
    ) -> list[EntityID]:
        """The ids an actor or actee specification names, in batch order."""
        return named_entities(obs, self.type_names, ids, types)

    def picked(
        self,
        obs: Any,
        ids: Sequence[EntityID] | None,
        types: Sequence[str] | None,
        positions: list[int],
    ) -> list[EntityID]:
        """``[named(obs, ids, types)[j] for j in positions]``, without listing every entity
        named (candidates are often many, the picks one per actor)."""
        if ids is not None:
            return [ids[j] for j in positions]
        given = obs.ids
        picked: list[EntityID] = []
        for j in positions:
            if j < 0:  # counted from the end, as a list is indexed: rare, the plain way
                picked.append(self.named(obs, ids, types)[j])
                continue
            k = j
            for name in self.type_names if types is None else types:
                own = given.get(name)
                n = num_entities(obs, name) if own is None else len(own)
                if k < n:
                    picked.append((name, k) if own is None else own[k])
                    break
                k -= n
            else:
                raise IndexError(f"candidate {j}: fewer candidates are named")
        return picked


def _choice_rows(mask: Any, count: int, width: int) -> Array:
    """A categorical action's mask ``(actors, choices)`` as the batcher converts it."""
    if (
        type(mask) is np.ndarray
        and mask.dtype == np.bool_
        and mask.shape == (count, width)
        and mask.flags.c_contiguous
    ):
        return mask
    legal = stack_rows([mask], width, np.bool_)
    if legal.shape != (count, width):
        raise ValueError(
            f"expected a mask of {count} rows of {width} choices (one per actor), got {legal.shape}"
        )
    return legal


class _Entities:
    """Entity indices within one observation, for actor and actee specifications: as the
    batcher's entity index resolves them for one row."""

    def __init__(self, single: SingleObservation, obs: Any, counts: list[int], total: int) -> None:
        self.single = single
        self.obs = obs
        self.counts = counts
        self.total = total
        self.starts = [0] * len(counts)
        start = 0
        for t, n in enumerate(counts):
            self.starts[t] = start
            start += n
        self._positions: dict[EntityID, int] | bool | None = False  # False: not built yet

    def select(self, ids: Sequence[EntityID] | None, types: Sequence[str] | None) -> Array:
        """The indices of the entities named: the ids given; else every entity of the types
        given; else every entity."""
        single = self.single
        if ids is not None:
            return self._indices(ids)
        if types is None:
            return single._range(0, self.total)
        columns = [single.type_column[name] for name in types]
        if len(columns) == 1:
            t = columns[0]
            return single._range(self.starts[t], self.starts[t] + self.counts[t])
        if not columns:
            return single._range(0, 0)
        return np.concatenate(
            [single._range(self.starts[t], self.starts[t] + self.counts[t]) for t in columns]
        )

    def _indices(self, ids: Sequence[EntityID]) -> Array:
        obs = self.obs
        for t, name in enumerate(self.single.type_names):
            if obs.ids.get(name) is ids:
                # A type's own id list (candidates often are) needs no lookup.
                return self.single._range(self.starts[t], self.starts[t] + len(ids))
        if self._positions is False:
            every = named_entities(obs, self.single.type_names)
            # Many environments number their entities 0, 1, 2, ... in the order they list
            # them: then an id is its index.
            count = len(every)
            own = every == list(range(count))
            self._positions = None if own else dict(zip(every, range(count), strict=True))
        positions = self._positions
        if positions is None:
            indices = np.array(ids, dtype=np.int64).reshape(len(ids))
            outside = np.flatnonzero((indices < 0) | (indices >= self.total))
            if outside.size:
                raise KeyError(
                    f"row 0: an action names entity id {indices[outside[0]]}, but the row's "
                    f"entities are numbered 0 to {self.total - 1}"
                )
            return indices
        assert isinstance(positions, dict)
        return np.array([positions[x] for x in ids], dtype=np.int64).reshape(len(ids))
