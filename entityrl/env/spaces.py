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
    "Image",
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


IMAGE_DTYPES = ("uint8", "float32")
"""The element types an image may have: uint8 (0-255, scaled to [0, 1] by the network) or
float32 (values in [0, 1])."""


@dataclass(frozen=True)
class Image:
    """One image an observation carries each step: ``shape`` is (height, width, channels)."""

    shape: tuple[int, int, int]
    dtype: str = "uint8"

    def __post_init__(self) -> None:
        shape = tuple(int(n) for n in self.shape)
        if len(shape) != 3 or min(shape) < 1:
            raise ValueError(
                f"Image shape must be (height, width, channels), each >= 1, got {self.shape}"
            )
        if self.dtype not in IMAGE_DTYPES:
            raise ValueError(f"Image dtype must be one of {IMAGE_DTYPES}, got {self.dtype!r}")
        object.__setattr__(self, "shape", shape)


@dataclass(frozen=True)
class ObsSpace:
    """Everything an observation may contain.

    ``entities`` maps each entity type name to its :class:`Entity`; its order defines the
    entity index order in batches (all entities of the first type, then the second, ...).
    ``global_features`` are per-step features that belong to no entity.
    ``goal_features`` names those of the global features that form a goal signal (what the
    agent is asked to do): the network conditions its layers on them (``net.conditioning``,
    see docs/goals.md). They travel as global features everywhere else.
    ``images`` maps image names to their :class:`Image`: one image of each name per step,
    which the network turns into tokens beside the entities (see docs/images.md).
    """

    entities: Mapping[str, Entity] = field(default_factory=dict)
    global_features: Sequence[str] = ()
    images: Mapping[str, Image] = field(default_factory=dict)
    goal_features: Sequence[str] = ()

    def __post_init__(self) -> None:
        entities = {
            name: spec if isinstance(spec, Entity) else Entity(spec)
            for name, spec in dict(self.entities).items()
        }
        object.__setattr__(self, "entities", entities)
        object.__setattr__(self, "global_features", tuple(self.global_features))
        object.__setattr__(self, "goal_features", tuple(self.goal_features))
        unknown = [n for n in self.goal_features if n not in self.global_features]
        if unknown or len(set(self.goal_features)) != len(self.goal_features):
            raise ValueError(
                "ObsSpace goal_features must be distinct names among the global features "
                f"{list(self.global_features)}, got {list(self.goal_features)}"
            )
        images = dict(self.images)
        for name, image in images.items():
            if not isinstance(image, Image):
                raise ValueError(f"ObsSpace images[{name!r}]: expected an Image, got {image!r}")
        object.__setattr__(self, "images", images)

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
