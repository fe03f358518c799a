"""The bfloat16 linear kernel against torch's bfloat16 linear, its packed-weight cache, and the
torch fallback that precision.linear_in uses wherever the kernel does not serve.

The kernel (entityrl/nn/kernels/linear.cpp) has several code paths: tiles of 1-4 blocks of 16
outputs (and a partial last block), 6-12 rows at a time then the remaining rows one tile, an
odd number of input features (the last one paired with a zero), float32 inputs rounded in the
kernel, float32 or bfloat16 outputs, and rows split between threads for large calls. The shapes
below reach each of them. Results are compared with torch's bfloat16 linear (oneDNN, which uses
the same instruction: on this project's machines the two agree to the bit) and with the exact
product of the bfloat16-rounded operands in float64.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable

import numpy as np
import pytest
import torch
from test_rogue_net import ACTION_SPACE, BATCHER, OBS_SPACE, random_row  # (tests/nn on the path)
from torch import nn
from torch.nn import functional

from entityrl.env import Observation
from entityrl.nn import RogueNet, RogueNetConfig
from entityrl.nn.kernels import build
from entityrl.nn.kernels import linear as lk
from entityrl.nn.precision import cpu_supports, linear_in

DISABLED = os.environ.get("ENTITYRL_NO_KERNELS", "") not in ("", "0")
# Built for another target (ENTITYRL_KERNEL_ARCH), the kernel may lack AVX512-BF16 here too.
HAS_BF16 = cpu_supports("avx512_bf16") and not os.environ.get("ENTITYRL_KERNEL_ARCH")
HAS_COMPILER = build.find_compiler() is not None
CAN_RUN = HAS_BF16 and HAS_COMPILER and not DISABLED

needs_kernel = pytest.mark.skipif(
    not CAN_RUN,
    reason="the kernel runs only on CPUs with AVX512-BF16 (VDPBF16PS), with a C++ compiler and "
    "kernels enabled; here linear_in uses torch, which the fallback tests below check",
)

# d_model 32, 64 and 128 layers (qkv, proj, MLP in and out), then odd and tiny shapes: partial
# output blocks, odd K, one input or output feature.
SHAPES = [
    (d, n) for m in (32, 64, 128) for d, n in ((m, 3 * m), (m, m), (m, 4 * m), (4 * m, m))
] + [(1, 1), (7, 5), (33, 17), (31, 100), (2, 16), (16, 2), (3, 65)]
ROWS = [1, 2, 5, 6, 7, 11, 13, 64, 100, 128, 255, 256, 300]
SHAPE_IDS = [f"{k}to{n}" for k, n in SHAPES]


@pytest.fixture(scope="module", autouse=True)
def _kernel_builds() -> None:
    # Where the kernel can run, failing to build or load it is a bug, not a reason to skip.
    if CAN_RUN:
        assert lk.kernel_available(), build.unavailable_reason


def make_layer(k: int, n: int, seed: int, bias: bool = True) -> nn.Linear:
    torch.manual_seed(seed)
    layer = nn.Linear(k, n, bias=bias)
    with torch.no_grad():  # a bias as large as the sums, so that its rounding matters
        if bias:
            layer.bias.normal_()
    return layer


def torch_bf16(x: torch.Tensor, layer: nn.Linear) -> torch.Tensor:
    """What linear_in computed before the kernel: torch's bfloat16 linear."""
    bias = None if layer.bias is None else layer.bias.bfloat16()
    return functional.linear(x.bfloat16(), layer.weight.bfloat16(), bias)


def exact(x: torch.Tensor, layer: nn.Linear) -> tuple[torch.Tensor, torch.Tensor]:
    """The product of the bfloat16-rounded operands in float64, and a bound on the error of
    summing it in float32 (the kernel's and oneDNN's sums differ only in that rounding)."""
    xr, w = x.bfloat16().double(), layer.weight.detach().bfloat16().double()
    out = xr @ w.T
    magnitude = xr.abs() @ w.abs().T
    if layer.bias is not None:
        b = layer.bias.detach().bfloat16().double()
        out, magnitude = out + b, magnitude + b.abs()
    return out, magnitude * (x.shape[-1] + 1) * 2.0**-24


