"""Ragged arrays built from what each environment of a batch gave (shared by the batcher and
the action kinds)."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from typing import Any

import numpy as np
import numpy.typing as npt

from entityrl.ragged import RaggedArray, ranges


def stack_rows(blocks: Sequence[Any], width: int, dtype: npt.DTypeLike) -> npt.NDArray[Any]:
    """Blocks of rows (each an array or a list of rows of ``width`` values) as one
    ``(rows, width)`` array. Lists are joined first and converted in one numpy call, which is
    far cheaper than converting many short lists one by one."""
    if blocks and all(type(block) is np.ndarray and block.ndim == 2 for block in blocks):
        # The common case, one 2-D array per environment: no per-block conversion. Casting
        # within a kind or up (ints to floats, float64 to float32) only: complex or string
        # features and non-boolean masks raise here, for the checks to explain, at no cost.
        try:
            stacked = np.concatenate(blocks, dtype=dtype, casting="same_kind")  # type: ignore[arg-type]
        except TypeError:
            # An empty array holds no value to cast wrongly (a float array as the mask of no
            # actors, say): only the others count.
            given = [block for block in blocks if block.size]
            if len(given) == len(blocks):
                raise
            stacked = np.concatenate(
                [*given, np.zeros((0, width), dtype=dtype)], dtype=dtype, casting="same_kind"
            )
        if stacked.shape[1] == width:
            return stacked
    if any(isinstance(block, np.ndarray) for block in blocks):
        arrays = [np.asarray(block, dtype=dtype).reshape(len(block), width) for block in blocks]
        return np.concatenate(arrays) if arrays else np.zeros((0, width), dtype=dtype)
    rows = list(chain.from_iterable(blocks))
    return np.array(rows, dtype=dtype).reshape(len(rows), width)


def fill_rows(
    given: Sequence[tuple[int, Any]],
    lengths: npt.NDArray[np.int64],
    blocks: Sequence[Any],
    width: int,
) -> RaggedArray | None:
    """A boolean ragged array of ``lengths`` rows of ``width`` flags: True everywhere except
    in the rows ``given`` (their numbers), which hold ``blocks``. None if no row is given."""
    if not given:
        return None
    data = np.ones((int(lengths.sum()), width), dtype=np.bool_)
    rows = np.fromiter((i for i, _ in given), dtype=np.int64, count=len(given))
    offsets = np.cumsum(lengths) - lengths
    data[ranges(offsets[rows], lengths[rows])] = stack_rows(blocks, width, np.bool_)
    return RaggedArray(data, lengths)


def all_true(lengths: npt.NDArray[np.int64], width: int) -> RaggedArray:
    """A boolean ragged array of ``lengths`` rows of ``width`` True flags."""
    return RaggedArray(np.ones((int(lengths.sum()), width), dtype=np.bool_), lengths)


def locate(rows: RaggedArray, k: int) -> str:
    """Where flat item ``k`` of a ragged array sits: its row and its position in the row."""
    row = int(np.searchsorted(rows.offsets, k, side="right")) - 1
    return f"row {row}, actor {k - int(rows.offsets[row])}"
