"""Where every entity of a ragged batch goes: the index bookkeeping RogueNet needs, in numpy.

All entities of a batch live in one flat ``(slots, d_model)`` tensor. Row ``r``'s entities sit
in consecutive slots from ``row_slot[r]`` on, in the VecObs order (entity types in ObsSpace
order). When the network has a global token (for global actions) it is the last
entity of each row, at index = number of real entities, matching the VecObs convention for
global actors. There are two arrangements:

- packed: rows back to back in batch order, no padding. Used when attention runs in the
  ragged attention kernel (:mod:`entityrl.nn.kernels`), or is replaced by pooling.
- grids: the flat tensor is, at the same time, the padded grids that torch's attention needs.
  Rows are sorted by length and cut into a few buckets (:func:`plan_buckets`); each bucket is a
  ``(rows, width)`` block of slots, and the blocks are concatenated. Slots past a row's length
  are padding. Per-entity layers run on every slot (padding is a small share when rows are
  bucketed by length), and attention views each block as a grid without copying.

Either way the number of slots is rounded up (:func:`padded_slots`) and the extra slots are
padding at the end, so that batches of similar size share matrix shapes.

Everything here is computed with a handful of vectorized numpy calls per batch and handed to
torch without copies (``torch.from_numpy``), on the CPU; ``to(device)`` moves a layout to the
network's device in one step.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch

from entityrl.env.vec_obs import VecCategoricalMask, VecContinuousMask, VecObs, VecSelectEntityMask
from entityrl.ragged import RaggedArray, ranges


def _tensor(array: npt.NDArray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(array))


@dataclass
class SelectLayout:
    """A select-entity action as (actor, candidate) pairs scored into ``(actors, max_actees)``
    logits."""

    actor_flat: torch.Tensor  # (A,) flat entity index of each actor
    max_actees: int  # the most candidates of any row
    legal: torch.Tensor  # (A, max_actees) bool: candidate j exists (and is allowed) for actor a
    # Every (actor, candidate) pair of a row, actor after actor: the candidate's slot, the
    # actor's index, and the pair's place a * max_actees + j in the (A, max_actees) logits.
    pair_slot: torch.Tensor
    pair_actor: torch.Tensor
    pair_pos: torch.Tensor

    def to(self, device: torch.device) -> SelectLayout:
        return SelectLayout(
            self.actor_flat.to(device),
            self.max_actees,
            self.legal.to(device),
            self.pair_slot.to(device),
            self.pair_actor.to(device),
            self.pair_pos.to(device),
        )


@dataclass
class Bucket:
    """Rows of similar length that attend together in one padded ``(rows, width)`` grid."""

    rows: int
    width: int
    key_valid: torch.Tensor  # (rows, width) bool: the slot holds an entity

    def to(self, device: torch.device) -> Bucket:
        return Bucket(self.rows, self.width, self.key_valid.to(device))


@dataclass
class BatchLayout:
    """Index metadata of one batch of rows (see module docstring)."""

    num_rows: int
    num_slots: int
    lengths: npt.NDArray[np.int64]  # (R,) entities per row (incl. global token)
    inverse_lengths: torch.Tensor  # (R, 1) float32: 1 / lengths, 1 for rows without entities
    type_positions: dict[str, torch.Tensor]  # slot of every entity of each type
    slot_row: torch.Tensor  # (slots,) row of each slot; num_rows for padding slots
    row_slot: npt.NDArray[np.int64]  # (R,) slot of each row's first entity
    buckets: list[Bucket]  # the padded grids; empty when packed
    padded: bool  # some slots are padding
    # One entity type (no global token), packed without padding: its entities are the slots.
    sole_type: bool
    # Packed without padding, every row one slot: slot i is row i.
    slot_per_row: bool
    visible: torch.Tensor | None  # (slots,) bool, None when everything is visible

    def to(self, device: torch.device) -> BatchLayout:
        """The same layout with its tensors on ``device`` (the numpy arrays stay)."""
        return dataclasses.replace(
            self,
            inverse_lengths=self.inverse_lengths.to(device),
            type_positions={k: v.to(device) for k, v in self.type_positions.items()},
            slot_row=self.slot_row.to(device),
            buckets=[b.to(device) for b in self.buckets],
            visible=None if self.visible is None else self.visible.to(device),
        )

    def per_slot(self, per_row: torch.Tensor) -> torch.Tensor:
        """``per_row`` (rows, n) spread to the slots: (slots, n), each slot its row's values,
        zeros in padding slots (whose row is ``num_rows``)."""
        if self.slot_per_row:
            return per_row
        padded = torch.cat([per_row, per_row.new_zeros(1, per_row.shape[1])])
        return padded[self.slot_row]


# Rows per bucket at least this many: fewer, larger attention calls beat tighter padding.
MIN_BUCKET_ROWS = 16
MAX_BUCKETS = 16


def plan_buckets(lengths: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], list[int]]:
    """Order rows by length and cut them into up to MAX_BUCKETS groups of similar length.

    Returns the row order and the number of rows of each bucket. Attention costs
    ``rows * width**2`` per bucket, so grouping short rows apart from long ones saves most of
    the work that padding everything to the longest row would waste.
    """
    rows = lengths.shape[0]
    if rows == 0 or lengths.min() == lengths.max():
        return np.arange(rows, dtype=np.int64), [rows]
    order = np.argsort(lengths, kind="stable")
    count = int(min(MAX_BUCKETS, max(1, rows // MIN_BUCKET_ROWS)))
    cuts = np.linspace(0, rows, count + 1).round().astype(np.int64)
    sizes: list[int] = []
    widths = lengths[order]
    for start, stop in itertools.pairwise(cuts):
        # Merge with the previous bucket when both would pad to the same width.
        if sizes and widths[start - 1] == widths[stop - 1]:
            sizes[-1] += int(stop - start)
        else:
            sizes.append(int(stop - start))
    return order, sizes


def padded_slots(n: int) -> int:
    """``n`` rounded up to a multiple of 1/32 to 1/16 of the power of two below it (at least 16).

    oneDNN compiles a matrix product for each new shape it sees (about half a millisecond and
    half a megabyte of code each, measured for bfloat16 products) and caches it by shape. Every
    minibatch holds a different number of entities, so without rounding each one would
    compile its products anew; with it, batches share a few shapes, at the cost of at most 6%
    (typically 3%) more rows in per-entity layers.
    """
    step = max(16, 1 << max(n.bit_length() - 5, 0))
    return -(-n // step) * step


def build_layout(
    obs: VecObs,
    entity_names: list[str],
    global_token: bool,
    grids: bool = True,
    tokens: Mapping[str, int] | None = None,
) -> BatchLayout:
    """Lay out the entities of ``obs`` (types in ``entity_names`` order), as padded grids or
    packed (see module docstring). ``tokens`` adds to every row, after its entities and global
    token, that many slots per key (the cells of images, :mod:`entityrl.nn.images`)."""
    rows = obs.num_rows
    type_lengths = [obs.features[name].lengths for name in entity_names]
    slot_names = list(entity_names)
    if global_token:
        type_lengths.append(np.ones(rows, dtype=np.int64))
        slot_names.append("__global__")
    for name, count in (tokens or {}).items():
        type_lengths.append(np.full(rows, count, dtype=np.int64))
        slot_names.append(name)
    lengths = np.zeros(rows, dtype=np.int64)
    for type_len in type_lengths:  # (np.sum of the list would stack it into a matrix first)
        lengths += type_len

    if grids:
        buckets, row_slot, slot_row = _grids(lengths)
    else:
        buckets = []
        row_slot = np.cumsum(lengths) - lengths
        slot_row = np.repeat(np.arange(rows, dtype=np.int64), lengths)
    used = slot_row.shape[0]
    slots = padded_slots(used)
    if slots > used:
        # Trailing padding: a grid of one row without entities, or plain unused slots.
        if grids:
            buckets.append(Bucket(1, slots - used, torch.zeros(1, slots - used, dtype=torch.bool)))
        slot_row = np.concatenate([slot_row, np.full(slots - used, rows, dtype=np.int64)])

    type_positions: dict[str, torch.Tensor] = {}
    offset_in_row = np.zeros(rows, dtype=np.int64)
    for name, type_len in zip(slot_names, type_lengths, strict=True):
        type_positions[name] = _tensor(ranges(row_slot + offset_in_row, type_len))
        offset_in_row += type_len

    visible = None
    if obs.visible:
        flags = np.ones(slots, dtype=np.bool_)
        for name, vis in obs.visible.items():
            flags[type_positions[name].numpy()] = vis.data[:, 0]
        if not flags.all():
            visible = _tensor(flags)

    return BatchLayout(
        num_rows=rows,
        num_slots=slots,
        lengths=lengths,
        inverse_lengths=torch.from_numpy(
            np.reciprocal(np.maximum(lengths, 1, dtype=np.float32)).reshape(rows, 1)
        ),
        type_positions=type_positions,
        slot_row=_tensor(slot_row),
        row_slot=row_slot,
        buckets=buckets,
        padded=slots != int(lengths.sum()),
        sole_type=len(type_lengths) == 1 and not grids and slots == used,
        slot_per_row=not grids and slots == used == rows and bool((lengths == 1).all()),
        visible=visible,
    )


def _grids(
    lengths: npt.NDArray[np.int64],
) -> tuple[list[Bucket], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Buckets of rows of similar length, each a padded grid: (buckets, row_slot, slot_row)."""
    rows = lengths.shape[0]
    order, sizes = plan_buckets(lengths)
    buckets: list[Bucket] = []
    row_slot = np.empty(rows, dtype=np.int64)
    slot_row_parts = []
    slots = 0
    start = 0
    for size in sizes:
        members = order[start : start + size]
        width = int(lengths[members].max()) if size else 0
        row_slot[members] = slots + np.arange(size, dtype=np.int64) * width
        valid = np.arange(width, dtype=np.int64)[None, :] < lengths[members][:, None]
        buckets.append(Bucket(size, width, _tensor(valid)))
        slot_row_parts.append(np.where(valid, members[:, None], rows).reshape(-1))
        slots += size * width
        start += size
    slot_row = np.concatenate(slot_row_parts) if slot_row_parts else np.zeros(0, np.int64)
    return buckets, row_slot, slot_row


