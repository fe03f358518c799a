"""The fused MLP kernel (entityrl.nn.kernels.mlp) against the layers run one by one.

The forward must equal torch's bfloat16 path to the bit (it rounds where that path rounds);
the input gradient likewise follows its roundings; the weight and bias gradients are float32
sums, checked against float64 and against torch's (which rounds them to bfloat16).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from torch import nn

from entityrl.nn import RogueNet, RogueNetConfig
from entityrl.nn.kernels import build
from entityrl.nn.kernels import linear as lk
from entityrl.nn.kernels.mlp import fused_mlp
from entityrl.nn.kernels.pointwise import gelu
from entityrl.nn.precision import cpu_supports, linear_in

DISABLED = os.environ.get("ENTITYRL_NO_KERNELS", "") not in ("", "0")
CAN_RUN = (
    cpu_supports("avx512_bf16")
    and not os.environ.get("ENTITYRL_KERNEL_ARCH")  # another target may lack AVX512-BF16
    and build.find_compiler() is not None
    and not DISABLED
)
needs_kernel = pytest.mark.skipif(
    not CAN_RUN, reason="the kernel runs only on CPUs with AVX512-BF16, with a C++ compiler"
)

# Rows around the kernel's chunk of 48 (odd counts pair a row with zeros in the backward).
ROWS = [0, 1, 2, 47, 48, 49, 97, 300]
WIDTHS = [16, 32, 64]


def make_mlp(d: int, seed: int, hidden: int | None = None) -> tuple[nn.Linear, nn.Linear]:
    torch.manual_seed(seed)
    up, down = nn.Linear(d, hidden or 4 * d), nn.Linear(hidden or 4 * d, d)
    with torch.no_grad():  # biases as large as the sums, so that their rounding matters
        up.bias.normal_()
        down.bias.normal_()
    return up, down


def layers_one_by_one(
    up: nn.Linear, down: nn.Linear, x: torch.Tensor, res: torch.Tensor
) -> torch.Tensor:
    """What the transformer block computes without the fused kernel."""
    return res + linear_in(torch.bfloat16, down, gelu(linear_in(torch.bfloat16, up, x)))


def torch_path(up: nn.Linear, down: nn.Linear, x: torch.Tensor, res: torch.Tensor) -> torch.Tensor:
    """The same with torch's own products (the linear kernel serves only small batches)."""
    bf = torch.bfloat16
    z = nn.functional.linear(x, up.weight.to(bf), up.bias.to(bf))
    return res + nn.functional.linear(gelu(z), down.weight.to(bf), down.bias.to(bf))


@pytest.fixture(scope="module", autouse=True)
def _kernel_builds() -> None:
    if CAN_RUN:
        assert lk.kernel_available(), build.unavailable_reason


@needs_kernel
@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("d", WIDTHS)
def test_forward_equals_the_layers_to_the_bit(rows: int, d: int, threads: int) -> None:
    up, down = make_mlp(d, seed=rows + d)
    x, res = torch.randn(rows, d).bfloat16(), torch.randn(rows, d)
    with torch.no_grad():
        y = fused_mlp(up, down, x, res)
        assert y is not None and y.dtype == torch.float32 and y.shape == (rows, d)
        assert torch.equal(y, layers_one_by_one(up, down, x, res))
        assert torch.equal(y, torch_path(up, down, x, res))


@needs_kernel
@pytest.mark.parametrize("rows", ROWS[1:])
@pytest.mark.parametrize("d", WIDTHS)
def test_gradients_match_torch_and_float64(rows: int, d: int, threads: int) -> None:
    up, down = make_mlp(d, seed=rows * d)
    params = [up.weight, up.bias, down.weight, down.bias]
    x = torch.randn(rows, d).bfloat16()
    grad = torch.randn(rows, d)

    def gradients(fn) -> list[torch.Tensor]:  # type: ignore[no-untyped-def]
        for p in params:
            p.grad = None
        xg = x.clone().requires_grad_()
        res = torch.randn(rows, d, requires_grad=True)
        fn(up, down, xg, res).backward(grad)
        return [res.grad, xg.grad, *(p.grad for p in params)]  # type: ignore[list-item]

    (dres, *fused), (_, *ref) = gradients(fused_mlp), gradients(torch_path)
    assert torch.equal(dres, grad)  # the residual passes its gradient through
    for got in fused:
        assert got is not None and got.dtype in (torch.bfloat16, torch.float32)
    # The input gradient rounds where torch's does: equal up to a bfloat16 unit where a
    # float32 sum rounds the other way.
    torch.testing.assert_close(fused[0].float(), ref[0].float(), rtol=2**-7, atol=1e-3)
    # Weight and bias gradients against float64 on the same bfloat16 operands: at least as
    # close as torch's.
    x64 = x.double().requires_grad_()
    w1, b1, w2, b2 = (p.detach().bfloat16().double().requires_grad_() for p in params)
    z = (x64 @ w1.T + b1).bfloat16().double()
    h = nn.functional.gelu(z).bfloat16().double()
    (h @ w2.T + b2).backward(grad.bfloat16().double())
    for got, theirs, exact in zip(
        fused[1:], ref[1:], (w1.grad, b1.grad, w2.grad, b2.grad), strict=True
    ):
        assert exact is not None
        scale = exact.norm().item() + 1e-12
        ours_error = (got.double() - exact).norm().item() / scale
        torch_error = (theirs.double() - exact).norm().item() / scale
        assert ours_error <= max(1.5 * torch_error, 2e-3), (ours_error, torch_error)


