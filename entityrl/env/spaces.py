"""What an environment declares up front: the entity types it shows and the actions it takes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


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


@dataclass(frozen=True)
class CategoricalActionSpace:
    """Each acting entity picks one of ``choices`` (labels, shown to people and in logs)."""

    choices: Sequence[str]

    def __post_init__(self) -> None:
        object.__setattr__(self, "choices", tuple(self.choices))
        if not self.choices:
            raise ValueError("CategoricalActionSpace needs at least one choice")

    def __len__(self) -> int:
        return len(self.choices)


@dataclass(frozen=True)
class GlobalCategoricalActionSpace:
    """One choice among ``choices`` per step, made for the whole observation."""

    choices: Sequence[str]

    def __post_init__(self) -> None:
        object.__setattr__(self, "choices", tuple(self.choices))
        if not self.choices:
            raise ValueError("GlobalCategoricalActionSpace needs at least one choice")

    def __len__(self) -> int:
        return len(self.choices)


@dataclass(frozen=True)
class SelectEntityActionSpace:
    """Each acting entity selects one entity among a set of candidates (the actees)."""


ActionSpace = CategoricalActionSpace | GlobalCategoricalActionSpace | SelectEntityActionSpace
ActionSpaces = Mapping[str, ActionSpace]
