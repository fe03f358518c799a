"""The interface of an exported policy: its inputs, outputs and metadata, by name.

An exported model's graph decides for ONE observation (a batched model rides in its metadata:
below). Its inputs, all named after the spaces:

- ``features/<type>``: float32 ``(n, features)`` per entity type (``n`` may be 0);
- ``global_features``: float32 ``(globals,)``, when the space has global features;
- ``image/<name>`` per image of the space: ``(1, height, width, channels)`` of the image's
  dtype (uint8, scaled by 1/255 inside the graph as the network does, or float32 in [0, 1]);
- ``visible``: bool ``(entities,)``, False for entities hidden from the policy (entities are
  numbered type after type, in the observation space's order, as in batches);
- per categorical action ``A``: ``actors/A`` int64 ``(actors,)`` entity indices and
  ``mask/A`` bool ``(actors, choices)``;
- per global categorical action: ``mask/A`` bool ``(1, choices)`` (its actor is the whole
  observation);
- per select-entity action: ``actors/A``, ``actees/A`` int64 entity indices and ``mask/A``
  bool ``(actors, actees)``;
- per continuous action: ``actors/A`` int64 ``(actors,)``; a global continuous action takes no
  input (its actor is the whole observation).

Outputs: ``probs/A`` float32 ``(actors, choices or actees)`` per discrete action, illegal
choices at exactly 0; per continuous action the Gaussian's ``mean/A`` float32
``(actors, components)`` (``(1, components)`` for a global one) and ``std/A`` float32
``(components,)``, the same for every actor: a sample is ``mean + std * noise``, which the
environment receives clipped to the space's bounds; and ``value`` float32 ``(1,)``. Inputs the network does not read (``visible``
without attention, say) are left out of the model; feed only those the model lists.

A policy with memory (``net.memory``) also takes ``state``, float32 ``(size,)``: its state
before this observation, zeros for the first observation of an episode; and gives
``next_state``, the state to feed with the episode's next observation. Its metadata says so
under :data:`STATE_KEY` (:func:`state_metadata`); models without it have neither.

The model's ``metadata_props`` carry :data:`FORMAT_KEY`, the spaces as JSON
(:func:`~entityrl.env.spaces.spaces_to_data`), the entityrl version and the training run's
environment, so a consumer can check the inputs it builds. The spaces are those of the
model's inputs: for a run trained on stacked observations (``env.stack``), the stacked ones,
and :data:`STACK_KEY` (:func:`stack_metadata`) says how deep, so that a consumer stacks raw
observations as training did (:func:`entityrl.env.stacking.stack_onto`).

The same file carries a second model for a batch of observations in one call, serialized
and base64-encoded under :data:`BATCHED_KEY` (the one-observation graph above stays the lean
one for single decisions). Its inputs (:func:`batched_input_specs`), for ``rows``
observations:

- ``features/<type>``: float32 ``(n, features)``: every observation's entities of that type,
  observation after observation (``n`` may be 0);
- ``global_features``: float32 ``(rows, globals)``;
- ``image/<name>``: ``(rows, height, width, channels)`` of the image's dtype, per image;
- ``visible``: bool ``(entities,)``, in the order of the features inputs (type after type);
- ``slots`` (:data:`SLOTS`): int64 ``(rows, width)``, width at least 1: per observation its
  entities' numbers in the order of the features inputs, padded with the number of entities.
  The grid ``(rows, width + 2)`` appends each observation's global token and a padding
  entity; entity ``j`` of observation ``r`` (numbered type after type within it, as in
  batches) is at grid position ``r * (width + 2) + j``;
- ``entity_rows`` (:data:`ENTITY_ROWS`): int64 ``(entities,)``, the observation of each
  entity (only with global features or translation);
- ``actors/A``: int64 ``(actors,)`` grid positions of every observation's actors;
- ``actees/A``: int64 ``(actors, candidates)``, each actor's candidates as grid positions,
  padded (with any position) to the most of any actor, at least 1;
- ``mask/A``: bool ``(actors, choices)``, ``(rows, choices)`` for a global action (every row:
  a row not offered it is ignored), ``(actors, candidates)``, False at the padding;
- ``state``: float32 ``(rows, size)``, with memory.

Its outputs: ``probs/A`` of the mask's shape (0 where the mask is False), ``mean/A``
``(actors or rows, components)``, ``std/A`` ``(components,)``, ``value`` ``(rows,)`` and
``next_state`` ``(rows, size)``.

This module is shared by the exporter and the runtime, and so imports neither torch nor onnx.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from entityrl.env.actions import kind_of
from entityrl.env.spaces import (
    ActionSpace,
    CategoricalActionSpace,
    ContinuousActionSpace,
    GlobalCategoricalActionSpace,
    GlobalContinuousActionSpace,
    ObsSpace,
    SelectEntityActionSpace,
)


class Layout(Enum):
    """How the format lays out one action's inputs and output (see above)."""

    CHOICES = "choices"
    """Per actor (``actors/A``), over the space's choices."""
    GLOBAL = "global"
    """Once for the whole observation (no actors input), over the space's choices."""
    CANDIDATES = "candidates"
    """Per actor, over candidate entities (``actees/A``)."""
    VALUES = "values"
    """Per actor (``actors/A``), a Gaussian over the space's components."""
    GLOBAL_VALUES = "global values"
    """Once for the whole observation (no input), a Gaussian over the space's components."""

    @property
    def gaussian(self) -> bool:
        """The action's outputs are a Gaussian's mean and std, not probabilities."""
        return self in (Layout.VALUES, Layout.GLOBAL_VALUES)


