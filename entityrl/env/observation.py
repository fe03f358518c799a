"""What an environment returns each step (Observation, action masks) and receives (actions)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

EntityID = Hashable
"""Any hashable value naming one entity; stable across steps if the environment wants."""

Features = npt.ArrayLike
"""Features of the entities of one type: an ``(n, features)`` array or a list of rows."""


# ---------------------------------------------------------------------------- action masks
@dataclass
class CategoricalActionMask:
    """Which entities take a categorical action this step, and which choices each may pick.

    Name the actors by ``actor_types`` (every entity of those types acts) or by ``actor_ids``;
    with neither, every entity acts. ``mask`` (optional, shape ``(actors, choices)``) marks the
    legal choices of each actor, in actor order; every actor needs at least one.
    """

    actor_ids: Sequence[EntityID] | None = None
    actor_types: Sequence[str] | None = None
    mask: npt.ArrayLike | None = None


@dataclass
class SelectEntityActionMask:
    """Which entities select another entity this step, and which entities they may select.

    Actors as in :class:`CategoricalActionMask`. Candidates (actees) by ``actee_types`` or
    ``actee_ids``; with neither, every entity is a candidate. ``mask`` (optional, shape
    ``(actors, actees)``) marks the legal actees of each actor.
    """

    actor_ids: Sequence[EntityID] | None = None
    actor_types: Sequence[str] | None = None
    actee_ids: Sequence[EntityID] | None = None
    actee_types: Sequence[str] | None = None
    mask: npt.ArrayLike | None = None


@dataclass
class GlobalCategoricalActionMask:
    """A global categorical action is taken this step; ``mask`` (shape ``(choices,)``) marks
    the legal choices (all, if omitted)."""

    mask: npt.ArrayLike | None = None


ActionMask = CategoricalActionMask | SelectEntityActionMask | GlobalCategoricalActionMask


# ---------------------------------------------------------------------------- actions
@dataclass
class CategoricalAction:
    """The choice of each actor: ``indices[i]`` is what ``actors[i]`` picked."""

    actors: Sequence[EntityID]
    indices: npt.NDArray[np.int64]
    choices: Sequence[str] = ()

    @property
    def labels(self) -> list[str]:
        """The picked choices as their labels."""
        return [self.choices[i] for i in self.indices]

    def as_dict(self) -> dict[EntityID, int]:
        """``{actor id: choice index}``."""
        return dict(zip(self.actors, self.indices.tolist(), strict=True))


@dataclass
class SelectEntityAction:
    """``actees[i]`` is the entity selected by ``actors[i]``."""

    actors: Sequence[EntityID]
    actees: Sequence[EntityID]

    def as_dict(self) -> dict[EntityID, EntityID]:
        """``{actor id: selected entity id}``."""
        return dict(zip(self.actors, self.actees, strict=True))


@dataclass
class GlobalCategoricalAction:
    """The one choice made for the whole observation."""

    index: int
    label: str


Action = CategoricalAction | SelectEntityAction | GlobalCategoricalAction


# ---------------------------------------------------------------------------- observation
@dataclass
class Observation:
    """One step of one environment, as the environment sees it.

    ``features`` maps entity type names to ``(n, features)`` arrays (or lists of rows); an
    absent type has no entities. ``ids`` optionally names each entity (needed when masks or
    actions refer to entities by id; otherwise entity ``i`` of type ``T`` is ``(T, i)``).
    ``actions`` maps action names to masks; an absent action is not taken this step.
    ``visible`` optionally hides entities from the policy (the value function still sees them).
    ``metrics`` are reported when the episode ends (latest value wins).
    ``truncated`` (with ``done``) says the episode was cut off (a time limit) rather than
    ended by the task: the trainer then bootstraps from this observation's value, so a
    truncated observation must carry the full final state (features, like any other step).
    """

    features: Mapping[str, Features] = field(default_factory=dict)
    actions: Mapping[str, ActionMask] = field(default_factory=dict)
    reward: float = 0.0
    done: bool = False
    ids: Mapping[str, Sequence[EntityID]] = field(default_factory=dict)
    global_features: Sequence[float] | npt.NDArray[np.float32] = ()
    visible: Mapping[str, Sequence[bool] | npt.NDArray[np.bool_]] = field(default_factory=dict)
    metrics: Mapping[str, float] = field(default_factory=dict)
    truncated: bool = False

    def num_entities(self, entity_type: str) -> int:
        return num_entities(self, entity_type)

    def entity_ids(self, entity_type: str) -> Sequence[EntityID]:
        """The ids of the entities of one type (the default ids if the environment gave none)."""
        return entity_ids(self, entity_type)

    def named_entities(
        self,
        type_order: Sequence[str],
        ids: Sequence[EntityID] | None = None,
        types: Sequence[str] | None = None,
    ) -> list[EntityID]:
        """The ids an actor or actee specification names, in batch order (see
        :func:`named_entities`)."""
        return named_entities(self, type_order, ids, types)


# The batcher reads observations through these functions (and attributes only), so it also
# batches objects that merely have an Observation's attributes: the native observations of
# environments written for another API (see Environment.native_act).
def num_entities(obs: Observation, entity_type: str) -> int:
    """How many entities of ``entity_type`` ``obs`` holds."""
    feats = obs.features.get(entity_type)
    if feats is None:
        return 0
    return feats.shape[0] if isinstance(feats, np.ndarray) else len(feats)  # type: ignore[arg-type]


def entity_ids(obs: Observation, entity_type: str) -> Sequence[EntityID]:
    """The ids of the entities of one type (the default ids if the environment gave none)."""
    ids = obs.ids.get(entity_type)
    if ids is not None:
        return ids
    return [(entity_type, i) for i in range(num_entities(obs, entity_type))]


def named_entities(
    obs: Observation,
    type_order: Sequence[str],
    ids: Sequence[EntityID] | None = None,
    types: Sequence[str] | None = None,
) -> list[EntityID]:
    """The ids an actor or actee specification names, in batch order.

    ``ids`` as given; else every entity of ``types``; else every entity, types taken in
    ``type_order`` (the observation space's order).
    """
    if ids is not None:
        return list(ids)
    named: list[EntityID] = []
    for name in type_order if types is None else types:
        named.extend(entity_ids(obs, name))
    return named