def flat_actor_index(actors: RaggedArray, row_slot: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Actor indices within their rows, shifted to indices into the flat entity tensor."""
    return actors.data[:, 0] + np.repeat(row_slot, actors.lengths)


@dataclass
class ActorInputs:
    """The slots of an action's actors (None: every slot, in order) and, for categorical
    actions, their legal choices (None: all legal)."""

    actors: torch.Tensor | None
    legal: torch.Tensor | None = None

    def to(self, device: torch.device) -> ActorInputs:
        return ActorInputs(
            None if self.actors is None else self.actors.to(device),
            None if self.legal is None else self.legal.to(device),
        )

    @property
    def empty(self) -> bool:
        return self.actors is not None and self.actors.shape[0] == 0


def actor_inputs(
    mask: VecCategoricalMask | VecContinuousMask,
    row_slot: npt.NDArray[np.int64],
    num_slots: int,
) -> ActorInputs:
    """The actors' flat slots and legal-choice mask (None if every choice is legal) of a
    categorical or continuous action; the slots are None when every slot acts, in order (one
    entity per row, say), and so need no gather."""
    flat = flat_actor_index(mask.actors, row_slot)
    every_slot = flat.shape[0] == num_slots and np.array_equal(flat, np.arange(num_slots))
    legal = None if mask.mask is None else _tensor(mask.mask.data)
    return ActorInputs(None if every_slot else _tensor(flat), legal)


def select_layout(mask: VecSelectEntityMask, row_slot: npt.NDArray[np.int64]) -> SelectLayout:
    """Lay out a select-entity action: actors, and every actor's candidates as pairs."""
    acting = mask.actors.lengths > 0
    actor_counts = mask.actors.lengths[acting]
    actee_counts = mask.actees.lengths[acting]
    max_actees = int(actee_counts.max()) if actee_counts.shape[0] else 0
    actor_row = np.repeat(np.arange(actor_counts.shape[0], dtype=np.int64), actor_counts)
    # Candidate j exists for actor a iff j < number of candidates in a's row.
    per_actor_actees = np.repeat(actee_counts, actor_counts)
    actee_flat = flat_actor_index(mask.actees, row_slot)
    pair_actor = np.repeat(np.arange(per_actor_actees.shape[0]), per_actor_actees)
    pair_j = ranges(np.zeros_like(per_actor_actees), per_actor_actees)
    first_actee = (np.cumsum(mask.actees.lengths) - mask.actees.lengths)[acting]
    pair_slot = actee_flat[first_actee[actor_row][pair_actor] + pair_j]
    legal = np.arange(max_actees, dtype=np.int64)[None, :] < per_actor_actees[:, None]
    if mask.mask is not None and mask.mask.items:
        # The dense mask is actor-major per row, as the pairs: actor a's candidates are
        # contiguous.
        legal[pair_actor, pair_j] = mask.mask.data[:, 0]
    return SelectLayout(
        actor_flat=_tensor(flat_actor_index(mask.actors, row_slot)),
        max_actees=max_actees,
        legal=_tensor(legal),
        pair_slot=_tensor(pair_slot),
        pair_actor=_tensor(pair_actor),
        pair_pos=_tensor(pair_actor * max_actees + pair_j),
    )