@needs_kernel
def test_threads_agree() -> None:
    up, down = make_mlp(32, seed=3)
    x = torch.randn(5000, 32).bfloat16().requires_grad_()
    res, grad = torch.randn(5000, 32), torch.randn(5000, 32)
    results = []
    before = torch.get_num_threads()
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            x.grad = up.weight.grad = down.weight.grad = None
            y = fused_mlp(up, down, x, res)
            y.backward(grad)
            results.append((y.detach(), x.grad.clone(), up.weight.grad.clone()))  # type: ignore[union-attr]
    finally:
        torch.set_num_threads(before)
    (y1, dx1, dw1), (y2, dx2, dw2) = results
    assert torch.equal(y1, y2) and torch.equal(dx1, dx2)
    # Sums over rows split between threads differ only in rounding.
    torch.testing.assert_close(dw1, dw2, rtol=1e-5, atol=1e-4)


@needs_kernel
def test_follows_in_place_weight_changes() -> None:
    # The trainer steps parameters through views of one flat tensor, which does not bump
    # their versions: the kept packing must still never be stale.
    up, down = make_mlp(32, seed=4)
    x, res = torch.randn(64, 32).bfloat16(), torch.randn(64, 32)
    with torch.no_grad():
        fused_mlp(up, down, x, res)
        for layer in (up, down):
            layer.weight.data.mul_(-0.5)
            assert torch.equal(fused_mlp(up, down, x, res), layers_one_by_one(up, down, x, res))


def test_declines_what_it_cannot_compute() -> None:
    up, down = make_mlp(32, seed=5)
    x, res = torch.randn(10, 32), torch.randn(10, 32)
    assert fused_mlp(up, down, x, res) is None  # float32 input
    assert fused_mlp(up, down, x.bfloat16().view(2, 5, 32), res.view(2, 5, 32)) is None
    assert fused_mlp(up, down, x.bfloat16(), res.bfloat16()) is None  # bfloat16 residual
    assert fused_mlp(up, down, x.bfloat16(), res[:9]) is None  # rows differ
    odd_up, odd_down = make_mlp(24, seed=6)  # widths not multiples of 16
    assert fused_mlp(odd_up, odd_down, torch.randn(10, 24).bfloat16(), res[:, :24]) is None
    no_bias = nn.Linear(32, 128, bias=False)
    assert fused_mlp(no_bias, down, x.bfloat16(), res) is None


def test_without_kernel_returns_none(no_kernel: None) -> None:
    up, down = make_mlp(32, seed=7)
    assert fused_mlp(up, down, torch.randn(10, 32).bfloat16(), torch.randn(10, 32)) is None


@needs_kernel
def test_rogue_net_training_step_matches_the_layers_one_by_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The whole network: the same values and (up to summation order) the same gradients
    # whether the blocks' MLPs run fused or as separate layers.
    from test_rogue_net import ACTION_SPACE, BATCHER, OBS_SPACE, random_row  # tests/nn

    import entityrl.nn.transformer as transformer

    # Layer by layer (not the whole fused block), where the MLP is the fused kernel or not.
    monkeypatch.setattr(transformer, "fused_block", lambda *args: None)
    rng = np.random.default_rng(0)
    obs = BATCHER.batch([random_row(rng, 1 + i % 9, i % 5) for i in range(64)])
    torch.manual_seed(0)
    net = RogueNet(OBS_SPACE, ACTION_SPACE, RogueNetConfig(d_model=32, precision="bfloat16"))
    sampled = net.act(obs)
    actions = sampled.actions(obs)

    def step() -> tuple[torch.Tensor, list[torch.Tensor]]:
        net.zero_grad()
        out = net.evaluate(obs, actions)
        loss = out.values.sum() + sum(h.logprob.sum() for h in out.heads.values())
        loss.backward()
        return out.values.detach(), [p.grad.clone() for p in net.parameters() if p.grad is not None]

    values, grads = step()
    monkeypatch.setattr(transformer, "fused_mlp", lambda *args: None)
    plain_values, plain_grads = step()
    assert torch.equal(values, plain_values)
    assert len(grads) == len(plain_grads)
    for ours, theirs in zip(grads, plain_grads, strict=True):
        torch.testing.assert_close(ours, theirs, rtol=0.05, atol=0.05 * theirs.abs().max().item())
