"""What an environment declares up front: the entity types it shows and the actions it takes."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


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


def spaces_to_data(obs_space: ObsSpace, action_space: Mapping[str, ActionSpace]) -> dict[str, Any]:
    """The spaces as plain data (JSON-ready), as checkpoints and exported models record them."""
    return {
        "entities": {name: list(e.features) for name, e in obs_space.entities.items()},
        "global_features": list(obs_space.global_features),
        "actions": {
            name: {"kind": type(space).__name__, "choices": list(getattr(space, "choices", ()))}
            for name, space in action_space.items()
        },
    }


_ACTION_KINDS: dict[str, Callable[[list[str]], ActionSpace]] = {
    "CategoricalActionSpace": CategoricalActionSpace,
    "GlobalCategoricalActionSpace": GlobalCategoricalActionSpace,
    "SelectEntityActionSpace": lambda _choices: SelectEntityActionSpace(),
}


def spaces_from_data(data: dict[str, Any]) -> tuple[ObsSpace, dict[str, ActionSpace]]:
    """The spaces :func:`spaces_to_data` recorded."""
    obs_space = ObsSpace(
        {name: Entity(features) for name, features in data["entities"].items()},
        data["global_features"],
    )
    actions = {
        name: _ACTION_KINDS[spec["kind"]](spec["choices"]) for name, spec in data["actions"].items()
    }
    return obs_space, actions
