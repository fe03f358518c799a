"""What an environment declares up front: the entity types it shows and the actions it takes
(the action spaces are defined with their kinds, in :mod:`entityrl.env.actions`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from entityrl.env.actions.categorical import CategoricalActionSpace
from entityrl.env.actions.continuous import ContinuousActionSpace
from entityrl.env.actions.global_categorical import GlobalCategoricalActionSpace
from entityrl.env.actions.global_continuous import GlobalContinuousActionSpace
from entityrl.env.actions.select_entity import SelectEntityActionSpace

__all__ = [
    "ActionSpace",
    "ActionSpaces",
    "CategoricalActionSpace",
    "ContinuousActionSpace",
    "Entity",
    "GlobalCategoricalActionSpace",
    "GlobalContinuousActionSpace",
    "ObsSpace",
    "SelectEntityActionSpace",
]


@dataclass(frozen=True)
class Entity:
    """One entity type: the names of its features, in the order the environment emits them."""

    features: Sequence[str]

    def __post_init__(self) -> None:
        object.__setattr__(self, "features", tuple(self.features))
        if len(set(self.features)) != len(self.features):
            raise ValueError(f"Entity features must be unique, got {list(self.features)}")


@dataclass(frozen=True)
class ObsSpace:
    """Everything an observation may contain.

    ``entities`` maps each entity type name to its :class:`Entity`; its order defines the
    entity index order in batches (all entities of the first type, then the second, ...).
    ``global_features`` are per-step features that belong to no entity.
    """

    entities: Mapping[str, Entity] = field(default_factory=dict)
    global_features: Sequence[str] = ()

    def __post_init__(self) -> None:
        entities = {
            name: spec if isinstance(spec, Entity) else Entity(spec)
            for name, spec in dict(self.entities).items()
        }
        object.__setattr__(self, "entities", entities)
        object.__setattr__(self, "global_features", tuple(self.global_features))

    @property
    def entity_names(self) -> list[str]:
        return list(self.entities)


ActionSpace = (
    CategoricalActionSpace
    | GlobalCategoricalActionSpace
    | SelectEntityActionSpace
    | ContinuousActionSpace
    | GlobalContinuousActionSpace
)
"""The action spaces of the registered kinds (:mod:`entityrl.env.actions`)."""
ActionSpaces = Mapping[str, ActionSpace]
