"""The compiled LayerNorm and GELU kernels against torch in float64.

The kernels (entityrl/nn/kernels/pointwise.cpp) have several code paths: rows of one, two,
four or eight whole vectors (unrolled) or any width (a partial last vector), rows taken four
at a time and then one by one, float32 or bfloat16 outputs and gradients, and one or more
threads. Row widths and counts below reach each of them, and every result is compared with
the same computation in float64 (the float32 kernel's error must stay near float32 rounding;
bfloat16 results must be the float64 value correctly rounded, give or take a hair).
"""

from __future__ import annotations

import os

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch.nn import functional

from entityrl.nn.kernels import build
from entityrl.nn.kernels.pointwise import add_layer_norm, gelu, kernel_available, layer_norm

if os.environ.get("ENTITYRL_NO_KERNELS", "") not in ("", "0"):
    pytest.skip("kernels disabled by ENTITYRL_NO_KERNELS", allow_module_level=True)
if build.find_compiler() is None:
    pytest.skip("no C++ compiler to build the kernel", allow_module_level=True)

DTYPES = [torch.float32, torch.bfloat16]
DTYPE_IDS = ["f32", "bf16"]


@pytest.fixture(scope="module", autouse=True)
def _kernel_builds() -> None:
    # A compiler is present: failing to build is a bug, not a reason to skip.
    assert kernel_available(), build.unavailable_reason


def assert_rounded(actual: torch.Tensor, exact: torch.Tensor, atol: float) -> None:
    """``actual`` (bfloat16) is ``exact`` (float64) rounded to bfloat16: within half a unit in
    the last place (2^-8 of the value at most), plus ``atol`` for values that the float32
    computation may round to the other side."""
    torch.testing.assert_close(actual.double(), exact, rtol=2**-8, atol=atol)


# ---------------------------------------------------------------------------------------
# LayerNorm


