"""Ragged arrays: batches of variable-length sequences of fixed-width feature vectors.

A :class:`RaggedArray` is the batch currency of entityrl. Row ``i`` holds ``lengths[i]`` items,
each a vector of ``features`` values; all items of all rows live in one contiguous ``data`` array
of shape ``(items, features)``. Every operation below is a handful of vectorized numpy calls:
none loops over rows in Python, so cost grows with the data, not with the number of rows.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import pairwise
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

SUPPORTED_DTYPES = (np.dtype(np.float32), np.dtype(np.int64), np.dtype(np.bool_))
_INDEX = np.int64

# ``np.arange(n)`` is needed by most operations; slicing one shared read-only buffer saves an
# allocation and a fill each time. Beyond this many items a fresh arange costs little in
# comparison to the operation itself, so the buffer stays small.
_MAX_SHARED_ARANGE = 1 << 20
_shared_arange = np.arange(0, dtype=_INDEX)


def _arange(n: int) -> npt.NDArray[np.int64]:
    """``np.arange(n)``, as a read-only view when it fits the shared buffer."""
    global _shared_arange
    if n > _shared_arange.shape[0]:
        if n > _MAX_SHARED_ARANGE:
            return np.arange(n, dtype=_INDEX)
        _shared_arange = np.arange(min(_MAX_SHARED_ARANGE, 2 * n), dtype=_INDEX)
        _shared_arange.flags.writeable = False
    return _shared_arange[:n]


def _offsets_of(lengths: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """``[0, cumsum(lengths)...]``: the ``len(lengths) + 1`` boundaries of consecutive blocks."""
    offsets = np.empty(lengths.shape[0] + 1, dtype=_INDEX)
    offsets[0] = 0
    np.cumsum(lengths, out=offsets[1:])
    return offsets


def _ranges(
    starts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64], offsets: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """:func:`ranges`, given ``offsets = _offsets_of(lengths)``."""
    # Output position p of block b is p - offsets[b] + starts[b]: a counter plus a per-block shift.
    values = np.repeat(starts - offsets[:-1], lengths)
    values += _arange(values.shape[0])
    return values


def ranges(starts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Concatenation of ``arange(s, s + n)`` for every (s, n) pair, without a Python loop."""
    lengths = np.asarray(lengths, dtype=_INDEX)
    return _ranges(np.asarray(starts, dtype=_INDEX), lengths, _offsets_of(lengths))


class Padding(NamedTuple):
    """How to lay the items of a ragged array out in a padded ``(rows, max_length)`` grid.

    ``index[r, j]`` is the flat item placed at row ``r``, slot ``j`` (0 in padding slots);
    ``batch[r, j]`` is the row number, NaN in padding slots; ``mask[r, j]`` is True where a slot
    holds an item; ``inverse_index[k]`` is the position of flat item ``k`` in the flattened
    ``(rows * max_length)`` grid, so ``padded.reshape(-1, f)[inverse_index]`` recovers the items.
    """

    index: npt.NDArray[np.int64]
    batch: npt.NDArray[np.float32]
    mask: npt.NDArray[np.bool_]
    inverse_index: npt.NDArray[np.int64]