# The format's part of each kind of action, keyed by space class as the action-kind registry
# (entityrl.env.actions) and the network's heads are.
_LAYOUTS: dict[type, Layout] = {
    CategoricalActionSpace: Layout.CHOICES,
    GlobalCategoricalActionSpace: Layout.GLOBAL,
    SelectEntityActionSpace: Layout.CANDIDATES,
    ContinuousActionSpace: Layout.VALUES,
    GlobalContinuousActionSpace: Layout.GLOBAL_VALUES,
}

EXPORTED_SPACES = tuple(_LAYOUTS)
"""The action spaces a model of this format answers."""

FORMAT = "entityrl-policy/1"
"""Value of :data:`FORMAT_KEY`: the layout above, version 1."""

FORMAT_KEY = "entityrl.format"
SPACES_KEY = "entityrl.spaces"
VERSION_KEY = "entityrl.version"
ENV_KEY = "entityrl.env"
STATE_KEY = "entityrl.state"
"""Present only in models with a recurrent state: see :func:`state_metadata`."""

GLOBAL_FEATURES = "global_features"
VISIBLE = "visible"
VALUE = "value"
STATE = "state"
NEXT_STATE = "next_state"

SLOTS = "slots"
ENTITY_ROWS = "entity_rows"
BATCHED_KEY = "entityrl.batched"
"""The batched model (see above), serialized and base64-encoded."""

UNPADDED_KEY = "entityrl.unpadded"
"""The one-observation model again, serialized and base64-encoded, for the common observation
only: every entity visible, at least one entity, and candidates for every select-entity
action offered or not. Its inputs are those above but ``visible`` (:func:`unpadded_input_specs`),
its outputs the same. It runs in fewer nodes (no padding entity, attention bias or guard
against an empty softmax), so a consumer that decides one observation at a time runs it
where the observation allows, and the model above elsewhere."""

STACK_KEY = "entityrl.stack"
"""Present only in models of stacked runs (``env.stack``): see :func:`stack_metadata`."""

INITIAL_STATE = "zeros"
"""The state of an episode's first observation, as :data:`STATE_KEY` records it (RogueNet's
``initial_state``: all zeros)."""


class UnsupportedActionError(ValueError):
    """An action of a kind this format does not hold."""


def action_layout(name: str, space: ActionSpace) -> Layout:
    """The layout of action ``name``, by its kind (:func:`~entityrl.env.actions.kind_of`, which
    raises TypeError for anything but a registered action space); raises
    :class:`UnsupportedActionError` naming the action for kinds the format does not hold."""
    layout = _LAYOUTS.get(kind_of(space).space)
    if layout is None:
        raise UnsupportedActionError(
            f"action {name!r} is a {type(space).__name__}: the ONNX format ({FORMAT}) holds "
            + ", ".join(s.__name__ for s in EXPORTED_SPACES)
            + " actions only"
        )
    return layout


def choices(space: ActionSpace) -> int:
    """The number of choices of an action laid out over them (:attr:`Layout.CHOICES` or
    :attr:`Layout.GLOBAL`), or of components of a continuous one."""
    return len(space)  # type: ignore[arg-type]  # the layout, not the type, says it has a length


def features_input(entity_type: str) -> str:
    return f"features/{entity_type}"


def image_input(image: str) -> str:
    return f"image/{image}"


def actors_input(action: str) -> str:
    return f"actors/{action}"


def actees_input(action: str) -> str:
    return f"actees/{action}"


def mask_input(action: str) -> str:
    return f"mask/{action}"


def probs_output(action: str) -> str:
    return f"probs/{action}"


def mean_output(action: str) -> str:
    return f"mean/{action}"


