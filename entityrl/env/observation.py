"""What an environment returns each step (Observation, action masks) and receives (actions);
the masks and actions are defined with their kinds, in :mod:`entityrl.env.actions`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from entityrl.env.actions.categorical import CategoricalAction, CategoricalActionMask
from entityrl.env.actions.continuous import ContinuousAction, ContinuousActionMask
from entityrl.env.actions.global_categorical import (
    GlobalCategoricalAction,
    GlobalCategoricalActionMask,
)
from entityrl.env.actions.global_continuous import (
    GlobalContinuousAction,
    GlobalContinuousActionMask,
)
from entityrl.env.actions.select_entity import SelectEntityAction, SelectEntityActionMask
from entityrl.env.entities import EntityID, entity_ids, named_entities, num_entities

__all__ = [
    "Action",
    "ActionMask",
    "CategoricalAction",
    "CategoricalActionMask",
    "ContinuousAction",
    "ContinuousActionMask",
    "EntityID",
    "Features",
    "GlobalCategoricalAction",
    "GlobalCategoricalActionMask",
    "GlobalContinuousAction",
    "GlobalContinuousActionMask",
    "Observation",
    "SelectEntityAction",
    "SelectEntityActionMask",
    "entity_ids",
    "named_entities",
    "num_entities",
]

Features = npt.ArrayLike
"""Features of the entities of one type: an ``(n, features)`` array or a list of rows."""


ActionMask = (
    CategoricalActionMask
    | SelectEntityActionMask
    | GlobalCategoricalActionMask
    | ContinuousActionMask
    | GlobalContinuousActionMask
)
Action = (
    CategoricalAction
    | SelectEntityAction
    | GlobalCategoricalAction
    | ContinuousAction
    | GlobalContinuousAction
)


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
    ``images`` maps each image the space declares to its ``(height, width, channels)`` array
    (see :class:`~entityrl.env.spaces.Image`); an observation of a space with images carries
    every one of them.
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
    images: Mapping[str, npt.NDArray[np.uint8] | npt.NDArray[np.float32]] = field(
        default_factory=dict
    )

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
