"""The compiled ragged attention kernel against a plain-torch reference.

The kernel (entityrl/nn/kernels) is hand-vectorised C++ with several code paths (short rows,
rows of one or two vector widths of keys, longer rows; float32 read in place or bfloat16 and
padded heads through a scratch copy; sorted or shuffled rows; one or more threads), so every
path is compared with :func:`reference_attention` in float64, forward and backward, and the
reference itself with a literal per-row loop. Padding slots must come out exactly 0.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from entityrl.nn import kernels
from entityrl.nn.kernels import build, kernel_available, ragged_attention, reference_attention

if os.environ.get("ENTITYRL_NO_KERNELS", "") not in ("", "0"):
    pytest.skip("kernels disabled by ENTITYRL_NO_KERNELS", allow_module_level=True)
if build.find_compiler() is None:
    pytest.skip("no C++ compiler to build the kernel", allow_module_level=True)


@pytest.fixture(scope="module", autouse=True)
def _kernel_builds() -> None:
    # A compiler is present: failing to build is a bug, not a reason to skip.
    assert kernel_available(), build.unavailable_reason


def layout(
    rng: np.random.Generator, lengths: list[int] | np.ndarray, shuffle: bool = False
) -> tuple[np.ndarray, np.ndarray, int]:
    """Rows of the given lengths with 0-2 padding slots before, between and after them."""
    lengths = np.asarray(lengths, dtype=np.int64)
    gaps = rng.integers(0, 3, len(lengths) + 1)
    if not len(lengths):
        return np.zeros(0, np.int64), lengths, int(gaps[0])
    starts = np.cumsum(np.concatenate([[gaps[0]], lengths[:-1] + gaps[1:-1]])).astype(np.int64)
    slots = int(starts[-1] + lengths[-1] + gaps[-1])
    if shuffle:
        order = rng.permutation(len(lengths))
        starts, lengths = starts[order], lengths[order]
    return starts, lengths, slots


def padding_mask(row_slot: np.ndarray, row_len: np.ndarray, slots: int) -> torch.Tensor:
    covered = torch.zeros(slots, dtype=torch.bool)
    for s, n in zip(row_slot, row_len, strict=True):
        covered[s : s + n] = True
    return ~covered


def check(
    row_slot: np.ndarray,
    row_len: np.ndarray,
    slots: int,
    n_head: int,
    d_head: int,
    dtype: torch.dtype = torch.float32,
    visible: torch.Tensor | None = None,
    seed: int = 0,
) -> None:
    """Kernel forward and backward against the float64 reference on the same inputs."""
    gen = torch.Generator().manual_seed(seed)
    d_model = n_head * d_head
    qkv = torch.randn(slots, 3 * d_model, generator=gen).to(dtype)
    grad = torch.randn(slots, d_model, generator=gen).to(dtype)
    x = qkv.clone().requires_grad_()
    out = ragged_attention(x, row_slot, row_len, n_head, visible)
    (dx,) = torch.autograd.grad(out, x, grad)
    x64 = qkv.double().requires_grad_()
    ref = reference_attention(x64, row_slot, row_len, n_head, visible)
    (dref,) = torch.autograd.grad(ref, x64, grad.double())

    assert out.dtype == dtype and dx.dtype == dtype
    assert out.shape == (slots, d_model)
    tol = {"atol": 1e-5, "rtol": 1e-4} if dtype == torch.float32 else {"atol": 2e-2, "rtol": 1e-2}
    torch.testing.assert_close(out.double(), ref, **tol)
    torch.testing.assert_close(dx.double(), dref, **tol)
    pad = padding_mask(row_slot, row_len, slots)
    assert (out[pad] == 0).all() and (dx[pad] == 0).all()


def random_visible(rng: np.random.Generator, slots: int) -> torch.Tensor:
    return torch.from_numpy(rng.random(slots) < 0.6)


# Lengths that reach every path: empty and one-token rows, short rows, rows of one and two
# vector widths of keys (16 floats with AVX-512, 8 with AVX, 4 otherwise), longer ones.
LENGTHS = [0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 23, 31, 32, 33, 40, 64, 65, 100]


@pytest.mark.parametrize("d_head", [8, 16, 32, 64, 12, 4])
@pytest.mark.parametrize("n_head", [1, 2, 3])
def test_float32(d_head: int, n_head: int, threads: int) -> None:
    rng = np.random.default_rng(d_head * 10 + n_head)
    row_slot, row_len, slots = layout(rng, rng.permutation(LENGTHS))
    check(row_slot, row_len, slots, n_head, d_head)


@pytest.mark.parametrize("d_head", [8, 16, 32, 12])
@pytest.mark.parametrize("n_head", [1, 2])
def test_bfloat16(d_head: int, n_head: int, threads: int) -> None:
    rng = np.random.default_rng(d_head * 10 + n_head + 1)
    row_slot, row_len, slots = layout(rng, rng.permutation(LENGTHS))
    check(row_slot, row_len, slots, n_head, d_head, dtype=torch.bfloat16)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("d_head", [8, 16, 12])
def test_visible(d_head: int, dtype: torch.dtype, threads: int) -> None:
    rng = np.random.default_rng(d_head)
    row_slot, row_len, slots = layout(rng, rng.permutation(LENGTHS))
    check(row_slot, row_len, slots, 2, d_head, dtype, random_visible(rng, slots))


def test_shuffled_rows(threads: int) -> None:
    rng = np.random.default_rng(1)
    lengths = rng.integers(0, 50, 60)
    row_slot, row_len, slots = layout(rng, lengths, shuffle=True)
    check(row_slot, row_len, slots, 2, 16, visible=random_visible(rng, slots))


def test_many_rows_split_between_threads(threads: int) -> None:
    # Enough work for the kernel to use every thread.
    rng = np.random.default_rng(2)
    row_slot, row_len, slots = layout(rng, rng.integers(0, 45, 300))
    check(row_slot, row_len, slots, 2, 16, visible=random_visible(rng, slots))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("with_visible", [False, True], ids=["all", "visible"])
def test_training_rows(dtype: torch.dtype, with_visible: bool, threads: int) -> None:
    # The policy's training shape: rows of 33-34 tokens (three vectors of keys), 2 heads of 16.
    rng = np.random.default_rng(10)
    row_slot, row_len, slots = layout(rng, rng.integers(33, 35, 40), shuffle=True)
    visible = random_visible(rng, slots) if with_visible else None
    check(row_slot, row_len, slots, 2, 16, dtype, visible)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_threads_give_identical_results(dtype: torch.dtype) -> None:
    rng = np.random.default_rng(3)
    row_slot, row_len, slots = layout(rng, rng.integers(0, 45, 300))
    qkv = torch.randn(slots, 96).to(dtype).requires_grad_()
    grad = torch.randn(slots, 32).to(dtype)
    results = []
    before = torch.get_num_threads()
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            out = ragged_attention(qkv, row_slot, row_len, 2)
            results.append((out, *torch.autograd.grad(out, qkv, grad)))
    finally:
        torch.set_num_threads(before)
    assert all(torch.equal(a, b) for a, b in zip(*results, strict=True))


@pytest.mark.parametrize(
    "lengths",
    [[], [0, 0], [1], [70], [1, 1, 1], [200]],
    ids=["none", "empty", "1", "70", "1s", "200"],
)
def test_edge_layouts(lengths: list[int]) -> None:
    rng = np.random.default_rng(4)
    row_slot, row_len, slots = layout(rng, lengths)
    check(row_slot, row_len, max(slots, 1), 2, 8)


def test_one_row_covering_all_slots() -> None:
    check(np.array([0]), np.array([37]), 37, 2, 16)


def test_no_slots() -> None:
    out = ragged_attention(torch.zeros(0, 96), np.zeros(0, np.int64), np.zeros(0, np.int64), 2)
    assert out.shape == (0, 32)


@given(
    lengths=st.lists(st.integers(0, 40), min_size=0, max_size=12),
    n_head=st.sampled_from([1, 2, 3]),
    d_head=st.sampled_from([1, 4, 8, 12, 16, 24]),
    with_visible=st.booleans(),
    shuffle=st.booleans(),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_property(
    lengths: list[int], n_head: int, d_head: int, with_visible: bool, shuffle: bool, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    row_slot, row_len, slots = layout(rng, lengths, shuffle)
    slots = max(slots, 1)
    visible = random_visible(rng, slots) if with_visible else None
    check(row_slot, row_len, slots, n_head, d_head, visible=visible, seed=seed)


def literal_attention(
    qkv: torch.Tensor, row_slot: np.ndarray, row_len: np.ndarray, n_head: int, visible: torch.Tensor
) -> torch.Tensor:
    """The contract spelled out one query at a time."""
    d_model = qkv.shape[1] // 3
    d_head = d_model // n_head
    out = torch.zeros(qkv.shape[0], d_model, dtype=qkv.dtype)
    for s, n in zip(row_slot, row_len, strict=True):
        for i in range(s, s + n):
            keys = [j for j in range(s, s + n) if not visible[i] or visible[j]]
            for h in range(n_head):
                cols = slice(h * d_head, (h + 1) * d_head)
                q = qkv[i, cols]
                k = qkv[keys, d_model : 2 * d_model][:, cols]
                v = qkv[keys, 2 * d_model :][:, cols]
                out[i, cols] = torch.softmax(k @ q / d_head**0.5, dim=0) @ v
    return out


def test_reference_is_the_contract() -> None:
    rng = np.random.default_rng(5)
    row_slot, row_len, slots = layout(rng, [3, 0, 1, 6, 2], shuffle=True)
    qkv = torch.randn(slots, 3 * 12, dtype=torch.float64)
    visible = random_visible(rng, slots)
    expected = literal_attention(qkv, row_slot, row_len, 3, visible)
    torch.testing.assert_close(reference_attention(qkv, row_slot, row_len, 3, visible), expected)
    torch.testing.assert_close(
        ragged_attention(qkv.float(), row_slot, row_len, 3, visible).double(),
        expected,
        atol=1e-5,
        rtol=1e-4,
    )


def test_index_types() -> None:
    rng = np.random.default_rng(6)
    row_slot, row_len, slots = layout(rng, rng.integers(0, 30, 20))
    qkv = torch.randn(slots, 48)
    expected = ragged_attention(qkv, row_slot, row_len, 2)
    for rs, rl in [
        (torch.from_numpy(row_slot), torch.from_numpy(row_len)),
        (row_slot.astype(np.int32), row_len.astype(np.int32)),
        (row_slot.tolist(), row_len.tolist()),
        (torch.from_numpy(row_slot).int(), torch.from_numpy(np.stack([row_len, row_len], 1))[:, 0]),
    ]:
        assert torch.equal(ragged_attention(qkv, rs, rl, 2), expected)
    # A non-contiguous qkv and a numpy visibility mask.
    wide = torch.randn(slots, 96)[:, ::2]
    visible = rng.random(slots) < 0.5
    torch.testing.assert_close(
        ragged_attention(wide, row_slot, row_len, 2, visible),
        reference_attention(wide, row_slot, row_len, 2, torch.from_numpy(visible)),
        atol=1e-5,
        rtol=1e-4,
    )


def test_nothing_saved_without_grad() -> None:
    rng = np.random.default_rng(7)
    row_slot, row_len, slots = layout(rng, [5, 20])
    qkv = torch.randn(slots, 48, requires_grad=True)
    with torch.no_grad():
        out = ragged_attention(qkv, row_slot, row_len, 2)
    assert out.grad_fn is None and not out.requires_grad
    with torch.inference_mode():
        out2 = ragged_attention(qkv, row_slot, row_len, 2)
    assert torch.equal(out, out2)
    assert ragged_attention(qkv, row_slot, row_len, 2).grad_fn is not None


def test_other_dtypes_use_the_reference() -> None:
    rng = np.random.default_rng(8)
    row_slot, row_len, slots = layout(rng, [3, 1, 4])
    qkv = torch.randn(slots, 3 * 8, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda x: ragged_attention(x, row_slot, row_len, 2), (qkv,), eps=1e-6, atol=1e-5
    )


def test_wide_heads_fall_back() -> None:
    d_head = kernels.max_head_dim() + 8
    rng = np.random.default_rng(9)
    row_slot, row_len, slots = layout(rng, [3, 5])
    qkv = torch.randn(slots, 3 * d_head)
    with pytest.warns(UserWarning, match="wider than"):
        out = ragged_attention(qkv, row_slot, row_len, 1)
    torch.testing.assert_close(out, reference_attention(qkv, row_slot, row_len, 1))


def test_invalid_inputs() -> None:
    qkv = torch.randn(10, 48)
    rows = np.array([0, 5]), np.array([5, 5])
    with pytest.raises(ValueError, match="outside"):
        ragged_attention(qkv, np.array([0, 6]), np.array([5, 5]), 2)
    with pytest.raises(ValueError, match="outside"):
        ragged_attention(qkv, np.array([-1]), np.array([2]), 2)
    with pytest.raises(ValueError, match="outside"):
        ragged_attention(qkv, np.array([0]), np.array([-1]), 2)
    with pytest.raises(ValueError, match="overlap"):
        ragged_attention(qkv, np.array([5, 0]), np.array([3, 6]), 2)
    with pytest.raises(ValueError, match="divisible"):
        ragged_attention(qkv, *rows, 3)
    with pytest.raises(ValueError, match="3 \\* d_model"):
        ragged_attention(torch.randn(10, 47), *rows, 1)
    with pytest.raises(ValueError, match="rows"):
        ragged_attention(qkv, np.array([0]), np.array([5, 5]), 2)
    with pytest.raises(ValueError, match="visible"):
        ragged_attention(qkv, *rows, 2, torch.ones(9, dtype=torch.bool))


def test_rows_changed_before_backward() -> None:
    row_slot, row_len = np.array([0, 5]), np.array([5, 5])
    qkv = torch.randn(10, 48, requires_grad=True)
    out = ragged_attention(qkv, row_slot, row_len, 2)
    row_len[1] = 4  # what the forward saved no longer matches the rows
    with pytest.raises(ValueError, match="changed"):
        out.sum().backward()


# ---------------------------------------------------------------------------------------
# Building and loading.


@pytest.fixture
def fresh_kernel(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """Lets a test change the environment the kernel is built in; restores it afterwards."""
    kernels._reset()
    yield monkeypatch
    monkeypatch.undo()
    kernels._reset()
    assert kernel_available()


def test_disabled_by_environment(fresh_kernel: pytest.MonkeyPatch) -> None:
    fresh_kernel.setenv("ENTITYRL_NO_KERNELS", "1")
    assert not kernel_available()
    assert "ENTITYRL_NO_KERNELS" in (build.unavailable_reason or "")
    row_slot, row_len = np.array([0, 4]), np.array([3, 2])
    qkv = torch.randn(6, 24)
    torch.testing.assert_close(
        ragged_attention(qkv, row_slot, row_len, 2), reference_attention(qkv, row_slot, row_len, 2)
    )


def test_failed_build_warns_once(fresh_kernel: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "broken-c++"
    fake.write_text("#!/bin/sh\necho 'error: broken compiler' >&2\nexit 1\n")
    fake.chmod(0o755)
    fresh_kernel.setenv("CXX", str(fake))
    fresh_kernel.setenv("ENTITYRL_KERNEL_CACHE", str(tmp_path / "cache"))
    with pytest.warns(UserWarning, match="broken compiler"):
        assert not kernel_available()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not kernel_available()  # no second warning
        ragged_attention(torch.randn(4, 24), np.array([0]), np.array([4]), 2)
    build.wait_for_builds()  # the other kernels' builds, started alongside, fail too
    assert not list((tmp_path / "cache").glob("*.tmp"))


def test_missing_compiler_warns(fresh_kernel: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fresh_kernel.setenv("CXX", str(tmp_path / "no-such-compiler"))
    with pytest.warns(UserWarning, match="no C\\+\\+ compiler"):
        assert not kernel_available()


def test_concurrent_builds_share_one_library(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    source = tmp_path / "tiny.cpp"
    source.write_text('extern "C" int tiny_answer() { return 42; }\n')
    monkeypatch.setenv("ENTITYRL_KERNEL_CACHE", str(tmp_path / "cache"))
    paths: list[Path] = []
    threads = [
        threading.Thread(target=lambda: paths.append(build.build_library(source))) for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(paths) == 3 and len(set(paths)) == 1
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [paths[0].name]
    assert build.build_library(source) == paths[0]  # cached: no rebuild
    source.write_text('extern "C" int tiny_answer() { return 43; }\n')
    assert build.build_library(source) != paths[0]  # edited source: a new library
