"""The recording format: an Arrow schema per pair of spaces, and rows <-> Arrow columns.

One row of a recording is one step of one environment: the observation the policy saw, the
actions it sent back, and the reward and end flag that followed. Columns (``T`` an entity type,
``A`` an action, ``F``/``G``/``C`` the numbers of features, global features and choices):

===========================  =====================================  ==============================
column                       Arrow type                             meaning
===========================  =====================================  ==============================
``features/T``               list<fixed_size_list<float32, F>>      the entities of type ``T``
``ids/T``                    list<string>, null if unknown          ``str()`` of each entity's id
``visible/T``                list<bool>                             shown to the policy
``global_features``          fixed_size_list<float32, G>
``image/I`` (images only)    fixed_size_list<uint8 or float32,      image ``I`` of the step, its
                             H * W * C>                             (H, W, C) array row-major, in
                                                                    the dtype the space declares
``actors/A``                 list<int64>                            actors' entity indices in the
                                                                    row (a global action's actor:
                                                                    the number of entities)
``actees/A`` (select only)   list<int64>                            candidates' entity indices
``mask/A``                   categorical: list<fixed_size_list      legal choices per actor;
(not continuous)             <bool, C>>; select: list<bool>         select: actor-major
                                                                    (actors x actees)
``action/A``                 list<int64>; continuous:               per actor, as the VecEnv took
                             list<fixed_size_list<float32, D>>      it: the choice, the position
                                                                    among the actees, or the
                                                                    ``D`` values (unclipped)
``reward``                   float32                                after the step
``done``                     bool                                   the step ended the episode
``truncated``                bool                                   it was cut off (a time
                                                                    limit), not ended by the task
===========================  =====================================  ==============================

``I`` an image of the space (see the header's spaces for its shape); spaces without images have
no such column, so their recordings are as they were before images were recorded.

Recordings written before ``truncated`` existed lack the column (:attr:`Header.endings` is
False); they are read as if no episode had been cut off.

An action's columns other than ``action/A`` hold its batched mask as its kind stores it
(:meth:`~entityrl.env.actions.ActionKind.mask_columns`), the above for the built-in kinds; its
kind also says how ``action/A`` is stored (:meth:`~entityrl.env.actions.ActionKind.value_column`).
Entities are indexed in the observation space's type order, as in :class:`~entityrl.env.VecObs`.
The schema's metadata holds the format name and version, the spaces (JSON, see
:func:`~entityrl.env.space_data.spaces_to_data`) and the environment's name and arguments.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from entityrl.env.actions import kind_of
from entityrl.env.actions.kind import Column
from entityrl.env.rows import all_true
from entityrl.env.space_data import spaces_from_data, spaces_to_data
from entityrl.env.spaces import ActionSpace, ObsSpace
from entityrl.env.vec_obs import VecActionMask, VecObs
from entityrl.ragged import RaggedArray

FORMAT = "entityrl-episodes"
VERSION = 1
_META_FORMAT, _META_VERSION = b"entityrl.format", b"entityrl.version"
_META_SPACES, _META_ENV = b"entityrl.spaces", b"entityrl.env"


class RecordingError(ValueError):
    """A recording is unreadable, or does not fit what it is used with."""


@dataclass(frozen=True)
class Header:
    """What a recording declares before its first episode."""

    obs_space: ObsSpace
    action_space: dict[str, ActionSpace]
    env_id: str | None = None
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    version: int = VERSION
    endings: bool = True
    """The recording says which episodes were truncated (its ``truncated`` column); False in
    recordings written before that column existed."""


def make_schema(header: Header) -> pa.Schema:
    """The Arrow schema of recordings of these spaces, the header in its metadata."""
    fields: list[pa.Field] = []
    for name, entity in header.obs_space.entities.items():
        fields += [
            pa.field(f"features/{name}", pa.list_(pa.list_(pa.float32(), len(entity.features)))),
            pa.field(f"ids/{name}", pa.list_(pa.string())),
            pa.field(f"visible/{name}", pa.list_(pa.bool_())),
        ]
    globals_ = len(header.obs_space.global_features)
    fields.append(pa.field("global_features", pa.list_(pa.float32(), globals_)))
    for name, image in header.obs_space.images.items():
        pixels = pa.from_numpy_dtype(np.dtype(image.dtype))
        fields.append(pa.field(image_column(name), pa.list_(pixels, int(np.prod(image.shape)))))
    for name, space in header.action_space.items():
        for column, layout in _action_columns(space).items():
            item = pa.from_numpy_dtype(layout.dtype)
            if layout.width is not None:
                item = pa.list_(item, layout.width)
            fields.append(pa.field(f"{column}/{name}", pa.list_(item)))
    fields += [pa.field("reward", pa.float32()), pa.field("done", pa.bool_())]
    if header.endings:
        fields.append(pa.field("truncated", pa.bool_()))
    metadata = {
        _META_FORMAT: FORMAT,
        _META_VERSION: str(header.version),
        _META_SPACES: json.dumps(spaces_to_data(header.obs_space, header.action_space)),
        _META_ENV: json.dumps({"id": header.env_id, "kwargs": header.env_kwargs}),
    }
    return pa.schema(fields, metadata=metadata)


def read_header(schema: pa.Schema, source: str) -> Header:
    """The header of a recording's schema; :class:`RecordingError` naming ``source`` if the
    schema is not an entityrl recording this version reads."""
    meta = schema.metadata or {}
    if meta.get(_META_FORMAT) != FORMAT.encode():
        raise RecordingError(f"{source} is an Arrow stream but not an entityrl recording")
    version = int(meta.get(_META_VERSION, b"0"))
    if version != VERSION:
        raise RecordingError(
            f"{source} has recording format version {version}; this entityrl reads {VERSION}"
        )
    try:
        obs_space, action_space = spaces_from_data(json.loads(meta[_META_SPACES]))
        env = json.loads(meta[_META_ENV])
    except (KeyError, TypeError, ValueError) as err:
        raise RecordingError(f"{source}: its header is malformed ({err!r})") from None
    header = Header(obs_space, action_space, env["id"], env["kwargs"], version)
    if "truncated" not in schema.names:
        header = replace(header, endings=False)
    if not schema.equals(make_schema(header), check_metadata=False):
        raise RecordingError(f"{source}: its columns do not match the spaces in its header")
    return header


# ---------------------------------------------------------------------------- rows -> Arrow
def to_record_batch(
    schema: pa.Schema,
    header: Header,
    obs: VecObs,
    actions: Mapping[str, RaggedArray],
    reward: npt.NDArray[np.float32],
    done: npt.NDArray[np.bool_],
    ids: Mapping[str, Sequence[Sequence[Any]] | None] | None = None,
    truncated: npt.NDArray[np.bool_] | None = None,
) -> pa.RecordBatch:
    """Every row of ``obs`` with the ``actions`` taken in it and the ``reward``/``done`` that
    followed. ``ids`` (optional) gives per entity type each row's entity ids; ``truncated``
    (None: none) the rows whose episode was cut off."""
    rows = obs.num_rows
    columns: list[pa.Array] = []
    for name in header.obs_space.entities:
        features = obs.features[name]
        columns.append(_list_of_rows(features))
        columns.append(_ids((ids or {}).get(name), rows))
        shown = obs.visible.get(name)
        columns.append(
            _list_of_items(shown if shown is not None else all_true(features.lengths, 1))
        )
    columns.append(_fixed_rows(obs.global_features.astype(np.float32, copy=False)))
    for name in header.obs_space.images:
        columns.append(_fixed_rows(obs.images[name].reshape(rows, -1)))
    for name, space in header.action_space.items():
        arrays = {
            **kind_of(space).mask_to_columns(space, obs.action_masks[name]),
            "action": actions[name],
        }
        for column, layout in _action_columns(space).items():
            ragged = arrays[column]
            columns.append(
                _list_of_items(ragged) if layout.width is None else _list_of_rows(ragged)
            )
    columns += [pa.array(reward, pa.float32()), pa.array(done, pa.bool_())]
    if header.endings:
        cut = np.zeros(rows, np.bool_) if truncated is None else truncated
        columns.append(pa.array(cut, pa.bool_()))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def image_column(name: str) -> str:
    """The column of image ``name``."""
    return f"image/{name}"


def _action_columns(space: ActionSpace) -> dict[str, Column]:
    """The columns of one action, by name before the ``/``: its batched mask's (as its kind
    stores it), then ``action``, the values."""
    kind = kind_of(space)
    return {**kind.mask_columns(space), "action": kind.value_column(space)}


def _offsets(ragged: RaggedArray) -> pa.Array:
    return pa.array(ragged.offsets.astype(np.int32, copy=False))


def _list_of_items(ragged: RaggedArray) -> pa.Array:
    """A one-feature ragged array as list<scalar> per row."""
    return pa.ListArray.from_arrays(_offsets(ragged), pa.array(ragged.data[:, 0]))


def _list_of_rows(ragged: RaggedArray) -> pa.Array:
    """A ragged array as list<fixed_size_list> per row (its items' features)."""
    return pa.ListArray.from_arrays(_offsets(ragged), _fixed_rows(ragged.data))


def _fixed_rows(data: npt.NDArray[Any]) -> pa.Array:
    """A 2-D array as fixed_size_list rows (built from buffers: zero-width rows too)."""
    width = data.shape[1]
    values = pa.array(np.ascontiguousarray(data).reshape(-1))
    kind = pa.list_(values.type, width)
    return pa.Array.from_buffers(kind, data.shape[0], [None], children=[values])


def _ids(ids: Sequence[Sequence[Any]] | None, rows: int) -> pa.Array:
    if ids is None:
        return pa.nulls(rows, pa.list_(pa.string()))
    return pa.array([[str(i) for i in row] for row in ids], pa.list_(pa.string()))


# ---------------------------------------------------------------------------- Arrow -> rows
def to_vec_obs(header: Header, batch: pa.RecordBatch) -> tuple[VecObs, dict[str, RaggedArray]]:
    """The rows of a record batch as a :class:`VecObs` (masks that allow everything and
    visibility that hides nothing are left out) and the actions taken in them."""
    features, visible = {}, {}
    for name, entity in header.obs_space.entities.items():
        features[name] = _ragged(batch.column(f"features/{name}"), len(entity.features))
        shown = _ragged(batch.column(f"visible/{name}"))
        if not shown.data.all():
            visible[name] = shown
    global_features = _numpy(batch.column("global_features").flatten()).reshape(
        batch.num_rows, len(header.obs_space.global_features)
    )
    images = {
        name: _numpy(batch.column(image_column(name)).flatten()).reshape(
            batch.num_rows, *image.shape
        )
        for name, image in header.obs_space.images.items()
    }
    masks: dict[str, VecActionMask] = {}
    actions: dict[str, RaggedArray] = {}
    for name, space in header.action_space.items():
        arrays = {
            column: _ragged(batch.column(f"{column}/{name}"), layout.width)
            for column, layout in _action_columns(space).items()
        }
        actions[name] = arrays.pop("action")
        masks[name] = kind_of(space).mask_from_columns(space, arrays)
    obs = VecObs(
        features=features,
        global_features=global_features.astype(np.float32, copy=False),
        action_masks=masks,
        reward=_numpy(batch.column("reward")),
        done=_numpy(batch.column("done")),
        visible=visible,
        images=images,
    )
    return obs, actions


def _ragged(column: pa.Array, width: int | None = None) -> RaggedArray:
    """A list column as a ragged array: list<scalar> with one feature per item, or
    list<fixed_size_list> with ``width`` features."""
    lengths = np.diff(_numpy(column.offsets)).astype(np.int64)
    items = column.flatten()
    if width is not None:
        items = items.flatten()
    data = _numpy(items).reshape(int(lengths.sum()), 1 if width is None else width)
    return RaggedArray(np.ascontiguousarray(data), lengths)


def _numpy(array: pa.Array) -> npt.NDArray[Any]:
    return array.to_numpy(zero_copy_only=False, writable=True)  # torch wants writable arrays
