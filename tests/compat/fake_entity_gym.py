"""A stand-in for entity-gym 0.1.x's environment API: the same class names, fields and
constructor forms, so that the compat tests run where entity-gym is not installed.

Only what an environment author touches is here: spaces, masks, actions, Observation (in its
``entities=`` and ``features=``/``ids=`` forms) and the Environment base class.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt


@dataclass
class Entity:
    features: list[str]


@dataclass
class ObsSpace:
    global_features: list[str] = field(default_factory=list)
    entities: dict[str, Entity] = field(default_factory=dict)


@dataclass
class CategoricalActionSpace:
    index_to_label: list[str]


@dataclass
class GlobalCategoricalActionSpace:
    index_to_label: list[str]


@dataclass
class SelectEntityActionSpace:
    pass


@dataclass
class CategoricalActionMask:
    actor_ids: Sequence[Hashable] | None = None
    actor_types: Sequence[str] | None = None
    mask: Any = None


@dataclass
class GlobalCategoricalActionMask:
    mask: Any = None


@dataclass
class SelectEntityActionMask:
    actor_ids: Sequence[Hashable] | None = None
    actor_types: Sequence[str] | None = None
    actee_types: Sequence[str] | None = None
    actee_ids: Sequence[Hashable] | None = None
    mask: Any = None


@dataclass
class CategoricalAction:
    actors: Sequence[Hashable]
    indices: npt.NDArray[np.int64]
    index_to_label: list[str]
    probs: npt.NDArray[np.float32] | None = None

    @property
    def labels(self) -> list[str]:
        return [self.index_to_label[i] for i in self.indices]


@dataclass
class SelectEntityAction:
    actors: Sequence[Hashable]
    actees: Sequence[Hashable]
    probs: npt.NDArray[np.float32] | None = None


@dataclass
class GlobalCategoricalAction:
    index: int
    label: str
    probs: npt.NDArray[np.float32] | None = None


class Observation:
    """Either ``entities={type: features or (features, ids)}`` or ``features=`` plus ``ids=``."""

    def __init__(
        self,
        *,
        done: bool,
        reward: float,
        visible: Mapping[str, Any] | None = None,
        entities: Mapping[str, Any] | None = None,
        features: Mapping[str, Any] | None = None,
        ids: Mapping[str, Sequence[Hashable]] | None = None,
        global_features: Sequence[float] | None = None,
        actions: Mapping[str, Any] | None = None,
        metrics: dict[str, float] | None = None,
    ) -> None:
        if features is not None:
            assert entities is None, "give features or entities, not both"
            self.features = features
            self.ids = ids or {}
        else:
            given = {k: v for k, v in (entities or {}).items() if v is not None}
            self.features = {k: v[0] if isinstance(v, tuple) else v for k, v in given.items()}
            self.ids = {k: v[1] for k, v in given.items() if isinstance(v, tuple)}
        self.global_features = global_features if global_features is not None else []
        self.actions = actions or {}
        self.done = done
        self.reward = reward
        self.visible = visible or {}
        self.metrics = metrics or {}


class Environment(ABC):
    @abstractmethod
    def obs_space(self) -> ObsSpace: ...

    @abstractmethod
    def action_space(self) -> dict[str, Any]: ...

    @abstractmethod
    def reset(self) -> Observation: ...

    @abstractmethod
    def act(self, actions: Mapping[str, Any]) -> Observation: ...

    def render(self, **kwargs: Any) -> Any:
        raise NotImplementedError  # as entity-gym's: environments draw themselves if they can

    def close(self) -> None:
        pass