def layer_norm_case(
    rows: int, d: int, out_dtype: torch.dtype, seed: int = 0, offset: float = 0.5
) -> None:
    """Kernel forward and backward (x, weight and bias) against float64 torch."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, d, generator=gen) * 2 + offset
    weight = torch.randn(d, generator=gen)
    bias = torch.randn(d, generator=gen)
    grad = torch.randn(rows, d, generator=gen).to(out_dtype)
    leaves = [t.clone().requires_grad_() for t in (x, weight, bias)]
    out = layer_norm(*leaves, 1e-5, out_dtype)
    grads = torch.autograd.grad(out, leaves, grad)
    leaves64 = [t.double().requires_grad_() for t in (x, weight, bias)]
    ref = functional.layer_norm(leaves64[0], (d,), leaves64[1], leaves64[2], 1e-5)
    refs = torch.autograd.grad(ref, leaves64, grad.double())

    assert out.dtype == out_dtype and out.shape == (rows, d)
    # float32 rounds each value to about 6e-8 of itself, and normalising multiplies that by
    # 1 / std (rstd): far from zero or in rows of nearly equal values, few digits remain.
    x64 = x.double()
    rstd = (x64.var(1, unbiased=False) + 1e-5).rsqrt() if rows else x64.new_ones(1)
    spread = float((x64.abs().amax(1) * rstd).max()) if rows else 0.0
    atol = 1e-6 * (1 + spread * float(weight.abs().max()) + float(bias.abs().max()))
    if out_dtype == torch.float32:
        torch.testing.assert_close(out.double(), ref, atol=atol, rtol=2e-6)
    else:
        assert_rounded(out, ref, atol=atol)
    # Sums over rows (weight, bias) grow with the rows, and so does their rounding; x's
    # gradient is multiplied by rstd once more (316 with one feature, where var = 0).
    x_scale = max(1.0, float(rstd.max()))
    for name, g, r in zip(("x", "weight", "bias"), grads, refs, strict=True):
        assert g.dtype == torch.float32, name
        tol = 10 * atol * (x_scale if name == "x" else 1.0)
        torch.testing.assert_close(g.double(), r, atol=tol, rtol=1e-4, msg=name)


@pytest.mark.parametrize("out_dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("rows", [0, 1, 5, 1000])
@pytest.mark.parametrize("d", [1, 7, 32, 33, 128])
def test_layer_norm(d: int, rows: int, out_dtype: torch.dtype) -> None:
    layer_norm_case(rows, d, out_dtype, seed=d * 10 + rows)


@pytest.mark.parametrize("out_dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("d", [16, 64, 256, 300])
def test_layer_norm_more_widths(d: int, out_dtype: torch.dtype, threads: int) -> None:
    # Whole vectors of every unrolled count (AVX-512: 1, 4; 16 vectors and 300 floats: the
    # general path), on one and two threads.
    layer_norm_case(3000, d, out_dtype, seed=d)


@pytest.mark.parametrize("offset", [1e3, 1e4])
def test_layer_norm_large_mean(offset: float) -> None:
    # Rows far from zero, where float32 keeps few digits of each value's deviation: the kernel
    # must do as well as torch's float32 layer norm (a one-pass variance, mean of squares
    # minus squared mean, would lose every digit).
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(50, 32, generator=gen) * 2 + offset
    weight, bias = torch.randn(32, generator=gen), torch.randn(32, generator=gen)
    ref = functional.layer_norm(x.double(), (32,), weight.double(), bias.double())
    torch_error = (functional.layer_norm(x, (32,), weight, bias).double() - ref).abs().max()
    error = (layer_norm(x, weight, bias).double() - ref).abs().max()
    assert error <= 1.5 * torch_error


@given(
    rows=st.integers(0, 70),
    d=st.integers(1, 100),
    offset=st.floats(-100, 100),
    bf16=st.booleans(),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_layer_norm_property(rows: int, d: int, offset: float, bf16: bool, seed: int) -> None:
    layer_norm_case(rows, d, torch.bfloat16 if bf16 else torch.float32, seed, offset)


def test_layer_norm_threads_agree() -> None:
    # Enough rows for two threads: the output is the same to the bit (rows are independent),
    # the weight and bias gradients sum in another order.
    x = torch.randn(5000, 32, requires_grad=True)
    weight = torch.randn(32, requires_grad=True)
    bias = torch.randn(32, requires_grad=True)
    grad = torch.randn(5000, 32)
    results = []
    before = torch.get_num_threads()
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            out = layer_norm(x, weight, bias)
            results.append((out, *torch.autograd.grad(out, (x, weight, bias), grad)))
    finally:
        torch.set_num_threads(before)
    (out1, dx1, dw1, db1), (out2, dx2, dw2, db2) = results
    assert torch.equal(out1, out2) and torch.equal(dx1, dx2)
    torch.testing.assert_close(dw1, dw2, atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(db1, db2, atol=1e-4, rtol=1e-5)


def test_layer_norm_shapes_and_layouts() -> None:
    weight, bias = torch.randn(8), torch.randn(8)
    x = torch.randn(3, 4, 8)
    expected = functional.layer_norm(x, (8,), weight, bias)
    torch.testing.assert_close(layer_norm(x, weight, bias), expected)
    wide = torch.randn(12, 16)[:, ::2]  # not contiguous
    torch.testing.assert_close(
        layer_norm(wide, weight, bias), functional.layer_norm(wide, (8,), weight, bias)
    )
    out = layer_norm(torch.randn(2, 8), weight, bias, out_dtype=torch.bfloat16)
    assert out.dtype == torch.bfloat16


def test_layer_norm_gradients_only_where_asked() -> None:
    x = torch.randn(40, 32)
    weight = torch.randn(32, requires_grad=True)
    bias = torch.randn(32)
    out = layer_norm(x, weight, bias)
    (dw,) = torch.autograd.grad(out.square().sum(), weight)
    w64 = weight.detach().double().requires_grad_()
    ref = functional.layer_norm(x.double(), (32,), w64, bias.double())
    (dref,) = torch.autograd.grad(ref.square().sum(), w64)
    torch.testing.assert_close(dw.double(), dref, atol=1e-4, rtol=1e-5)


def test_layer_norm_saves_nothing_without_grad() -> None:
    x = torch.randn(10, 32, requires_grad=True)
    weight, bias = torch.randn(32), torch.randn(32)
    with torch.no_grad():
        out = layer_norm(x, weight, bias)
    assert out.grad_fn is None and not out.requires_grad
    with torch.inference_mode():
        assert torch.equal(layer_norm(x, weight, bias), out)
    assert layer_norm(x, weight, bias).grad_fn is not None


def test_layer_norm_bad_shapes() -> None:
    x = torch.randn(4, 8)
    with pytest.raises(ValueError, match=r"weight and bias must be \(8,\)"):
        layer_norm(x, torch.randn(7), torch.randn(8))
    with pytest.raises(ValueError, match=r"weight and bias must be \(8,\)"):
        layer_norm(x, torch.randn(8), torch.randn(8, 1))
    with pytest.raises(ValueError, match="at least one dimension"):
        layer_norm(torch.tensor(1.0), torch.randn(1), torch.randn(1))


def test_layer_norm_other_dtypes_use_torch() -> None:
    x = torch.randn(5, 6, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(6, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda *a: layer_norm(*a), (x, weight, bias))
    half = layer_norm(x.detach(), weight.detach(), bias.detach(), out_dtype=torch.float16)
    assert half.dtype == torch.float16


# ---------------------------------------------------------------------------------------
# A residual sum and the layer norm after it


def add_layer_norm_reference(
    x: torch.Tensor,
    res: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    eps: float,
    out_dtype: torch.dtype,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The same as separate torch operations (the kernel's own layer norm on the sum)."""
    total = x + res
    return total, layer_norm(total, weight, bias, eps, out_dtype)


