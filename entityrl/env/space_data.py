"""Spaces as plain data (for checkpoints and recordings) and how two sets of spaces differ.

numpy-free and torch-free: readers of recordings and checkpoints share these descriptions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from entityrl.env.actions import kind_named, kind_of
from entityrl.env.spaces import ActionSpace, Entity, Image, ObsSpace

Spaces = tuple[ObsSpace, Mapping[str, ActionSpace]]


def spaces_to_data(obs_space: ObsSpace, action_space: Mapping[str, ActionSpace]) -> dict[str, Any]:
    """The spaces as JSON-compatible data: entity types with their features, global features,
    and per action its kind (the space's class name) and settings (choices; for continuous
    actions components and bounds); images (shape and dtype) only where the space has some,
    so spaces without images keep the data they always had."""
    data: dict[str, Any] = {
        "entities": {name: list(e.features) for name, e in obs_space.entities.items()},
        "global_features": list(obs_space.global_features),
        "actions": {
            name: {"kind": type(space).__name__, **kind_of(space).to_data(space)}
            for name, space in action_space.items()
        },
    }
    if obs_space.images:
        data["images"] = {
            name: {"shape": list(image.shape), "dtype": image.dtype}
            for name, image in obs_space.images.items()
        }
    if obs_space.goal_features:  # likewise only where the space marks a goal
        data["goal_features"] = list(obs_space.goal_features)
    return data


def spaces_from_data(data: dict[str, Any]) -> tuple[ObsSpace, dict[str, ActionSpace]]:
    """The inverse of :func:`spaces_to_data`."""
    obs_space = ObsSpace(
        {name: Entity(features) for name, features in data["entities"].items()},
        data["global_features"],
        {
            name: Image(tuple(spec["shape"]), spec["dtype"])
            for name, spec in data.get("images", {}).items()
        },
        data.get("goal_features", ()),
    )
    actions = {
        name: kind_named(spec["kind"]).from_data(spec) for name, spec in data["actions"].items()
    }
    return obs_space, actions


def space_differences(ours: Spaces, env: Spaces, who: str = "the agent") -> list[str]:
    """How the environment's (observation space, action spaces) differ from ``ours``, those
    that ``who`` (the agent, the recording) expects."""
    mine, theirs = spaces_to_data(*ours), spaces_to_data(*env)
    differences = _keyed_differences("entity type", mine["entities"], theirs["entities"], who)
    common = [name for name in mine["entities"] if name in theirs["entities"]]
    if common != [name for name in theirs["entities"] if name in mine["entities"]]:
        # Entity indices follow the type order, so actor indices would point elsewhere.
        differences.append(
            f"the environment has the entity types in the order {list(theirs['entities'])}, "
            f"{who} expects {list(mine['entities'])}"
        )
    if mine["global_features"] != theirs["global_features"]:
        differences.append(
            f"the environment has global features {theirs['global_features']}, "
            f"{who} expects {mine['global_features']}"
        )
    differences += _keyed_differences(
        "image", mine.get("images", {}), theirs.get("images", {}), who
    )
    if mine.get("goal_features", []) != theirs.get("goal_features", []):
        differences.append(
            f"the environment has goal features {theirs.get('goal_features', [])}, "
            f"{who} expects {mine.get('goal_features', [])}"
        )
    return differences + _keyed_differences("action", mine["actions"], theirs["actions"], who)


def _keyed_differences(
    kind: str, ours: dict[str, Any], theirs: dict[str, Any], who: str
) -> list[str]:
    """Entries only one side has, and entries whose descriptions differ."""
    differences = [
        f"{kind} {name!r} is missing from the environment" for name in ours if name not in theirs
    ]
    differences += [f"{kind} {name!r} is unknown to {who}" for name in theirs if name not in ours]
    differences += [
        f"{kind} {name!r}: the environment has {_describe(theirs[name])}, "
        f"{who} expects {_describe(spec)}"
        for name, spec in ours.items()
        if name in theirs and theirs[name] != spec
    ]
    return differences


def _describe(spec: Any) -> str:
    """An entity type's features (a list), an image's shape and dtype or an action's kind and
    settings (a dict)."""
    if isinstance(spec, dict) and "shape" in spec:
        return f"shape {tuple(spec['shape'])} of {spec['dtype']}"
    if isinstance(spec, dict):
        settings = ", ".join(
            f"{key} {value}" for key, value in spec.items() if key != "kind" and value
        )
        return f"a {spec['kind']}" + (f" with {settings}" if settings else "")
    return f"features {spec}"
