"""Hypothesis strategies: random observation and action spaces, and random valid observations
of them."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from entityrl.env import (
    CategoricalActionMask,
    CategoricalActionSpace,
    Entity,
    GlobalCategoricalActionMask,
    GlobalCategoricalActionSpace,
    Observation,
    ObsSpace,
    SelectEntityActionMask,
    SelectEntityActionSpace,
)


@st.composite
def spaces(draw: st.DrawFn) -> tuple[ObsSpace, dict[str, Any]]:
    widths = draw(st.lists(st.integers(0, 3), min_size=1, max_size=3))
    obs_space = ObsSpace(
        entities={f"T{t}": Entity([f"f{j}" for j in range(w)]) for t, w in enumerate(widths)},
        global_features=[f"g{j}" for j in range(draw(st.integers(0, 2)))],
    )
    kinds = draw(st.lists(st.sampled_from(["categorical", "select", "global"]), max_size=4))
    actions: dict[str, Any] = {}
    for k, kind in enumerate(kinds):
        if kind == "select":
            actions[f"A{k}"] = SelectEntityActionSpace()
        else:
            choices = [f"c{j}" for j in range(draw(st.integers(1, 4)))]
            space = (
                CategoricalActionSpace if kind == "categorical" else GlobalCategoricalActionSpace
            )
            actions[f"A{k}"] = space(choices)
    return obs_space, actions


def legal_mask(rng: np.random.Generator, rows: int, columns: int) -> np.ndarray:
    """A random boolean mask with at least one True per row."""
    mask = rng.random((rows, columns)) < 0.5
    if columns:
        mask[np.arange(rows), rng.integers(0, columns, size=rows)] = True
    return mask


@st.composite
def observations(draw: st.DrawFn, obs_space: ObsSpace, action_space: dict[str, Any]) -> Observation:
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    obs = Observation(global_features=rng.normal(size=len(obs_space.global_features)).tolist())
    features: dict[str, Any] = {}
    ids: dict[str, Any] = {}
    visible: dict[str, Any] = {}
    for name, entity in obs_space.entities.items():
        count = draw(st.integers(0, 4))
        if count == 0 and draw(st.booleans()):
            continue  # an absent type has no entities
        rows = rng.normal(size=(count, len(entity.features)))
        features[name] = rows if draw(st.booleans()) else rows.tolist()
        if draw(st.booleans()):
            ids[name] = [f"{name}/{i}" for i in range(count)]
        if draw(st.booleans()):
            visible[name] = rng.random(count) < 0.5
    obs.features, obs.ids, obs.visible = features, ids, visible
    all_ids = obs.named_entities(list(obs_space.entities))
    for action, space in action_space.items():
        if draw(st.booleans()):
            continue  # not offered this step
        if isinstance(space, GlobalCategoricalActionSpace):
            mask = legal_mask(rng, 1, len(space))[0] if draw(st.booleans()) else None
            obs.actions[action] = GlobalCategoricalActionMask(mask=mask)
            continue
        actor_ids, actor_types, actors = draw(entity_choice(rng, obs, obs_space, all_ids))
        if isinstance(space, CategoricalActionSpace):
            mask = legal_mask(rng, len(actors), len(space)) if draw(st.booleans()) else None
            obs.actions[action] = CategoricalActionMask(actor_ids, actor_types, mask)
            continue
        actee_ids, actee_types, actees = draw(entity_choice(rng, obs, obs_space, all_ids))
        if not actees:
            actor_ids, actor_types, actors = None, [], []  # nobody acts without candidates
        mask = legal_mask(rng, len(actors), len(actees)) if draw(st.booleans()) else None
        obs.actions[action] = SelectEntityActionMask(
            actor_ids, actor_types, actee_ids, actee_types, mask
        )
    obs.reward = float(rng.normal())
    obs.done = draw(st.booleans())
    return obs


@st.composite
def entity_choice(
    draw: st.DrawFn,
    rng: np.random.Generator,
    obs: Observation,
    obs_space: ObsSpace,
    all_ids: list[Any],
) -> tuple[Any, Any, list[Any]]:
    """Actors or actees by ids, by types or (neither) all; also the ids they name, in order."""
    how = draw(st.sampled_from(["ids", "types", "all"]))
    if how == "ids":
        chosen = [
            all_ids[i] for i in rng.permutation(len(all_ids))[: draw(st.integers(0, len(all_ids)))]
        ]
        return chosen, None, chosen
    if how == "types":
        names = list(obs_space.entities)
        types = [names[i] for i in rng.permutation(len(names))[: draw(st.integers(0, len(names)))]]
        return None, types, obs.named_entities(names, None, types)
    return None, None, all_ids


@st.composite
def batches(draw: st.DrawFn) -> tuple[ObsSpace, dict[str, Any], list[Observation]]:
    obs_space, action_space = draw(spaces())
    batch = draw(st.lists(observations(obs_space, action_space), min_size=1, max_size=4))
    return obs_space, action_space, batch