class RaggedArray:
    """A batch of ``size0`` rows; row ``i`` is a ``(lengths[i], features)`` array.

    Build one with :meth:`from_arrays` (a list of 2-D arrays) or :meth:`from_flat` (contiguous
    data plus row lengths); both check their input. The plain constructor trusts its caller:
    ``lengths`` must be non-negative int64 summing to ``len(data)``. Indexing by an ``int``
    returns that row as a numpy view; indexing by a slice, an integer array or a boolean mask
    returns a new :class:`RaggedArray` of those rows (a view for a step-1 slice, else a copy).
    """

    __slots__ = ("_bounds", "_offsets", "data", "lengths")

    def __init__(
        self,
        data: npt.NDArray[np.generic],
        lengths: npt.NDArray[np.int64],
        _offsets: npt.NDArray[np.int64] | None = None,
    ) -> None:
        if data.ndim != 2:
            raise ValueError(
                f"RaggedArray data must be 2-D (items, features), got shape {data.shape}"
            )
        _check_dtype(data.dtype)
        if lengths.ndim != 1:
            raise ValueError(f"RaggedArray lengths must be 1-D, got shape {lengths.shape}")
        self.data = data
        self.lengths = lengths
        self._offsets = _offsets
        self._bounds: memoryview | None = None

    # ---------------------------------------------------------------- constructors
    @classmethod
    def from_flat(
        cls, data: npt.ArrayLike, lengths: npt.ArrayLike, dtype: npt.DTypeLike = None
    ) -> RaggedArray:
        """Rows cut from ``data`` (shape ``(items, features)``) by consecutive ``lengths``.

        1-D ``data`` is read as one feature per item. Without ``dtype``, float data becomes
        float32 and integer data int64. Shares memory with ``data`` and ``lengths`` when they
        already have the right dtypes.
        """
        if dtype is None:
            data_arr = np.asarray(data)
        else:
            data_arr = np.asarray(data, dtype=_check_dtype(np.dtype(dtype)))
        if data_arr.ndim == 1:
            data_arr = data_arr.reshape(-1, 1)
        if data_arr.ndim != 2:
            raise ValueError(
                f"RaggedArray data must be 2-D (items, features), got shape {data_arr.shape}"
            )
        return cls(_canonical(data_arr), _checked_lengths(lengths, data_arr.shape[0]))

    @classmethod
    def from_arrays(
        cls,
        rows: Sequence[npt.ArrayLike],
        features: int | None = None,
        dtype: npt.DTypeLike = np.float32,
    ) -> RaggedArray:
        """Stack a list of 2-D arrays (one per row, same feature count) into one ragged array.

        An empty row may be given as ``[]``. ``features`` is needed only when no row shows the
        feature count. ``dtype=None`` keeps the rows' own (float -> float32, int -> int64).
        """
        if dtype is not None:
            dtype = _check_dtype(np.dtype(dtype))
        try:
            # Fast path: numpy converts the rows and checks that they share one width while it
            # concatenates; "unsafe" casting converts like np.asarray(row, dtype) would.
            data = np.concatenate(rows, dtype=dtype, casting="unsafe")
        except ValueError:
            data = None
        if data is not None and data.ndim == 2 and features in (None, data.shape[1]):
            # Every row was 2-D, so len() is its number of items.
            lengths = np.fromiter(map(len, rows), dtype=_INDEX, count=len(rows))
        else:
            arrays = _conform_rows([np.asarray(r, dtype=dtype) for r in rows], features)
            width = arrays[0].shape[1] if arrays else features
            data = np.concatenate(arrays) if arrays else np.zeros((0, width), dtype or np.float32)
            lengths = np.fromiter((a.shape[0] for a in arrays), dtype=_INDEX, count=len(arrays))
        return cls(_canonical(data), lengths)

    @classmethod
    def empty(cls, rows: int, features: int, dtype: npt.DTypeLike = np.float32) -> RaggedArray:
        """``rows`` rows of zero items each."""
        if rows < 0 or features < 0:
            raise ValueError(
                f"RaggedArray.empty needs rows >= 0 and features >= 0, "
                f"got rows={rows}, features={features}"
            )
        dtype = _check_dtype(np.dtype(dtype))
        return cls(np.zeros((0, features), dtype=dtype), np.zeros(rows, dtype=_INDEX))

    @classmethod
    def concat(cls, arrays: Sequence[RaggedArray]) -> RaggedArray:
        """The rows of all ``arrays``, one after the other (``arrays[0]`` itself if alone)."""
        if not arrays:
            raise ValueError("RaggedArray.concat needs at least one array")
        first = arrays[0]
        for i, a in enumerate(arrays):
            if a.data.shape[1] != first.data.shape[1] or a.data.dtype != first.data.dtype:
                raise ValueError(
                    f"cannot concatenate RaggedArrays: array {i} has {a.features} {a.dtype} "
                    f"features, array 0 has {first.features} {first.dtype} features"
                )
        if len(arrays) == 1:
            return first
        return cls(
            np.concatenate([a.data for a in arrays]), np.concatenate([a.lengths for a in arrays])
        )

    # ---------------------------------------------------------------- shape
    @property
    def size0(self) -> int:
        """Number of rows."""
        return self.lengths.shape[0]

    @property
    def items(self) -> int:
        """Total number of items over all rows."""
        return self.data.shape[0]

    @property
    def features(self) -> int:
        """Width of every item."""
        return self.data.shape[1]

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    @property
    def offsets(self) -> npt.NDArray[np.int64]:
        """``size0 + 1`` offsets: row ``i`` is ``data[offsets[i]:offsets[i + 1]]``."""
        if self._offsets is None:
            self._offsets = _offsets_of(self.lengths)
        return self._offsets

    def __len__(self) -> int:
        return self.lengths.shape[0]

    # ---------------------------------------------------------------- indexing
    def __getitem__(self, key: int | slice | npt.ArrayLike) -> npt.NDArray | RaggedArray:
        if type(key) is int or isinstance(key, np.integer):
            bounds = self._bounds
            if bounds is None:
                # Indexing a memoryview yields Python ints, which slice faster than numpy ints.
                bounds = self._bounds = memoryview(self.offsets)
            i = key + len(bounds) - 1 if key < 0 else key
            if not 0 <= i < len(bounds) - 1:
                raise IndexError(
                    f"row {key} out of range for RaggedArray of {len(bounds) - 1} rows"
                )
            return self.data[bounds[i] : bounds[i + 1]]
        if isinstance(key, slice):
            start, stop, step = key.indices(self.lengths.shape[0])
            if step != 1:
                return self.take(np.arange(start, stop, step, dtype=_INDEX))
            stop = max(start, stop)
            offsets = self.offsets
            return RaggedArray(
                self.data[offsets.item(start) : offsets.item(stop)], self.lengths[start:stop]
            )
        return self.take(key)

    def take(self, rows: npt.ArrayLike) -> RaggedArray:
        """The given rows (integer indices, repeats and negatives allowed, or a boolean mask)."""
        lengths, offsets, items = self._gather(rows)
        # The item indices are in range by construction, so skip numpy's per-index check.
        return RaggedArray(np.take(self.data, items, axis=0, mode="clip"), lengths, offsets)

    def item_indices(self, rows: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Flat item indices of the given rows (as for :meth:`take`), in row order.

        ``other[self.item_indices(rows)]`` selects the same items from any per-item array
        (e.g. a tensor computed from :meth:`flatten`) as ``self.take(rows)`` does.
        """
        return self._gather(rows)[2]

    def _gather(
        self, rows: npt.ArrayLike
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(lengths, offsets, flat item indices) of the selected rows."""
        selected = self._row_numbers(rows)
        lengths = self.lengths[selected]
        offsets = _offsets_of(lengths)
        # offsets[:-1] has one entry per row, so negative row numbers index it correctly.
        return lengths, offsets, _ranges(self.offsets[:-1][selected], lengths, offsets)

    def _row_numbers(self, key: npt.ArrayLike) -> npt.NDArray[np.integer]:
        """Validated 1-D integer row numbers (possibly negative) from an index array or mask."""
        index = np.asarray(key)
        rows = self.lengths.shape[0]
        if index.dtype == np.bool_:
            if index.shape != (rows,):
                raise IndexError(f"boolean row mask has shape {index.shape}, expected ({rows},)")
            return np.flatnonzero(index)
        if index.dtype.kind not in "iu":
            if index.size == 0:  # [] arrives as float64
                return np.zeros(0, dtype=_INDEX)
            raise IndexError(
                f"rows must be selected by integers or booleans, got dtype {index.dtype}"
            )
        if index.ndim != 1:
            raise IndexError(f"row indices must be 1-D, got shape {index.shape}")
        if index.size:
            low, high = index.min(), index.max()
            if low < -rows or high >= rows:
                bad = low if low < -rows else high
                raise IndexError(f"row {bad} out of range for RaggedArray of {rows} rows")
        return index

    def __iter__(self) -> Iterator[npt.NDArray]:
        return iter(self.to_list())

    def to_list(self) -> list[npt.NDArray]:
        """Every row as a numpy view."""
        data = self.data
        return [data[start:stop] for start, stop in pairwise(self.offsets.tolist())]

    # ---------------------------------------------------------------- transforms
    def flatten(self) -> npt.NDArray:
        """All items of all rows as one ``(items, features)`` array (no copy)."""
        return self.data

    def row_index(self) -> npt.NDArray[np.int64]:
        """For each item, the row it belongs to."""
        return np.repeat(_arange(self.size0), self.lengths)

    def position_in_row(self) -> npt.NDArray[np.int64]:
        """For each item, its position within its row."""
        return _ranges(np.zeros_like(self.lengths), self.lengths, self.offsets)

    def add_per_row(self, values: npt.ArrayLike) -> RaggedArray:
        """Add one scalar per row to every item of that row (e.g. actor index + row offset).

        ``values`` are cast to the data's dtype first; a cast that changes kind (float values
        on int64 data) is refused rather than truncated.
        """
        if self.dtype == np.bool_:
            raise TypeError("add_per_row needs float32 or int64 data, got bool")
        vals = np.asarray(values)
        if vals.shape != (self.size0,):
            raise ValueError(
                f"add_per_row needs {self.size0} values (one per row), got shape {vals.shape}"
            )
        if vals.size and not np.can_cast(vals.dtype, self.dtype, casting="same_kind"):
            raise TypeError(f"add_per_row cannot add {vals.dtype} values to {self.dtype} data")
        # One value per element, then one contiguous add: numpy broadcasts a (items, 1) column
        # over a few features with a slow short inner loop.
        out = np.repeat(vals.astype(self.dtype, copy=False), self.lengths * self.features)
        out = out.reshape(self.data.shape)
        out += self.data
        return RaggedArray(out, self.lengths, self._offsets)

    def padding(self, max_length: int | None = None) -> Padding:
        """Metadata to pad the rows into a ``(size0, max_length)`` grid (see :class:`Padding`).

        ``max_length`` defaults to the longest row.
        """
        width = self._grid_width(max_length)
        rows = self.size0
        inverse_index = self._grid_slots(width)
        index = np.zeros(rows * width, dtype=_INDEX)
        index[inverse_index] = _arange(self.items)
        # Each grid row is a run of its row number (one per item) and then a run of NaN: one
        # repeat writes batch in order, several times faster than scattering into it.
        run_values = np.empty(2 * rows, dtype=np.float32)
        run_values[0::2] = _arange(rows)
        run_values[1::2] = np.nan
        run_lengths = np.empty(2 * rows, dtype=_INDEX)
        run_lengths[0::2] = self.lengths
        run_lengths[1::2] = width - self.lengths
        batch = np.repeat(run_values, run_lengths).reshape(rows, width)
        # A slot holds an item exactly where it has a row number; one contiguous pass over
        # batch is several times faster than comparing a (rows, 1) column with a (1, width) row.
        return Padding(index.reshape(rows, width), batch, ~np.isnan(batch), inverse_index)

    def padded(self, fill: float | bool = 0, max_length: int | None = None) -> npt.NDArray:
        """The rows as a dense ``(size0, max_length, features)`` array, ``fill`` in the gaps."""
        width = self._grid_width(max_length)
        out = np.full((self.size0 * width, self.features), fill, dtype=self.dtype)
        if self.features:
            _opaque_rows(out)[self._grid_slots(width)] = _opaque_rows(self.data)
        return out.reshape(self.size0, width, self.features)

    def _grid_width(self, max_length: int | None) -> int:
        longest = int(self.lengths.max()) if self.size0 else 0
        if max_length is None:
            return longest
        if max_length < longest:
            raise ValueError(f"max_length {max_length} is shorter than the longest row ({longest})")
        return max_length

    def _grid_slots(self, width: int) -> npt.NDArray[np.int64]:
        """For each item, its slot in the flattened ``(size0 * width)`` grid."""
        return _ranges(_arange(self.size0) * width, self.lengths, self.offsets)

    def astype(self, dtype: npt.DTypeLike) -> RaggedArray:
        """A copy with data converted to ``dtype`` (one of the supported dtypes)."""
        return RaggedArray(self.data.astype(dtype), self.lengths, self._offsets)

    # ---------------------------------------------------------------- comparison, display
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RaggedArray):
            return NotImplemented
        return (
            self.data.dtype == other.data.dtype
            and self.data.shape == other.data.shape
            and np.array_equal(self.lengths, other.lengths)
            and np.array_equal(self.data, other.data)
        )

    __hash__ = None  # type: ignore[assignment]  # mutable container

    def __reduce__(self) -> tuple[type[RaggedArray], tuple]:
        # Pickle (e.g. between worker processes) and deepcopy without the memoryview cache.
        return RaggedArray, (self.data, self.lengths, self._offsets)

    def __repr__(self) -> str:
        shown = 4
        # Long rows are summarized so the repr of a training batch stays one short line.
        rows = [
            np.array2string(r, separator=", ", threshold=8, edgeitems=1).replace("\n", "")
            for r in self[:shown]
        ]
        more = f", ... {self.size0 - shown} more" if self.size0 > shown else ""
        return (
            f"RaggedArray({self.dtype}, rows={self.size0}, items={self.items}, "
            f"features={self.features}, [{', '.join(rows)}{more}])"
        )


