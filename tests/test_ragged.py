"""RaggedArray against a plain reference: a Python list with one numpy array per row."""

from __future__ import annotations

import copy
import pickle
import re

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from entityrl.ragged import RaggedArray, ranges

DTYPES = [np.dtype(np.float32), np.dtype(np.int64), np.dtype(np.bool_)]
FAST = settings(max_examples=60, deadline=None)

# ---------------------------------------------------------------- strategies

_ELEMENTS = {
    np.dtype(np.float32): st.floats(-1e3, 1e3, width=32, allow_nan=False),
    np.dtype(np.int64): st.integers(-(10**6), 10**6),
    np.dtype(np.bool_): st.booleans(),
}


@st.composite
def row_lists(
    draw: st.DrawFn,
    dtype: np.dtype | None = None,
    features: int | None = None,
    max_rows: int = 7,
) -> tuple[list[np.ndarray], int, np.dtype]:
    """A reference ragged batch: ``(rows, features, dtype)`` with rows of shape ``(n, features)``."""
    dtype = draw(st.sampled_from(DTYPES)) if dtype is None else dtype
    features = draw(st.integers(0, 3)) if features is None else features
    lengths = draw(st.lists(st.integers(0, 5), max_size=max_rows))
    rows = [draw(hnp.arrays(dtype, (n, features), elements=_ELEMENTS[dtype])) for n in lengths]
    return rows, features, dtype


@st.composite
def batches(draw: st.DrawFn, **kwargs) -> tuple[RaggedArray, list[np.ndarray]]:
    rows, features, dtype = draw(row_lists(**kwargs))
    return RaggedArray.from_arrays(rows, features=features, dtype=dtype), rows


def assert_matches(ragged: RaggedArray, rows: list[np.ndarray], features: int, dtype) -> None:
    """Every observable of ``ragged`` agrees with the reference ``rows``."""
    lengths = [len(r) for r in rows]
    assert ragged.dtype == np.dtype(dtype)
    assert ragged.size0 == len(ragged) == len(rows)
    assert ragged.features == features
    assert ragged.items == sum(lengths)
    assert ragged.lengths.dtype == np.int64
    np.testing.assert_array_equal(ragged.lengths, lengths)
    np.testing.assert_array_equal(ragged.offsets, np.concatenate([[0], np.cumsum(lengths)]))
    assert ragged.flatten().shape == (sum(lengths), features)
    for listed in (ragged.to_list(), list(ragged)):
        assert len(listed) == len(rows)
        for got, want in zip(listed, rows, strict=True):
            assert got.dtype == np.dtype(dtype)
            np.testing.assert_array_equal(got, want)
    for i, want in enumerate(rows):
        np.testing.assert_array_equal(ragged[i], want)


def flat(rows: list[np.ndarray], features: int, dtype) -> np.ndarray:
    return np.concatenate([np.zeros((0, features), dtype), *rows]).astype(dtype)


# ---------------------------------------------------------------- constructors, shape


@FAST
@given(row_lists())
def test_from_arrays_and_from_flat_match_the_reference(case):
    rows, features, dtype = case
    by_rows = RaggedArray.from_arrays(rows, features=features, dtype=dtype)
    assert_matches(by_rows, rows, features, dtype)
    by_flat = RaggedArray.from_flat(flat(rows, features, dtype), [len(r) for r in rows])
    assert_matches(by_flat, rows, features, dtype)
    assert by_rows == by_flat


