"""Ragged arrays: batches of variable-length sequences of fixed-width feature vectors.

A :class:`RaggedArray` is the batch currency of entityrl. Row ``i`` holds ``lengths[i]`` items,
each a vector of ``features`` values; all items of all rows live in one contiguous ``data`` array
of shape ``(items, features)``. Every operation below is a handful of vectorized numpy calls:
none loops over rows in Python, so cost grows with the data, not with the number of rows.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

SUPPORTED_DTYPES = (np.dtype(np.float32), np.dtype(np.int64), np.dtype(np.bool_))
_INDEX = np.int64


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


def ranges(starts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Concatenation of ``arange(s, s + n)`` for every (s, n) pair, without a Python loop."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=_INDEX)
    ends = np.cumsum(lengths)
    # Each output position is its own index minus the start of its block, plus the block's start.
    shift = np.repeat(starts - (ends - lengths), lengths)
    return np.arange(total, dtype=_INDEX) + shift


class RaggedArray:
    """A batch of ``size0`` rows; row ``i`` is a ``(lengths[i], features)`` array.

    Build one with :meth:`from_arrays` (a list of 2-D arrays) or :meth:`from_flat` (contiguous
    data plus row lengths). Indexing by an ``int`` returns that row as a numpy view; indexing by
    a slice, an integer array or a boolean mask returns a new :class:`RaggedArray` of those rows.
    """

    __slots__ = ("_offsets", "data", "lengths")

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
        if data.dtype not in SUPPORTED_DTYPES:
            raise TypeError(
                f"RaggedArray dtype must be one of float32, int64, bool, got {data.dtype}"
            )
        if lengths.ndim != 1:
            raise ValueError(f"RaggedArray lengths must be 1-D, got shape {lengths.shape}")
        self.data = data
        self.lengths = lengths
        self._offsets = _offsets

    # ---------------------------------------------------------------- constructors
    @classmethod
    def from_flat(
        cls, data: npt.ArrayLike, lengths: npt.ArrayLike, dtype: npt.DTypeLike = None
    ) -> RaggedArray:
        """Rows cut from ``data`` (shape ``(items, features)``) by consecutive ``lengths``."""
        data_arr = np.asarray(data, dtype=dtype)
        if data_arr.ndim == 1:
            data_arr = data_arr.reshape(-1, 1)
        lengths_arr = np.asarray(lengths, dtype=_INDEX).reshape(-1)
        if lengths_arr.size and lengths_arr.min() < 0:
            raise ValueError(f"RaggedArray lengths must be >= 0, got {lengths_arr.min()}")
        if int(lengths_arr.sum()) != data_arr.shape[0]:
            raise ValueError(
                f"RaggedArray lengths sum to {int(lengths_arr.sum())} "
                f"but data has {data_arr.shape[0]} items"
            )
        return cls(_canonical(data_arr), lengths_arr)

    @classmethod
    def from_arrays(
        cls,
        rows: Sequence[npt.ArrayLike],
        features: int | None = None,
        dtype: npt.DTypeLike = np.float32,
    ) -> RaggedArray:
        """Stack a list of 2-D arrays (one per row, same feature count) into one ragged array.

        ``features`` is required only when ``rows`` is empty or every row is empty and 1-D.
        """
        arrays = [np.asarray(r, dtype=dtype) for r in rows]
        widths = {a.shape[1] for a in arrays if a.ndim == 2 and a.shape[0] > 0}
        if features is None:
            if len(widths) > 1:
                raise ValueError(f"rows have different feature counts: {sorted(widths)}")
            if not widths:
                widths = {a.shape[1] for a in arrays if a.ndim == 2}
            if len(widths) != 1:
                raise ValueError("cannot infer the feature count of empty rows; pass features=")
            features = widths.pop()
        for i, a in enumerate(arrays):
            if a.size == 0:
                arrays[i] = a.reshape(0, features)
            elif a.ndim != 2 or a.shape[1] != features:
                raise ValueError(f"row {i} has shape {a.shape}, expected (n, {features})")
        lengths = np.fromiter((a.shape[0] for a in arrays), dtype=_INDEX, count=len(arrays))
        data = (
            np.concatenate(arrays, axis=0)
            if arrays
            else np.zeros((0, features), dtype=np.dtype(dtype))
        )
        return cls(_canonical(data), lengths)

    @classmethod
    def empty(cls, rows: int, features: int, dtype: npt.DTypeLike = np.float32) -> RaggedArray:
        """``rows`` rows of zero items each."""
        return cls(np.zeros((0, features), dtype=dtype), np.zeros(rows, dtype=_INDEX))

    @classmethod
    def concat(cls, arrays: Sequence[RaggedArray]) -> RaggedArray:
        """The rows of all ``arrays``, one after the other."""
        if not arrays:
            raise ValueError("RaggedArray.concat needs at least one array")
        first = arrays[0]
        for a in arrays[1:]:
            if a.features != first.features or a.data.dtype != first.data.dtype:
                raise ValueError(
                    f"cannot concatenate RaggedArray of {a.features} {a.data.dtype} features "
                    f"with one of {first.features} {first.data.dtype} features"
                )
        if len(arrays) == 1:
            return first
        return cls(
            np.concatenate([a.data for a in arrays], axis=0),
            np.concatenate([a.lengths for a in arrays]),
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
            offsets = np.zeros(self.size0 + 1, dtype=_INDEX)
            np.cumsum(self.lengths, out=offsets[1:])
            self._offsets = offsets
        return self._offsets

    def __len__(self) -> int:
        return self.size0

    # ---------------------------------------------------------------- indexing
    def __getitem__(self, key: int | slice | npt.ArrayLike) -> npt.NDArray | RaggedArray:
        if isinstance(key, (int, np.integer)):
            i = int(key)
            if i < 0:
                i += self.size0
            if not 0 <= i < self.size0:
                raise IndexError(f"row {key} out of range for RaggedArray of {self.size0} rows")
            offsets = self.offsets
            return self.data[offsets[i] : offsets[i + 1]]
        if isinstance(key, slice):
            start, stop, step = key.indices(self.size0)
            if step == 1:
                stop = max(start, stop)
                offsets = self.offsets
                return RaggedArray(
                    self.data[offsets[start] : offsets[stop]],
                    self.lengths[start:stop],
                    offsets[start : stop + 1] - offsets[start],
                )
            return self.take(np.arange(start, stop, step, dtype=_INDEX))
        index = np.asarray(key)
        if index.dtype == np.bool_:
            if index.shape != (self.size0,):
                raise IndexError(
                    f"boolean row mask has shape {index.shape}, expected ({self.size0},)"
                )
            return self.take(np.flatnonzero(index))
        return self.take(index)

    def take(self, rows: npt.ArrayLike) -> RaggedArray:
        """The given rows, in the given order (repeats allowed)."""
        rows_arr = np.asarray(rows)
        if rows_arr.dtype.kind not in "iu":
            raise IndexError(f"row indices must be integers, got dtype {rows_arr.dtype}")
        rows_arr = rows_arr.reshape(-1)
        if rows_arr.size and (rows_arr.min() < -self.size0 or rows_arr.max() >= self.size0):
            raise IndexError(f"row index out of range for RaggedArray of {self.size0} rows")
        lengths = self.lengths[rows_arr]
        items = ranges(self.offsets[rows_arr], lengths)
        return RaggedArray(self.data[items], lengths)

    def __iter__(self) -> Iterator[npt.NDArray]:
        return iter(self.to_list())

    def to_list(self) -> list[npt.NDArray]:
        """Every row as a numpy view, in one split call."""
        return np.split(self.data, self.offsets[1:-1])

    # ---------------------------------------------------------------- transforms
    def flatten(self) -> npt.NDArray:
        """All items of all rows as one ``(items, features)`` array."""
        return self.data

    def row_index(self) -> npt.NDArray[np.int64]:
        """For each item, the row it belongs to."""
        return np.repeat(np.arange(self.size0, dtype=_INDEX), self.lengths)

    def position_in_row(self) -> npt.NDArray[np.int64]:
        """For each item, its position within its row."""
        return np.arange(self.items, dtype=_INDEX) - np.repeat(self.offsets[:-1], self.lengths)

    def add_per_row(self, values: npt.ArrayLike) -> RaggedArray:
        """Add one scalar per row to every item of that row (e.g. actor index + row offset)."""
        vals = np.asarray(values)
        if vals.shape != (self.size0,):
            raise ValueError(f"add_per_row needs {self.size0} values, got shape {vals.shape}")
        shifted = self.data + np.repeat(vals, self.lengths)[:, None]
        return RaggedArray(shifted.astype(self.data.dtype, copy=False), self.lengths, self._offsets)

    def padding(self, max_length: int | None = None) -> Padding:
        """Metadata to pad the rows into a ``(size0, max_length)`` grid (see :class:`Padding`)."""
        longest = int(self.lengths.max()) if self.size0 else 0
        width = longest if max_length is None else max_length
        if width < longest:
            raise ValueError(f"max_length {width} is shorter than the longest row ({longest})")
        mask = np.arange(width, dtype=_INDEX)[None, :] < self.lengths[:, None]
        index = np.zeros((self.size0, width), dtype=_INDEX)
        index[mask] = np.arange(self.items, dtype=_INDEX)
        batch = np.full((self.size0, width), np.nan, dtype=np.float32)
        batch[mask] = self.row_index()
        inverse_index = self.row_index() * width + self.position_in_row()
        return Padding(index, batch, mask, inverse_index)

    def padded(self, fill: float | bool = 0, max_length: int | None = None) -> npt.NDArray:
        """The rows as a dense ``(size0, max_length, features)`` array, ``fill`` in the gaps."""
        pad = self.padding(max_length)
        out = np.full((*pad.mask.shape, self.features), fill, dtype=self.data.dtype)
        out[pad.mask] = self.data
        return out

    def astype(self, dtype: npt.DTypeLike) -> RaggedArray:
        return RaggedArray(self.data.astype(dtype), self.lengths, self._offsets)

    # ---------------------------------------------------------------- comparison, display
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RaggedArray):
            return NotImplemented
        return (
            self.data.dtype == other.data.dtype
            and self.features == other.features
            and np.array_equal(self.lengths, other.lengths)
            and np.array_equal(self.data, other.data)
        )

    __hash__ = None  # type: ignore[assignment]  # mutable container

    def __repr__(self) -> str:
        shown = 6
        rows = [np.array2string(r, separator=", ") for r in self[: min(self.size0, shown)]]
        more = f", ... {self.size0 - shown} more" if self.size0 > shown else ""
        body = ", ".join(r.replace("\n", "") for r in rows)
        return (
            f"RaggedArray({self.data.dtype}, rows={self.size0}, items={self.items}, "
            f"features={self.features}, [{body}{more}])"
        )


def _canonical(data: npt.NDArray) -> npt.NDArray:
    """Bring ``data`` to one of the supported dtypes, keeping bool/int/float distinct."""
    if data.dtype in SUPPORTED_DTYPES:
        return data
    kind = data.dtype.kind
    if kind == "f":
        return data.astype(np.float32)
    if kind in "iu":
        return data.astype(np.int64)
    raise TypeError(f"RaggedArray dtype must be one of float32, int64, bool, got {data.dtype}")
