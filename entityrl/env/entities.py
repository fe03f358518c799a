"""Entities of one observation by id and by type: what actor and actee specifications name.

Read by attribute only, so objects that merely have an Observation's ``features`` and ``ids``
(the native observations of environments written for another API, see
``Environment.native_act``) are read the same way.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

EntityID = Hashable
"""Any hashable value naming one entity; stable across steps if the environment wants."""


def num_entities(obs: Any, entity_type: str) -> int:
    """How many entities of ``entity_type`` ``obs`` holds."""
    feats = obs.features.get(entity_type)
    if feats is None:
        return 0
    return feats.shape[0] if isinstance(feats, np.ndarray) else len(feats)


def entity_ids(obs: Any, entity_type: str) -> Sequence[EntityID]:
    """The ids of the entities of one type (the default ids if the environment gave none)."""
    ids = obs.ids.get(entity_type)
    if ids is not None:
        return ids  # type: ignore[no-any-return]
    return [(entity_type, i) for i in range(num_entities(obs, entity_type))]


def named_entities(
    obs: Any,
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