@FAST
@given(row_lists(features=2))
def test_from_arrays_infers_features_and_accepts_empty_rows_as_lists(case):
    rows, _, dtype = case
    given_rows = [r if len(r) else [] for r in rows] + [np.ones((1, 2), dtype)]
    ragged = RaggedArray.from_arrays(given_rows, dtype=dtype)
    assert_matches(ragged, [*rows, np.ones((1, 2), dtype)], 2, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_empty(dtype):
    assert_matches(RaggedArray.empty(3, 4, dtype), [np.zeros((0, 4), dtype)] * 3, 4, dtype)
    assert_matches(RaggedArray.empty(0, 2, dtype), [], 2, dtype)


def test_from_flat_infers_a_supported_dtype():
    assert RaggedArray.from_flat(np.zeros((2, 1)), [2]).dtype == np.float32
    assert RaggedArray.from_flat(np.zeros((2, 1), np.int32), [2]).dtype == np.int64
    assert RaggedArray.from_flat(np.zeros((2, 1), np.uint8), [1, 1]).dtype == np.int64
    assert RaggedArray.from_flat(np.zeros((2, 1), bool), [0, 2]).dtype == np.bool_
    assert RaggedArray.from_flat([[1], [2]], [2], dtype=np.float32).dtype == np.float32


def test_from_flat_reads_1d_data_as_one_feature():
    ragged = RaggedArray.from_flat(np.arange(5), [2, 3])
    assert ragged.features == 1
    np.testing.assert_array_equal(ragged[1], [[2], [3], [4]])


def test_from_arrays_defaults_to_float32_and_needs_features_when_nothing_shows_them():
    assert RaggedArray.from_arrays([[[1, 2]]]).dtype == np.float32
    assert RaggedArray.from_arrays([], features=3).features == 3
    assert RaggedArray.from_arrays([np.zeros((0, 5))]).features == 5
    with pytest.raises(ValueError, match="pass features="):
        RaggedArray.from_arrays([])
    with pytest.raises(ValueError, match="pass features="):
        RaggedArray.from_arrays([[], []])


# ---------------------------------------------------------------- indexing

indices = st.integers(-8, 8)


@FAST
@given(batches())
def test_negative_int_index_counts_from_the_end(case):
    ragged, rows = case
    for i in range(1, len(rows) + 1):
        np.testing.assert_array_equal(ragged[-i], rows[-i])
        np.testing.assert_array_equal(ragged[np.int64(-i)], ragged[len(rows) - i])


@FAST
@given(batches(), st.none() | indices, st.none() | indices, st.none() | indices.filter(bool))
def test_slice(case, start, stop, step):
    ragged, rows = case
    key = slice(start, stop, step)
    assert_matches(ragged[key], rows[key], ragged.features, ragged.dtype)


@FAST
@given(batches(), st.data())
def test_index_array_take_and_item_indices(case, data):
    ragged, rows = case
    n = len(rows)
    picks = data.draw(st.lists(st.integers(-n, n - 1), max_size=10) if n else st.just([]))
    want = [rows[i] for i in picks]
    for key in (np.array(picks, dtype=np.int64), np.array(picks, dtype=np.int32), picks):
        assert_matches(ragged[key], want, ragged.features, ragged.dtype)
        assert_matches(ragged.take(key), want, ragged.features, ragged.dtype)
    items = ragged.item_indices(picks)
    assert items.dtype == np.int64
    np.testing.assert_array_equal(
        ragged.flatten()[items], flat(want, ragged.features, ragged.dtype)
    )


@FAST
@given(batches(), st.data())
def test_boolean_mask(case, data):
    ragged, rows = case
    keep = data.draw(st.lists(st.booleans(), min_size=len(rows), max_size=len(rows)))
    want = [r for r, k in zip(rows, keep, strict=True) if k]
    for key in (np.array(keep, dtype=bool), keep):
        assert_matches(ragged[key], want, ragged.features, ragged.dtype)


def test_rows_are_views_and_selections_are_copies():
    ragged = RaggedArray.from_flat(np.zeros((3, 1), np.int64), [1, 2])
    ragged[1][0, 0] = 7
    assert ragged.data[1, 0] == 7
    ragged[[1]].data[:] = 9
    assert ragged.data[1, 0] == 7


# ---------------------------------------------------------------- combining, iterating


@st.composite
def compatible_batches(draw: st.DrawFn) -> list[tuple[RaggedArray, list[np.ndarray]]]:
    dtype = draw(st.sampled_from(DTYPES))
    features = draw(st.integers(0, 3))
    return draw(st.lists(batches(dtype=dtype, features=features), min_size=1, max_size=4))


@FAST
@given(compatible_batches())
def test_concat(parts):
    first = parts[0][0]
    joined = RaggedArray.concat([ragged for ragged, _ in parts])
    assert_matches(joined, [r for _, rows in parts for r in rows], first.features, first.dtype)


@FAST
@given(batches())
def test_row_index_and_position_in_row(case):
    ragged, rows = case
    want_rows = [i for i, r in enumerate(rows) for _ in range(len(r))]
    want_positions = [j for r in rows for j in range(len(r))]
    assert ragged.row_index().dtype == ragged.position_in_row().dtype == np.int64
    np.testing.assert_array_equal(ragged.row_index(), want_rows)
    np.testing.assert_array_equal(ragged.position_in_row(), want_positions)


@FAST
@given(batches(dtype=np.dtype(np.int64)), st.data())
def test_add_per_row_int(case, data):
    ragged, rows = case
    values = data.draw(st.lists(st.integers(-100, 100), min_size=len(rows), max_size=len(rows)))
    want = [r + v for r, v in zip(rows, values, strict=True)]
    assert_matches(ragged.add_per_row(np.array(values)), want, ragged.features, np.int64)


@FAST
@given(batches(dtype=np.dtype(np.float32)), st.data())
def test_add_per_row_float(case, data):
    ragged, rows = case
    values = data.draw(
        st.lists(st.floats(-10, 10, width=32), min_size=len(rows), max_size=len(rows))
    )
    want = [r + np.float32(v) for r, v in zip(rows, values, strict=True)]
    assert_matches(
        ragged.add_per_row(np.array(values, np.float32)), want, ragged.features, np.float32
    )


def test_add_per_row_refuses_lossy_or_meaningless_additions():
    ints = RaggedArray.from_flat(np.zeros((2, 1), np.int64), [1, 1])
    with pytest.raises(TypeError, match=r"float64 .* int64"):
        ints.add_per_row(np.array([0.5, 1.5]))
    with pytest.raises(TypeError, match="bool"):
        RaggedArray.from_flat(np.zeros((2, 1), bool), [1, 1]).add_per_row(np.array([1, 1]))
    with pytest.raises(ValueError, match=r"2 values \(one per row\), got shape \(3,\)"):
        ints.add_per_row(np.array([1, 2, 3]))


@FAST
@given(st.lists(st.tuples(st.integers(-50, 50), st.integers(0, 6)), max_size=8))
def test_ranges(pairs):
    starts = np.array([s for s, _ in pairs], dtype=np.int64)
    lengths = np.array([n for _, n in pairs], dtype=np.int64)
    want = [s + j for s, n in pairs for j in range(n)]
    got = ranges(starts, lengths)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------- padding


def reference_padding(rows: list[np.ndarray], width: int):
    index = np.zeros((len(rows), width), np.int64)
    batch = np.full((len(rows), width), np.nan, np.float32)
    mask = np.zeros((len(rows), width), bool)
    inverse, item = [], 0
    for r, row in enumerate(rows):
        for j in range(len(row)):
            index[r, j], batch[r, j], mask[r, j] = item, r, True
            inverse.append(r * width + j)
            item += 1
    return index, batch, mask, np.array(inverse, np.int64)


@FAST
@given(batches(), st.integers(0, 3))
def test_padding_and_padded(case, extra):
    ragged, rows = case
    longest = max((len(r) for r in rows), default=0)
    for width in (None, longest + extra):
        pad = ragged.padding(width)
        want = reference_padding(rows, longest if width is None else width)
        for got, expected in zip(pad, want, strict=True):
            assert got.dtype == expected.dtype
            np.testing.assert_array_equal(got, expected)
        fill = ragged.dtype.type(1)
        padded = ragged.padded(fill=fill, max_length=width)
        assert padded.dtype == ragged.dtype
        assert padded.shape == (*pad.mask.shape, ragged.features)
        np.testing.assert_array_equal(
            padded.reshape(pad.mask.size, ragged.features)[pad.inverse_index], ragged.flatten()
        )
        assert (padded[~pad.mask] == fill).all()
        np.testing.assert_array_equal(padded[pad.mask], ragged.flatten())


def test_padding_documented_example():
    ragged = RaggedArray.from_flat(np.arange(14 * 2).reshape(14, 2), [6, 3, 5])
    pad = ragged.padding()
    np.testing.assert_array_equal(
        pad.index, [list(range(6)), [6, 7, 8, 0, 0, 0], [9, 10, 11, 12, 13, 0]]
    )
    nan = np.nan
    np.testing.assert_array_equal(
        pad.batch, [[0] * 6, [1, 1, 1, nan, nan, nan], [2, 2, 2, 2, 2, nan]]
    )
    np.testing.assert_array_equal(pad.inverse_index, [*range(9), *range(12, 17)])
    np.testing.assert_array_equal(
        ragged.padded().reshape(-1, 2)[pad.inverse_index], ragged.flatten()
    )


def test_padding_rejects_a_too_short_max_length():
    with pytest.raises(ValueError, match="max_length 2 is shorter than the longest row \\(3\\)"):
        RaggedArray.from_flat(np.zeros((4, 1)), [1, 3]).padding(2)


# ---------------------------------------------------------------- dtype, equality, display


@FAST
@given(batches(), st.sampled_from(DTYPES))
def test_astype(case, dtype):
    ragged, rows = case
    assert_matches(ragged.astype(dtype), [r.astype(dtype) for r in rows], ragged.features, dtype)


@FAST
@given(batches())
def test_equality(case):
    ragged, rows = case
    same = RaggedArray.from_arrays([r.copy() for r in rows], ragged.features, ragged.dtype)
    assert ragged == same
    assert (ragged != same) is False
    if ragged.items and ragged.features:
        changed = same.flatten().copy()
        changed[0, 0] = not changed[0, 0] if ragged.dtype == np.bool_ else changed[0, 0] + 1
        assert ragged != RaggedArray.from_flat(changed, ragged.lengths)
    if ragged.size0:
        moved = ragged.lengths.copy()
        moved[0] += 1
        moved[-1] -= 1
        if moved[-1] >= 0 and ragged.size0 > 1:
            assert ragged != RaggedArray.from_flat(ragged.flatten(), moved)
    other_dtype = np.int64 if ragged.dtype != np.int64 else np.float32
    assert ragged != ragged.astype(other_dtype)
    assert ragged != RaggedArray.empty(ragged.size0, ragged.features + 1, ragged.dtype)
    assert ragged != rows
    assert ragged != "ragged"


@pytest.mark.parametrize("dtype", DTYPES)
def test_pickle_and_deepcopy_round_trip_after_row_access(dtype):
    ragged = RaggedArray.from_flat(np.arange(6).reshape(3, 2).astype(dtype), [1, 0, 2])
    ragged[2]  # caches row bounds
    for copied in (pickle.loads(pickle.dumps(ragged)), copy.deepcopy(ragged)):
        assert copied == ragged
        np.testing.assert_array_equal(copied[2], ragged[2])
        assert not np.shares_memory(copied.data, ragged.data)


def test_padded_reads_non_contiguous_data():
    columns = np.arange(12, dtype=np.int64).reshape(6, 2)
    ragged = RaggedArray(columns[:, 1:], np.array([2, 4]))
    np.testing.assert_array_equal(ragged.padded(fill=-1)[:, :, 0], [[1, 3, -1, -1], [5, 7, 9, 11]])


def test_unhashable():
    with pytest.raises(TypeError):
        hash(RaggedArray.empty(1, 1))


def test_repr_is_short_and_shows_dtype_and_shape():
    big = RaggedArray.from_flat(np.zeros((64 * 100, 16), np.float32), np.full(100, 64))
    text = repr(big)
    assert len(text) < 600
    assert "float32" in text and "rows=100" in text and "items=6400" in text
    assert "features=16" in text
    small = RaggedArray.from_flat(np.array([[1], [2], [3]], np.int64), [1, 0, 2])
    assert repr(small) == (
        "RaggedArray(int64, rows=3, items=3, features=1, [[[1]], [], [[2], [3]]])"
    )
    assert repr(RaggedArray.empty(0, 2, bool)) == (
        "RaggedArray(bool, rows=0, items=0, features=2, [])"
    )


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("build", "error", "message"),
    [
        (
            lambda: RaggedArray.from_flat(np.zeros((2, 1, 1)), [2]),
            ValueError,
            "data must be 2-D (items, features), got shape (2, 1, 1)",
        ),
        (lambda: RaggedArray.from_flat(np.zeros((2, 1), complex), [2]), TypeError, "complex128"),
        (
            lambda: RaggedArray.from_flat(np.zeros((2, 1)), [2], dtype=np.float64),
            TypeError,
            "float32, int64, bool, got float64",
        ),
        (
            lambda: RaggedArray.from_flat(np.zeros((3, 1)), [1, 1]),
            ValueError,
            "lengths sum to 2 but data has 3 items",
        ),
        (lambda: RaggedArray.from_flat(np.zeros((0, 1)), [1, -1]), ValueError, "got -1 at row 1"),
        (lambda: RaggedArray.from_flat(np.zeros((2, 1)), [1.5, 0.5]), TypeError, "float64"),
        (
            lambda: RaggedArray.from_flat(np.zeros((2, 1)), [[2]]),
            ValueError,
            "lengths must be 1-D, got shape (1, 1)",
        ),
        (
            lambda: RaggedArray.from_arrays([np.zeros((1, 2)), np.zeros((1, 3))]),
            ValueError,
            "row 1 has shape (1, 3), expected (n, 2)",
        ),
        (
            lambda: RaggedArray.from_arrays([np.zeros(3)]),
            ValueError,
            "no row is a 2-D (items, features) array",
        ),
        (
            lambda: RaggedArray.from_arrays([np.zeros(3)], features=1),
            ValueError,
            "row 0 has shape (3,), expected (n, 1)",
        ),
        (
            lambda: RaggedArray.from_arrays([np.zeros((1, 2))], features=3),
            ValueError,
            "row 0 has shape (1, 2), expected (n, 3)",
        ),
        (
            lambda: RaggedArray.from_arrays([np.zeros((1, 2))], dtype=np.float16),
            TypeError,
            "got float16",
        ),
        (lambda: RaggedArray.empty(-1, 2), ValueError, "rows=-1"),
        (lambda: RaggedArray.empty(1, 2, np.uint8), TypeError, "got uint8"),
        (lambda: RaggedArray.concat([]), ValueError, "at least one"),
        (
            lambda: RaggedArray.concat([RaggedArray.empty(1, 2), RaggedArray.empty(1, 3)]),
            ValueError,
            "array 1 has 3 float32 features, array 0 has 2 float32 features",
        ),
        (
            lambda: RaggedArray.concat([RaggedArray.empty(1, 2), RaggedArray.empty(1, 2, bool)]),
            ValueError,
            "array 1 has 2 bool features, array 0 has 2 float32 features",
        ),
        (lambda: RaggedArray.empty(1, 2).astype(np.float64), TypeError, "got float64"),
    ],
)
def test_bad_construction_is_named(build, error, message):
    with pytest.raises(error, match=re.escape(message)):
        build()


@pytest.mark.parametrize(
    ("key", "error", "message"),
    [
        (3, IndexError, "row 3 out of range for RaggedArray of 3 rows"),
        (-4, IndexError, "row -4 out of range for RaggedArray of 3 rows"),
        ([0, 3], IndexError, "row 3 out of range for RaggedArray of 3 rows"),
        (np.array([-4, 0]), IndexError, "row -4 out of range for RaggedArray of 3 rows"),
        (np.array([0.0, 1.0]), IndexError, "integers or booleans, got dtype float64"),
        (np.zeros((1, 2), np.int64), IndexError, "1-D, got shape (1, 2)"),
        (np.array([True, False]), IndexError, "boolean row mask has shape (2,), expected (3,)"),
        ("a", IndexError, "got dtype <U1"),
    ],
)
def test_bad_row_keys_are_named(key, error, message):
    ragged = RaggedArray.from_flat(np.zeros((3, 1)), [1, 1, 1])
    with pytest.raises(error, match=re.escape(message)):
        ragged[key]