def _opaque_rows(array: npt.NDArray) -> npt.NDArray[np.void]:
    """A 2-D array (with at least one column) seen as a 1-D array of opaque rows.

    numpy scatters whole rows of such a view several times faster than rows of the 2-D array.
    """
    array = np.ascontiguousarray(array)
    return array.view(np.dtype((np.void, array.itemsize * array.shape[1]))).reshape(-1)


def _check_dtype(dtype: np.dtype) -> np.dtype:
    if dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"RaggedArray dtype must be one of float32, int64, bool, got {dtype}")
    return dtype


def _canonical(data: npt.NDArray) -> npt.NDArray:
    """Bring ``data`` to one of the supported dtypes, keeping bool/int/float distinct."""
    if data.dtype in SUPPORTED_DTYPES:
        return data
    kind = data.dtype.kind
    if kind == "f":
        return data.astype(np.float32)
    if kind in "iu":
        return data.astype(np.int64)
    return data  # the constructor names the unsupported dtype


def _checked_lengths(lengths: npt.ArrayLike, items: int) -> npt.NDArray[np.int64]:
    """``lengths`` as int64, after checking they are 1-D, non-negative and sum to ``items``."""
    arr = np.asarray(lengths)
    if arr.ndim != 1:
        raise ValueError(f"RaggedArray lengths must be 1-D, got shape {arr.shape}")
    if arr.dtype.kind not in "iu" and arr.size:
        raise TypeError(f"RaggedArray lengths must be integers, got dtype {arr.dtype}")
    arr = arr.astype(_INDEX, copy=False)
    if arr.size and arr.min() < 0:
        bad = int(np.argmax(arr < 0))
        raise ValueError(f"RaggedArray lengths must be >= 0, got {arr[bad]} at row {bad}")
    total = int(arr.sum())
    if total != items:
        raise ValueError(f"RaggedArray lengths sum to {total} but data has {items} items")
    return arr


def _conform_rows(arrays: list[npt.NDArray], features: int | None) -> list[npt.NDArray]:
    """Rows as ``(n, features)`` arrays, inferring ``features`` from the first row that shows
    it; an empty row given as ``[]`` or ``(0, k)`` becomes ``(0, features)``. Names the first
    row that does not fit.
    """
    if features is None:
        shown = [a.shape[1] for a in arrays if a.ndim == 2 and a.shape[0]] or [
            a.shape[1] for a in arrays if a.ndim == 2
        ]
        if not shown:
            raise ValueError(
                "cannot infer the feature count: no row is a 2-D (items, features) array; "
                "pass features="
            )
        features = shown[0]
    conformed = []
    for i, a in enumerate(arrays):
        if a.ndim == 2 and a.shape[1] == features:
            conformed.append(a)
        elif a.size == 0 and (a.ndim == 1 or (a.ndim == 2 and a.shape[0] == 0)):
            conformed.append(a.reshape(0, features))
        else:
            raise ValueError(f"row {i} has shape {a.shape}, expected (n, {features})")
    return conformed
