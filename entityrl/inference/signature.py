"""The interface of an exported policy: its inputs, outputs and metadata, by name.

An exported model decides for ONE observation. Its inputs, all named after the spaces:

- ``features/<type>``: float32 ``(n, features)`` per entity type (``n`` may be 0);
- ``global_features``: float32 ``(globals,)``, when the space has global features;
- ``visible``: bool ``(entities,)``, False for entities hidden from the policy (entities are
  numbered type after type, in the observation space's order, as in batches);
- per categorical action ``A``: ``actors/A`` int64 ``(actors,)`` entity indices and
  ``mask/A`` bool ``(actors, choices)``;
- per global categorical action: ``mask/A`` bool ``(1, choices)`` (its actor is the whole
  observation);
- per select-entity action: ``actors/A``, ``actees/A`` int64 entity indices and ``mask/A``
  bool ``(actors, actees)``.

Outputs: ``probs/A`` float32 ``(actors, choices or actees)`` per action, illegal choices at
exactly 0, and ``value`` float32 ``(1,)``. Inputs the network does not read (``visible``
without attention, say) are left out of the model; feed only those the model lists.

The model's ``metadata_props`` carry :data:`FORMAT_KEY`, the spaces as JSON
(:func:`~entityrl.env.spaces.spaces_to_data`), the entityrl version and the training run's
environment, so a consumer can check the inputs it builds.

This module is shared by the exporter and the runtime, and so imports neither torch nor onnx.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from entityrl.env.spaces import (
    ActionSpace,
    CategoricalActionSpace,
    GlobalCategoricalActionSpace,
    ObsSpace,
    SelectEntityActionSpace,
)

EXPORTED_SPACES = (CategoricalActionSpace, GlobalCategoricalActionSpace, SelectEntityActionSpace)
"""The action spaces a model of this format answers (continuous actions are not in it yet)."""

FORMAT = "entityrl-policy/1"
"""Value of :data:`FORMAT_KEY`: the layout above, version 1."""

FORMAT_KEY = "entityrl.format"
SPACES_KEY = "entityrl.spaces"
VERSION_KEY = "entityrl.version"
ENV_KEY = "entityrl.env"

GLOBAL_FEATURES = "global_features"
VISIBLE = "visible"
VALUE = "value"


def features_input(entity_type: str) -> str:
    return f"features/{entity_type}"


def actors_input(action: str) -> str:
    return f"actors/{action}"


def actees_input(action: str) -> str:
    return f"actees/{action}"


def mask_input(action: str) -> str:
    return f"mask/{action}"


def probs_output(action: str) -> str:
    return f"probs/{action}"


@dataclass(frozen=True)
class TensorSpec:
    """One input or output: its name, numpy dtype name and shape (str: a dynamic axis)."""

    name: str
    dtype: str
    shape: tuple[int | str, ...]


def input_specs(obs_space: ObsSpace, action_space: Mapping[str, ActionSpace]) -> list[TensorSpec]:
    """Every input a model for these spaces may take, in the order the exporter passes them."""
    specs = [
        TensorSpec(features_input(name), "float32", (f"{name} entities", len(entity.features)))
        for name, entity in obs_space.entities.items()
    ]
    if obs_space.global_features:
        specs.append(TensorSpec(GLOBAL_FEATURES, "float32", (len(obs_space.global_features),)))
    specs.append(TensorSpec(VISIBLE, "bool", ("entities",)))
    for name, space in action_space.items():
        actors, actees = f"{name} actors", f"{name} actees"
        if isinstance(space, GlobalCategoricalActionSpace):
            specs.append(TensorSpec(mask_input(name), "bool", (1, len(space))))
        elif isinstance(space, CategoricalActionSpace):
            specs.append(TensorSpec(actors_input(name), "int64", (actors,)))
            specs.append(TensorSpec(mask_input(name), "bool", (actors, len(space))))
        else:
            assert isinstance(space, SelectEntityActionSpace)
            specs.append(TensorSpec(actors_input(name), "int64", (actors,)))
            specs.append(TensorSpec(actees_input(name), "int64", (actees,)))
            specs.append(TensorSpec(mask_input(name), "bool", (actors, actees)))
    return specs


def output_specs(action_space: Mapping[str, ActionSpace]) -> list[TensorSpec]:
    """The model's outputs, in order: one probability table per action, then the value."""
    specs = []
    for name, space in action_space.items():
        if isinstance(space, GlobalCategoricalActionSpace):
            shape: tuple[int | str, ...] = (1, len(space))
        elif isinstance(space, CategoricalActionSpace):
            shape = (f"{name} actors", len(space))
        else:
            shape = (f"{name} actors", f"{name} actees")
        specs.append(TensorSpec(probs_output(name), "float32", shape))
    specs.append(TensorSpec(VALUE, "float32", (1,)))
    return specs