def std_output(action: str) -> str:
    return f"std/{action}"


def state_metadata(size: int) -> str:
    """The value of :data:`STATE_KEY` for a state of ``size`` floats: JSON with the size and
    the state a new episode starts from (:data:`INITIAL_STATE`)."""
    return json.dumps({"size": size, "initial": INITIAL_STATE})


def state_size(metadata: Mapping[str, str]) -> int | None:
    """The size of the state a model's metadata declares (None: a model without state).
    Raises ValueError naming what is wrong with a malformed declaration."""
    text = metadata.get(STATE_KEY)
    if text is None:
        return None
    try:
        declared = json.loads(text)
        size, initial = declared["size"], declared["initial"]
    except (ValueError, TypeError, KeyError) as err:
        raise ValueError(
            f"metadata {STATE_KEY}: expected JSON with 'size' and 'initial', got {text!r} ({err!r})"
        ) from None
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        raise ValueError(f"metadata {STATE_KEY}: expected a positive integer size, got {size!r}")
    if initial != INITIAL_STATE:
        raise ValueError(
            f"metadata {STATE_KEY}: expected initial {INITIAL_STATE!r} (the only initial state "
            f"this entityrl knows), got {initial!r}"
        )
    return size


def stack_metadata(steps: int) -> str:
    """The value of :data:`STACK_KEY` for a policy trained on observations stacked ``steps``
    deep (:mod:`entityrl.env.stacking`): JSON with the steps and how entities are followed
    from one step to the next (by id)."""
    return json.dumps({"steps": steps, "match": STACK_MATCH})


STACK_MATCH = "id"
"""How :data:`STACK_KEY` says entities are followed: by type and id within the episode."""


def stack_steps(metadata: Mapping[str, str]) -> int | None:
    """The steps stacked that a model's metadata declares (None: a model of unstacked
    observations). Raises ValueError naming what is wrong with a malformed declaration."""
    text = metadata.get(STACK_KEY)
    if text is None:
        return None
    try:
        declared = json.loads(text)
        steps, match = declared["steps"], declared["match"]
    except (ValueError, TypeError, KeyError) as err:
        raise ValueError(
            f"metadata {STACK_KEY}: expected JSON with 'steps' and 'match', got {text!r} ({err!r})"
        ) from None
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 2:
        raise ValueError(f"metadata {STACK_KEY}: expected an integer steps >= 2, got {steps!r}")
    if match != STACK_MATCH:
        raise ValueError(
            f"metadata {STACK_KEY}: expected match {STACK_MATCH!r} (the only matching this "
            f"entityrl knows), got {match!r}"
        )
    return steps


@dataclass(frozen=True)
class TensorSpec:
    """One input or output: its name, numpy dtype name and shape (str: a dynamic axis)."""

    name: str
    dtype: str
    shape: tuple[int | str, ...]


def unpadded_input_specs(
    obs_space: ObsSpace, action_space: Mapping[str, ActionSpace], state: int | None = None
) -> list[TensorSpec]:
    """The inputs of the model under :data:`UNPADDED_KEY`: :func:`input_specs` but ``visible``
    (every entity is)."""
    return [spec for spec in input_specs(obs_space, action_space, state) if spec.name != VISIBLE]


def input_specs(
    obs_space: ObsSpace, action_space: Mapping[str, ActionSpace], state: int | None = None
) -> list[TensorSpec]:
    """Every input a model for these spaces (and a state of ``state`` floats, if not None) may
    take, in the order the exporter passes them."""
    specs = [
        TensorSpec(features_input(name), "float32", (f"{name} entities", len(entity.features)))
        for name, entity in obs_space.entities.items()
    ]
    if obs_space.global_features:
        specs.append(TensorSpec(GLOBAL_FEATURES, "float32", (len(obs_space.global_features),)))
    specs += image_specs(obs_space, 1)
    specs.append(TensorSpec(VISIBLE, "bool", ("entities",)))
    for name, space in action_space.items():
        actors, actees = f"{name} actors", f"{name} actees"
        layout = action_layout(name, space)
        if layout in (Layout.CHOICES, Layout.CANDIDATES, Layout.VALUES):
            specs.append(TensorSpec(actors_input(name), "int64", (actors,)))
        if layout is Layout.CANDIDATES:
            specs.append(TensorSpec(actees_input(name), "int64", (actees,)))
            specs.append(TensorSpec(mask_input(name), "bool", (actors, actees)))
        elif layout is Layout.CHOICES:
            specs.append(TensorSpec(mask_input(name), "bool", (actors, choices(space))))
        elif layout is Layout.GLOBAL:
            specs.append(TensorSpec(mask_input(name), "bool", (1, choices(space))))
        # A Gaussian has no mask: every value is legal (and a global one has no input at all).
    if state is not None:
        specs.append(TensorSpec(STATE, "float32", (state,)))
    return specs