@pytest.mark.parametrize("res_dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("out_dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("rows", [0, 1, 5, 63, 64, 65, 1000])
@pytest.mark.parametrize("d", [7, 32, 33])
def test_add_layer_norm_is_the_sum_then_the_layer_norm(
    d: int, rows: int, out_dtype: torch.dtype, res_dtype: torch.dtype, threads: int
) -> None:
    gen = torch.Generator().manual_seed(rows * d)
    x = torch.randn(rows, d, generator=gen)
    res = torch.randn(rows, d, generator=gen).to(res_dtype)
    weight, bias = torch.randn(d, generator=gen), torch.randn(d, generator=gen)
    grad_total = torch.randn(rows, d, generator=gen)
    grad = torch.randn(rows, d, generator=gen).to(out_dtype)

    def run(fn) -> list[torch.Tensor]:  # type: ignore[no-untyped-def]
        leaves = [t.clone().requires_grad_() for t in (x, res, weight, bias)]
        total, out = fn(*leaves, 1e-5, out_dtype)
        grads = torch.autograd.grad((total, out), leaves, (grad_total, grad))
        return [total, out, *grads]

    ours, ref = run(add_layer_norm), run(add_layer_norm_reference)
    assert ours[0].dtype == torch.float32 and ours[1].dtype == out_dtype
    assert ours[3].dtype == res_dtype
    # The sum and the normalised values are computed exactly as the separate operations do.
    assert torch.equal(ours[0], ref[0]) and torch.equal(ours[1], ref[1])
    for name, a, b in zip(("x", "res", "weight", "bias"), ours[2:], ref[2:], strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5, msg=name)
    with torch.no_grad():
        total, out = add_layer_norm(x, res, weight, bias, 1e-5, out_dtype)
    assert torch.equal(total, ref[0]) and torch.equal(out, ref[1])


def test_add_layer_norm_with_one_output_used() -> None:
    x, res = torch.randn(10, 32, requires_grad=True), torch.randn(10, 32).bfloat16()
    res.requires_grad_()
    weight, bias = torch.randn(32, requires_grad=True), torch.randn(32, requires_grad=True)
    total, out = add_layer_norm(x, res, weight, bias, 1e-5, torch.bfloat16)
    total.sum().backward()  # the layer norm's output unused
    assert torch.equal(x.grad, torch.ones(10, 32)) and res.grad.dtype == torch.bfloat16
    assert torch.equal(weight.grad, torch.zeros(32))
    x.grad = None
    _, out = add_layer_norm(x, res, weight, bias, 1e-5, torch.bfloat16)
    out.float().sum().backward()  # the sum unused
    _, expected = add_layer_norm_reference(x, res, weight, bias, 1e-5, torch.bfloat16)
    ref_grad = torch.autograd.grad(expected.float().sum(), x)[0]
    torch.testing.assert_close(x.grad, ref_grad, rtol=1e-5, atol=1e-5)


def test_add_layer_norm_shapes_and_fallbacks() -> None:
    x, weight, bias = torch.randn(4, 8), torch.randn(8), torch.randn(8)
    with pytest.raises(ValueError, match="same shape"):
        add_layer_norm(x, torch.randn(4, 9), weight, bias)
    # float64 (no kernel): the torch expressions
    x64, res64 = x.double(), torch.randn(4, 8, dtype=torch.float64)
    total, out = add_layer_norm(x64, res64, weight.double(), bias.double())
    assert torch.equal(total, x64 + res64)
    torch.testing.assert_close(
        out, functional.layer_norm(x64 + res64, (8,), weight.double(), bias.double())
    )


# ---------------------------------------------------------------------------------------
# GELU

# Zeros, tiny and huge values, both sides of the clamping range (|x| = 6) and of the
# polynomials' interval edges.
SPECIAL = [0.0, -0.0, 1e-30, -1e-30, 1e-3, -1e-3, 0.0968, -0.0968, 1.0, -1.0, 3.0, -3.0]
SPECIAL += [5.99, -5.99, 6.0, -6.0, 6.01, -6.01, 10.0, -10.0, 1e4, -1e4, 3e38, -3e38]


def gelu_inputs(n: int, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.cat([torch.tensor(SPECIAL), torch.randn(n, generator=gen) * 3])


def gelu_reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """gelu and its derivative in float64."""
    x64 = x.double().requires_grad_()
    y = functional.gelu(x64)
    (d,) = torch.autograd.grad(y, x64, torch.ones_like(y))
    return y.detach(), d


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("n", [0, 1, 17, 100_000])
def test_gelu(n: int, dtype: torch.dtype, threads: int) -> None:
    x = gelu_inputs(n, seed=n).to(dtype)
    grad = torch.randn(x.shape).to(dtype)
    leaf = x.clone().requires_grad_()
    y = gelu(leaf)
    (dx,) = torch.autograd.grad(y, leaf, grad)
    ref, deriv = gelu_reference(x)
    assert y.dtype == dtype and dx.dtype == dtype and y.shape == x.shape
    if dtype == torch.float32:
        torch.testing.assert_close(y.double(), ref, atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(dx.double(), grad.double() * deriv, atol=1e-6, rtol=1e-6)
    else:
        assert_rounded(y, ref, atol=1e-7)
        # The derivative is within 4e-8, times gradients of up to about 5.
        assert_rounded(dx, grad.double() * deriv, atol=3e-7)
    # And against torch's own float32 or bfloat16 GELU and gradient (which overflow or lose
    # the tails on some of the special values).
    x = x[len(SPECIAL) :]
    y, dx, grad = y[len(SPECIAL) :], dx[len(SPECIAL) :], grad[len(SPECIAL) :]
    leaf_t = x.clone().requires_grad_()
    y_t = functional.gelu(leaf_t)
    (dx_t,) = torch.autograd.grad(y_t, leaf_t, grad)
    torch.testing.assert_close(y, y_t, atol=2e-6, rtol=2e-5 if dtype == torch.float32 else 1e-2)
    torch.testing.assert_close(dx, dx_t, atol=2e-6, rtol=2e-5 if dtype == torch.float32 else 1e-2)


def test_gelu_every_bfloat16() -> None:
    # All 65,280 finite bfloat16 values; below 2^-100 in magnitude the AVX512-BF16 rounding
    # flushes float32 denormal results to zero. The kernel's tails are 0 from x = -5.9 on,
    # where gelu(x) > -2e-8.
    x = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
    x = x[torch.isfinite(x) & ((x.float().abs() > 2**-100) | (x == 0))]
    ref, deriv = gelu_reference(x)
    assert_rounded(gelu(x), ref, atol=2e-8)
    leaf = x.clone().requires_grad_()
    (dx,) = torch.autograd.grad(gelu(leaf), leaf, torch.ones_like(x))
    assert_rounded(dx, deriv, atol=1e-7)


def test_gelu_limits_and_nan() -> None:
    # Beyond |x| = 6 the tails are below float32 rounding of the output: max(x, 0), and a
    # derivative of 1 or 0.
    x = torch.tensor([7.0, 1e20, -7.0, -1e20, float("inf"), float("nan")], requires_grad=True)
    y = gelu(x)
    (dx,) = torch.autograd.grad(y, x, torch.ones(6))
    assert torch.equal(y[:5], torch.tensor([7.0, 1e20, 0.0, 0.0, float("inf")]))
    assert torch.equal(dx[:5], torch.tensor([1.0, 1.0, 0.0, 0.0, 1.0]))
    assert y[5].isnan() and dx[5].isnan()


@given(
    values=st.lists(st.floats(-1e6, 1e6, width=32), min_size=0, max_size=100),
    bf16=st.booleans(),
)
@settings(max_examples=40, deadline=None)
def test_gelu_property(values: list[float], bf16: bool) -> None:
    x = torch.tensor(values, dtype=torch.float32).to(torch.bfloat16 if bf16 else torch.float32)
    ref, _ = gelu_reference(x)
    if bf16:
        assert_rounded(gelu(x), ref, atol=1e-7)
    else:
        torch.testing.assert_close(gelu(x).double(), ref, atol=1e-6, rtol=1e-6)


def test_gelu_threads_agree() -> None:
    x = torch.randn(300_000).to(torch.bfloat16)
    before = torch.get_num_threads()
    try:
        results = []
        for n in (1, 2):
            torch.set_num_threads(n)
            leaf = x.clone().requires_grad_()
            y = gelu(leaf)
            results.append((y, *torch.autograd.grad(y, leaf, torch.ones_like(y))))
    finally:
        torch.set_num_threads(before)
    assert all(torch.equal(a, b) for a, b in zip(*results, strict=True))


def test_gelu_shapes_layouts_and_other_dtypes() -> None:
    x = torch.randn(3, 5, 7)
    torch.testing.assert_close(gelu(x), functional.gelu(x), atol=1e-6, rtol=1e-6)
    wide = torch.randn(6, 20)[:, ::3]
    torch.testing.assert_close(gelu(wide), functional.gelu(wide), atol=1e-6, rtol=1e-6)
    x64 = torch.randn(9, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(gelu, (x64,))
    with torch.no_grad():
        assert gelu(x.requires_grad_()).grad_fn is None


# ---------------------------------------------------------------------------------------
# Without the kernel


@pytest.mark.usefixtures("no_kernel")
def test_disabled_by_environment_uses_torch() -> None:
    assert not kernel_available()
    x = torch.randn(6, 32, requires_grad=True)
    weight, bias = torch.randn(32, requires_grad=True), torch.randn(32)
    out = layer_norm(x, weight, bias, out_dtype=torch.bfloat16)
    expected = functional.layer_norm(x, (32,), weight, bias).to(torch.bfloat16)
    assert torch.equal(out, expected)
    out.float().sum().backward()
    assert x.grad is not None and weight.grad is not None
    h = torch.randn(50).to(torch.bfloat16)
    assert torch.equal(gelu(h), functional.gelu(h))