def assert_bf16_matches(y: torch.Tensor, x: torch.Tensor, layer: nn.Linear) -> int:
    """``y`` (bfloat16) is torch's bfloat16 linear, or its neighbour where the float32 sums
    round differently; returns how many values differ from torch's."""
    ref = torch_bf16(x, layer)
    assert y.dtype == torch.bfloat16 and y.shape == ref.shape
    value, sum_error = exact(x, layer)
    # Each side is within its float32 summation error of the exact value, then rounded
    # (half a bfloat16 unit, 2^-8 of the value, each).
    torch.testing.assert_close(y.double(), value, rtol=2**-8, atol=2 * sum_error.max().item())
    different = int((y != ref).sum())
    bound = (2**-7 * ref.double().abs() + 2 * sum_error).max().item()
    assert (y.double() - ref.double()).abs().max().item() <= bound
    assert different <= max(1, y.numel() // 100), f"{different} of {y.numel()} values differ"
    return different


# ---------------------------------------------------------------------------------------
# The kernel against torch


@needs_kernel
@pytest.mark.parametrize("x_dtype", [torch.float32, torch.bfloat16], ids=["xf32", "xbf16"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize(("k", "n"), SHAPES, ids=SHAPE_IDS)
def test_bfloat16_output_matches_torch(k: int, n: int, bias: bool, x_dtype: torch.dtype) -> None:
    layer = make_layer(k, n, seed=k * 1000 + n, bias=bias)
    packed = lk.pack(layer.weight.detach())
    for rows in ROWS:
        x = torch.randn(rows, k).to(x_dtype)
        y = lk.linear(x, layer.weight, layer.bias, packed)
        assert_bf16_matches(y, x, layer)


@needs_kernel
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize(("k", "n"), SHAPES, ids=SHAPE_IDS)
def test_float32_output_is_the_float32_sum(k: int, n: int, bias: bool) -> None:
    layer = make_layer(k, n, seed=k + n, bias=bias)
    for rows in (1, 7, 100, 300):
        x = torch.randn(rows, k)
        y = lk.linear(x, layer.weight, layer.bias, out_dtype=torch.float32)
        value, sum_error = exact(x, layer)
        assert y.dtype == torch.float32
        torch.testing.assert_close(y.double(), value, rtol=0, atol=sum_error.max().item())
        # Rounded, the float32 output is the bfloat16 output.
        assert torch.equal(y.bfloat16(), lk.linear(x, layer.weight, layer.bias))


def test_kernel_agrees_with_torch_to_the_bit_on_the_policy_shapes() -> None:
    """The figure the module docstring states: on machines whose oneDNN sums with VDPBF16PS in
    feature order (AVX512-BF16 without AMX), the kernel gives torch's values exactly."""
    if not CAN_RUN or cpu_supports("amx_tile"):
        pytest.skip("needs AVX512-BF16 without AMX (AMX sums in another order: 1-unit differences)")
    for k, n in SHAPES[:12]:
        layer = make_layer(k, n, seed=n)
        x = torch.randn(256, k).bfloat16()
        assert torch.equal(lk.linear(x, layer.weight, layer.bias), torch_bf16(x, layer))


@needs_kernel
def test_rounding_to_bfloat16_is_torchs() -> None:
    # With the identity as weight the output is x rounded, and with the identity as x it is
    # the weight rounded: ties (to even), values of many magnitudes, signed zeros. One feature
    # alone (the odd-K path) or paired with a zero (the pair path) also carries values that
    # round up to infinity, NaN, and float32 denormals, which round to bfloat16 denormals that
    # VDPBF16PS (like oneDNN) counts as zero.
    ties = torch.tensor([1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8), 2**-20 * (1 + 2**-8)])
    values = torch.cat([ties, torch.randn(58) * torch.logspace(-30, 30, 58), torch.zeros(2)])
    values[-1] = -0.0
    x = values.repeat(3, 1)
    assert torch.equal(lk.linear(x, torch.eye(64)), x.bfloat16())
    w = values.view(-1, 1).repeat(1, 64)  # row n: value n
    assert torch.equal(lk.linear(torch.eye(64), w), w.bfloat16().T)
    special = torch.tensor([3.4e38, -3.4e38, float("nan"), 1e-39, 1.5, -2.5])
    expected = torch.cat([special[:3], torch.zeros(1), special[4:]]).bfloat16().view(-1, 1)
    for k in (1, 2):
        x = torch.zeros(len(special), k)
        x[:, 0] = special
        out = lk.linear(x, torch.ones(1, k))
        assert torch.equal(out.isnan(), expected.isnan()), k
        assert torch.equal(out.nan_to_num(), expected.nan_to_num()), k


@needs_kernel
def test_shapes_layouts_and_empty_batches() -> None:
    layer = make_layer(20, 24, seed=3)
    x = torch.randn(2, 5, 40)[..., ::2]  # 3-D and not contiguous
    y = lk.linear(x, layer.weight, layer.bias)
    assert y.shape == (2, 5, 24)
    assert torch.equal(y, torch_bf16(x.contiguous(), layer))
    empty = lk.linear(torch.randn(0, 20), layer.weight, layer.bias)
    assert empty.shape == (0, 24) and empty.dtype == torch.bfloat16


@needs_kernel
def test_bad_inputs() -> None:
    w = torch.randn(8, 4)
    with pytest.raises(ValueError, match="do not match"):
        lk.linear(torch.randn(3, 5), w)
    with pytest.raises(ValueError, match=r"bias must be \(8,\)"):
        lk.linear(torch.randn(3, 4), w, torch.randn(7))
    with pytest.raises(ValueError, match="float32 or bfloat16"):
        lk.linear(torch.randn(3, 4, dtype=torch.float64), w)
    with pytest.raises(ValueError, match="float32 or bfloat16"):
        lk.linear(torch.randn(3, 4), w, out_dtype=torch.float16)
    with pytest.raises(ValueError, match="not the packing"):
        lk.linear(torch.randn(3, 4), w, packed=lk.pack(torch.randn(8, 5)))
    with pytest.raises(ValueError, match="2-D float32"):
        lk.pack(torch.randn(8))


@needs_kernel
@pytest.mark.parametrize("rows", [2048, 1999])
def test_threads_give_the_same_results(rows: int, threads: int) -> None:
    # Large enough for the rows to be split between threads (above the C++ MIN_PER_THREAD).
    layer = make_layer(128, 512, seed=rows)
    x = torch.randn(rows, 128).bfloat16()
    y = lk.linear(x, layer.weight, layer.bias)
    torch.set_num_threads(1)
    assert torch.equal(y, lk.linear(x, layer.weight, layer.bias))
    assert_bf16_matches(y, x, layer)


# ---------------------------------------------------------------------------------------
# linear_in: when the kernel serves, and its packed weights


@pytest.fixture
def kernel_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Records the rows of every kernel product that small_batch_linear (linear_in) runs."""
    calls: list[int] = []
    forward = lk._forward

    def spy(kernel: object, x: torch.Tensor, *args: object) -> torch.Tensor:
        calls.append(x.numel() // x.shape[-1])
        return forward(kernel, x, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(lk, "_forward", spy)
    return calls


def bf16_in(layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    return linear_in(torch.bfloat16, layer, x)


@needs_kernel
def test_linear_in_without_gradients_runs_the_kernel(kernel_calls: list[int]) -> None:
    layer = make_layer(32, 96, seed=1)
    x = torch.randn(128, 32, requires_grad=True)
    with torch.no_grad():
        assert torch.equal(bf16_in(layer, x), torch_bf16(x, layer))
    with torch.inference_mode():
        assert torch.equal(bf16_in(layer, x), torch_bf16(x, layer))
    assert kernel_calls == [128, 128]
    # Gradients enabled but nothing to differentiate (frozen layer, plain input): the kernel,
    # without an autograd node.
    layer.requires_grad_(False)
    y = bf16_in(layer, x.detach())
    assert torch.equal(y, torch_bf16(x, layer)) and y.grad_fn is None
    assert kernel_calls == [128, 128, 128]


def relative_error(got: torch.Tensor, exact: torch.Tensor) -> float:
    return ((got.double() - exact).norm() / exact.norm()).item()


@needs_kernel
@pytest.mark.parametrize("rows", [1, 47, 1024, lk.MAX_ROWS + 1])
@pytest.mark.parametrize(("k", "n"), [(32, 96), (64, 32)])
def test_linear_in_with_gradients_runs_the_training_kernels(
    rows: int, k: int, n: int, threads: int
) -> None:
    """The forward and the input gradient are torch's to the bit; the parameters' float32
    gradients are sums in float32, far closer to the exact ones than torch's (which it rounds
    to bfloat16)."""
    layer = make_layer(k, n, seed=rows + n)
    x = torch.randn(rows, k).bfloat16().requires_grad_()
    dy = torch.randn(rows, n).bfloat16()
    y = bf16_in(layer, x)
    assert y.grad_fn is not None and "TrainingLinear" in type(y.grad_fn).__name__
    y.backward(dy)
    got = (y.detach(), x.grad, layer.weight.grad, layer.bias.grad)
    x.grad = layer.weight.grad = layer.bias.grad = None
    ref = torch_bf16(x, layer)
    ref.backward(dy)
    assert torch.equal(got[0], ref.detach())
    assert got[1] is not None and got[1].dtype == torch.bfloat16 and torch.equal(got[1], x.grad)
    exact_w = dy.double().T @ x.detach().double()
    exact_b = dy.double().sum(0)
    for ours, theirs, exact in (
        (got[2], layer.weight.grad, exact_w),
        (got[3], layer.bias.grad, exact_b),
    ):
        assert ours is not None and theirs is not None and ours.dtype == torch.float32
        assert relative_error(ours, exact) <= min(1e-5, relative_error(theirs, exact))


@needs_kernel
def test_training_kernels_decline_what_they_cannot_compute() -> None:
    """Then linear_in is torch's bfloat16 linear with torch's gradients."""
    cases = [
        (make_layer(32, 24, seed=3), torch.randn(8, 32)),  # outputs not a multiple of 16
        (make_layer(24, 32, seed=4), torch.randn(8, 24)),  # inputs not a multiple of 16
        (make_layer(32, 32, seed=5, bias=False), torch.randn(8, 32)),
        (make_layer(32, 32, seed=6), torch.randn(2, 4, 32)),  # not (rows, features)
        (make_layer(32, 32, seed=7), torch.randn(8, 32, dtype=torch.float64)),
    ]
    for layer, x in cases:
        assert lk.training_linear(layer, x) is None
        x.requires_grad_()
        y = bf16_in(layer, x)
        assert "TrainingLinear" not in type(y.grad_fn).__name__
        grads = torch.autograd.grad(y.float().sum(), [x, *layer.parameters()])
        x_ref = x.detach().clone().requires_grad_()
        ref = torch_bf16(x_ref, layer)
        assert torch.equal(y, ref)
        ref_grads = torch.autograd.grad(ref.float().sum(), [x_ref, *layer.parameters()])
        for g, r in zip(grads, ref_grads, strict=True):
            assert torch.equal(g, r)


@needs_kernel
def test_linear_in_leaves_large_batches_and_other_inputs_to_torch(
    kernel_calls: list[int],
) -> None:
    layer = make_layer(32, 32, seed=2)
    with torch.no_grad():
        for rows in (lk.MAX_ROWS, lk.MAX_ROWS + 1):
            x = torch.randn(rows, 32).bfloat16()
            assert torch.equal(bf16_in(layer, x), torch_bf16(x, layer))
        assert kernel_calls == [lk.MAX_ROWS]
        x64 = torch.randn(4, 32, dtype=torch.float64)
        assert torch.equal(bf16_in(layer, x64), torch_bf16(x64, layer))
        with pytest.raises(RuntimeError):  # torch's own error for a mismatched input
            bf16_in(layer, torch.randn(4, 31))
        assert bf16_in(layer, torch.randn(3, 32)).dtype == torch.bfloat16
        assert linear_in(torch.float32, layer, torch.randn(3, 32)).dtype == torch.float32
    assert kernel_calls == [lk.MAX_ROWS, 3]


Change = Callable[[nn.Linear], Callable[[], None]]


def changes() -> list[tuple[str, bool, Change]]:
    """Ways a weight changes in place, whether they bump its version counter, and for each, a
    function preparing the layer (before its first product) and returning the change."""

    def no_grad_add(layer: nn.Linear) -> Callable[[], None]:
        def change() -> None:
            with torch.no_grad():
                layer.weight.add_(0.5)

        return change

    def data_add(layer: nn.Linear) -> Callable[[], None]:
        return lambda: layer.weight.data.add_(0.5)

    def load(layer: nn.Linear) -> Callable[[], None]:
        return lambda: layer.load_state_dict({"weight": torch.randn(96, 32), "bias": layer.bias})

    def flat_fused_adam(layer: nn.Linear) -> Callable[[], None]:
        # How the trainer steps (entityrl.algorithms.common.optimizer): the parameters become views into
        # one flat tensor, which a fused Adam steps.
        params = list(layer.parameters())
        flat = nn.Parameter(torch.cat([p.detach().reshape(-1) for p in params]))
        views = torch.split(flat.data, [p.numel() for p in params])
        for p, view in zip(params, views, strict=True):
            p.data = view.view_as(p)
        opt = torch.optim.Adam([flat], lr=0.1, fused=True)

        def step() -> None:
            flat.grad = torch.randn(flat.shape)
            opt.step()

        return step

    return [
        ("no_grad add_", True, no_grad_add),
        ("data.add_", False, data_add),
        ("load_state_dict", True, load),
        ("flat fused Adam", False, flat_fused_adam),
    ]


@needs_kernel
@pytest.mark.parametrize(
    ("name", "bumps_version", "prepare"), changes(), ids=[c[0] for c in changes()]
)
def test_packed_weights_follow_every_change(
    name: str, bumps_version: bool, prepare: Change, kernel_calls: list[int]
) -> None:
    layer = make_layer(32, 96, seed=4)
    change = prepare(layer)
    x = torch.randn(64, 32).bfloat16()
    with torch.no_grad():
        before = bf16_in(layer, x)
        state = lk._packed[layer][layer.weight.shape]
        assert torch.equal(bf16_in(layer, x), before)
        assert lk._packed[layer][layer.weight.shape] is state  # packed once, not per call
    version, address = layer.weight._version, layer.weight.data_ptr()
    change()
    # Half of these leave the version counter (and all the address) as they were: only the
    # weight's values can tell that the packing is stale.
    assert (layer.weight._version != version) == bumps_version, name
    assert layer.weight.data_ptr() == address, name
    with torch.no_grad():
        after = bf16_in(layer, x)
    assert kernel_calls == [64, 64, 64]
    assert not torch.equal(after, before), name
    assert torch.equal(after, torch_bf16(x, layer)), name


@needs_kernel
def test_one_packing_per_layer_while_it_lives(kernel_calls: list[int]) -> None:
    first, second = make_layer(32, 32, seed=5), make_layer(32, 32, seed=6)
    x = torch.randn(10, 32).bfloat16()
    with torch.no_grad():
        for _ in range(2):
            for layer in (first, second):
                assert torch.equal(bf16_in(layer, x), torch_bf16(x, layer))
        # A new weight of another shape: packed anew.
        first.weight = nn.Parameter(torch.randn(48, 32))
        first.bias = nn.Parameter(torch.randn(48))
        assert torch.equal(bf16_in(first, x), torch_bf16(x, first))
    assert len(kernel_calls) == 5
    assert (48, 32) in lk._packed[first]
    gc.collect()  # layers earlier tests left in reference cycles go first, not in the count
    count = len(lk._packed)
    del second, layer
    gc.collect()
    assert len(lk._packed) == count - 1


# ---------------------------------------------------------------------------------------
# The whole network


def policy_batch(rows: int, seed: int) -> list[Observation]:
    rng = np.random.default_rng(seed)
    return [random_row(rng, int(u), int(i)) for u, i in rng.integers(0, 6, (rows, 2))]


@needs_kernel
@pytest.mark.parametrize("d_model", [32, 64])
def test_rogue_net_act_is_unchanged(
    d_model: int, kernel_calls: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    torch.manual_seed(0)
    config = RogueNetConfig(d_model=d_model, n_head=2, n_layer=2, precision="bfloat16")
    model = RogueNet(OBS_SPACE, ACTION_SPACE, config)
    obs = BATCHER.batch(policy_batch(128, seed=d_model))
    outputs = []
    for _ in range(2):
        torch.manual_seed(1)
        outputs.append(model.act(obs))
        monkeypatch.setattr(lk, "_get_kernel", lambda: None)  # the second run: torch
    # qkv and proj per block (its MLP is one call of the fused kernel, tests/nn/test_mlp_kernel.py)
    assert len(kernel_calls) == 2 * config.n_layer
    kernel, reference = outputs
    torch.testing.assert_close(kernel.values, reference.values, atol=2e-3, rtol=2e-2)
    for name in ACTION_SPACE:
        assert torch.equal(kernel.heads[name].actions, reference.heads[name].actions), name
        torch.testing.assert_close(
            kernel.heads[name].logprob, reference.heads[name].logprob, atol=2e-3, rtol=2e-2
        )


# ---------------------------------------------------------------------------------------
# Without the kernel (these run everywhere)


def check_torch_fallback() -> None:
    """linear_in gives torch's bfloat16 linear, with and without gradients."""
    layer = make_layer(32, 96, seed=7)
    x = torch.randn(100, 32)
    with torch.no_grad():
        assert lk.small_batch_linear(layer, x) is None
        assert torch.equal(bf16_in(layer, x), torch_bf16(x, layer))
    y = bf16_in(layer, x)
    assert torch.equal(y, torch_bf16(x, layer))
    y.float().sum().backward()
    assert layer.weight.grad is not None and layer.weight.grad.dtype == torch.float32


@pytest.mark.usefixtures("no_kernel")
def test_disabled_by_environment_uses_torch() -> None:
    assert not lk.kernel_available()
    check_torch_fallback()
    with pytest.raises(RuntimeError, match="disabled by ENTITYRL_NO_KERNELS"):
        lk.pack(torch.randn(4, 4))
    with pytest.raises(RuntimeError, match="unavailable"):
        lk.linear(torch.randn(2, 4), torch.randn(4, 4))


@pytest.mark.skipif(
    not HAS_COMPILER or DISABLED, reason="no C++ compiler, or kernels disabled by the environment"
)
def test_builds_without_avx512_bf16_and_falls_back(
    monkeypatch: pytest.MonkeyPatch, tmp_path: os.PathLike
) -> None:
    # Compiled for a generic x86-64 (or whatever this machine is) the library still builds,
    # reports that the kernel is not supported, and linear_in uses torch.
    monkeypatch.setenv("ENTITYRL_KERNEL_CACHE", str(tmp_path))
    monkeypatch.setattr(build, "TARGETS", [[]])
    monkeypatch.delenv("ENTITYRL_KERNEL_ARCH", raising=False)
    lk._reset()
    try:
        lib = build.load_library("linear")
        assert lib is not None, build.unavailable_reason
        assert lib.lin_supported() == 0
        assert not lk.kernel_available()
        check_torch_fallback()
    finally:
        monkeypatch.undo()
        lk._reset()
    assert lk.kernel_available() == CAN_RUN


def test_cpu_features_come_from_linux_where_torch_cannot_tell(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """torch before 2.5 has no CPU feature probes: /proc/cpuinfo's flags answer instead."""
    from entityrl.nn import precision

    monkeypatch.delattr(torch.cpu, "_is_avx512_bf16_supported", raising=False)
    monkeypatch.setattr(precision, "_linux_cpu_flags", lambda: frozenset({"avx512_bf16"}))
    assert cpu_supports("avx512_bf16")
    monkeypatch.setattr(precision, "_linux_cpu_flags", lambda: frozenset({"avx2"}))
    assert not cpu_supports("avx512_bf16")