def image_specs(obs_space: ObsSpace, rows: int | str) -> list[TensorSpec]:
    """One input per image of the space, ``(rows, height, width, channels)`` of its dtype."""
    return [
        TensorSpec(image_input(name), image.dtype, (rows, *image.shape))
        for name, image in obs_space.images.items()
    ]


def output_specs(
    action_space: Mapping[str, ActionSpace], state: int | None = None
) -> list[TensorSpec]:
    """The model's outputs, in order: per action one probability table (or a Gaussian's mean
    and std), the value, then the next state (with a state of ``state`` floats)."""
    specs = []
    for name, space in action_space.items():
        layout = action_layout(name, space)
        if layout.gaussian:
            rows = 1 if layout is Layout.GLOBAL_VALUES else f"{name} actors"
            specs.append(TensorSpec(mean_output(name), "float32", (rows, choices(space))))
            specs.append(TensorSpec(std_output(name), "float32", (choices(space),)))
            continue
        if layout is Layout.GLOBAL:
            shape: tuple[int | str, ...] = (1, choices(space))
        elif layout is Layout.CHOICES:
            shape = (f"{name} actors", choices(space))
        else:
            shape = (f"{name} actors", f"{name} actees")
        specs.append(TensorSpec(probs_output(name), "float32", shape))
    specs.append(TensorSpec(VALUE, "float32", (1,)))
    if state is not None:
        specs.append(TensorSpec(NEXT_STATE, "float32", (state,)))
    return specs


def batched_input_specs(
    obs_space: ObsSpace, action_space: Mapping[str, ActionSpace], state: int | None = None
) -> list[TensorSpec]:
    """Every input the batched model for these spaces (and a state of ``state`` floats, if not
    None) may take, in the order the exporter passes them."""
    specs = [
        TensorSpec(features_input(name), "float32", (f"{name} entities", len(entity.features)))
        for name, entity in obs_space.entities.items()
    ]
    if obs_space.global_features:
        specs.append(
            TensorSpec(GLOBAL_FEATURES, "float32", ("rows", len(obs_space.global_features)))
        )
    specs += image_specs(obs_space, "rows")
    specs.append(TensorSpec(VISIBLE, "bool", ("entities",)))
    specs.append(TensorSpec(SLOTS, "int64", ("rows", "width")))
    specs.append(TensorSpec(ENTITY_ROWS, "int64", ("entities",)))
    for name, space in action_space.items():
        actors = f"{name} actors"
        layout = action_layout(name, space)
        if layout in (Layout.CHOICES, Layout.CANDIDATES, Layout.VALUES):
            specs.append(TensorSpec(actors_input(name), "int64", (actors,)))
        if layout is Layout.CANDIDATES:
            candidates = f"{name} candidates"
            specs.append(TensorSpec(actees_input(name), "int64", (actors, candidates)))
            specs.append(TensorSpec(mask_input(name), "bool", (actors, candidates)))
        elif layout is Layout.CHOICES:
            specs.append(TensorSpec(mask_input(name), "bool", (actors, choices(space))))
        elif layout is Layout.GLOBAL:
            specs.append(TensorSpec(mask_input(name), "bool", ("rows", choices(space))))
    if state is not None:
        specs.append(TensorSpec(STATE, "float32", ("rows", state)))
    return specs


def batched_output_specs(
    action_space: Mapping[str, ActionSpace], state: int | None = None
) -> list[TensorSpec]:
    """The batched model's outputs, in the order of :func:`output_specs`."""
    specs = []
    for name, space in action_space.items():
        layout = action_layout(name, space)
        global_ = layout in (Layout.GLOBAL, Layout.GLOBAL_VALUES)
        rows = "rows" if global_ else f"{name} actors"
        if layout.gaussian:
            specs.append(TensorSpec(mean_output(name), "float32", (rows, choices(space))))
            specs.append(TensorSpec(std_output(name), "float32", (choices(space),)))
        elif layout is Layout.CANDIDATES:
            specs.append(TensorSpec(probs_output(name), "float32", (rows, f"{name} candidates")))
        else:
            specs.append(TensorSpec(probs_output(name), "float32", (rows, choices(space))))
    specs.append(TensorSpec(VALUE, "float32", ("rows",)))
    if state is not None:
        specs.append(TensorSpec(NEXT_STATE, "float32", ("rows", state)))
    return specs
