"""FlatOptimizer: the same steps as a torch optimizer over the separate parameters."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest
import torch
from torch import nn

from entityrl.algorithms.common.optimizer import Adam, FlatOptimizer


def small_net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 2), nn.LayerNorm(2))


def adam(params: list[nn.Parameter]) -> torch.optim.Optimizer:
    return torch.optim.Adam(params, lr=0.01, eps=1e-5)


def train(net: nn.Module, step, zero_grad, steps: int = 5, unused_head: bool = False) -> None:
    gen = torch.Generator().manual_seed(1)
    for _ in range(steps):
        zero_grad()
        x = torch.randn(7, 3, generator=gen)
        # The last layer norm gets no gradient when unused (a head without actors).
        out = net[:3](x) if unused_head else net(x)
        (out**2).sum().backward()
        step()


@pytest.mark.parametrize("max_norm", [1e9, 0.05])
def test_steps_match_a_plain_optimizer_with_clipping(max_norm: float) -> None:
    plain, flat = small_net(), small_net()
    reference = adam(list(plain.parameters()))
    norms: list[float] = []

    def plain_step() -> None:
        norms.append(float(nn.utils.clip_grad_norm_(plain.parameters(), max_norm)))
        reference.step()

    train(plain, plain_step, lambda: reference.zero_grad(set_to_none=True))
    optimizer = FlatOptimizer(flat, adam)
    flat_norms: list[float] = []
    train(flat, lambda: flat_norms.append(optimizer.step(max_norm)), optimizer.zero_grad)
    for a, b in zip(plain.parameters(), flat.parameters(), strict=True):
        torch.testing.assert_close(a, b)
    assert flat_norms == pytest.approx(norms, rel=1e-5)
    assert norms[0] > 0.05  # the small limit really clips


def test_parameters_are_views_of_the_flat_tensor() -> None:
    net = small_net()
    before = copy.deepcopy(net.state_dict())
    optimizer = FlatOptimizer(net, adam)
    for key, value in net.state_dict().items():
        assert torch.equal(value, before[key])  # packing keeps the values
    with torch.no_grad():
        optimizer.flat.zero_()
    assert all(not p.detach().any() for p in net.parameters())
    net.load_state_dict(before)  # copies into the views
    assert torch.equal(optimizer.flat[:15], before["0.weight"].reshape(-1))


def test_a_parameter_without_gradient_counts_as_zeros() -> None:
    plain, flat = small_net(), small_net()
    reference = adam(list(plain.parameters()))
    train(plain, reference.step, lambda: reference.zero_grad(set_to_none=True), unused_head=True)
    optimizer = FlatOptimizer(flat, adam)
    train(flat, lambda: optimizer.step(1e9), optimizer.zero_grad, unused_head=True)
    for a, b in zip(plain.parameters(), flat.parameters(), strict=True):
        # torch's Adam skips a parameter without gradient; a zero gradient leaves it unchanged.
        torch.testing.assert_close(a, b)


def test_state_dict_has_the_layout_of_a_plain_optimizer_and_loads_both_ways() -> None:
    plain, flat = small_net(), small_net()
    reference = adam(list(plain.parameters()))
    train(plain, reference.step, lambda: reference.zero_grad(set_to_none=True), steps=3)
    optimizer = FlatOptimizer(flat, adam)
    train(flat, lambda: optimizer.step(1e9), optimizer.zero_grad, steps=3)
    saved, ours = reference.state_dict(), optimizer.state_dict()
    assert ours["param_groups"][0]["params"] == saved["param_groups"][0]["params"]
    for i, entry in saved["state"].items():
        for key, value in entry.items():
            torch.testing.assert_close(ours["state"][i][key], value)
    # A plain optimizer's state (older checkpoints) continues training identically.
    copied = copy.deepcopy(plain)
    resumed = FlatOptimizer(copied, adam)
    resumed.load_state_dict(saved)
    train(plain, reference.step, lambda: reference.zero_grad(set_to_none=True), steps=2)
    train(copied, lambda: resumed.step(1e9), resumed.zero_grad, steps=2)
    for a, b in zip(plain.parameters(), copied.parameters(), strict=True):
        torch.testing.assert_close(a, b)


def test_bad_state_is_named() -> None:
    optimizer = FlatOptimizer(small_net(), adam)
    other = adam(list(nn.Linear(2, 2).parameters()))
    with pytest.raises(ValueError, match="has 2 parameters in 1 groups; expected 6 parameters"):
        optimizer.load_state_dict(other.state_dict())


def test_a_module_without_parameters_is_refused() -> None:
    with pytest.raises(ValueError, match="no trainable parameters"):
        FlatOptimizer(nn.ReLU(), adam)


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_adam_matches_torch(weight_decay: float) -> None:
    ours_net, torch_net = small_net(), small_net()
    ours = Adam(list(ours_net.parameters()), lr=0.01, eps=1e-5, weight_decay=weight_decay)
    reference = torch.optim.Adam(
        torch_net.parameters(), lr=0.01, eps=1e-5, weight_decay=weight_decay
    )
    train(ours_net, ours.step, lambda: [setattr(p, "grad", None) for p in ours.params], steps=7)
    train(torch_net, reference.step, lambda: reference.zero_grad(set_to_none=True), steps=7)
    for a, b in zip(ours_net.parameters(), torch_net.parameters(), strict=True):
        torch.testing.assert_close(a, b)
    # The state dicts load into each other and continue identically.
    swapped = Adam(list(copy.deepcopy(torch_net).parameters()), lr=0.5)
    swapped.load_state_dict(reference.state_dict())
    assert swapped.param_groups[0]["lr"] == 0.01
    back = torch.optim.Adam(copy.deepcopy(ours_net).parameters(), lr=0.5)
    back.load_state_dict(ours.state_dict())
    for saved, mine in zip(
        back.state_dict()["state"].values(), swapped.state_dict()["state"].values(), strict=True
    ):
        for key in ("step", "exp_avg", "exp_avg_sq"):
            torch.testing.assert_close(saved[key], mine[key])


def test_adam_rejects_a_state_of_other_parameters() -> None:
    adam_ = Adam(list(small_net().parameters()))
    with pytest.raises(ValueError, match="does not fit 6 parameters"):
        adam_.load_state_dict(torch.optim.Adam(nn.Linear(2, 2).parameters()).state_dict())


def test_adam_rejects_another_optimizers_state() -> None:
    net = small_net()
    sgd = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    train(net, sgd.step, lambda: sgd.zero_grad(set_to_none=True), steps=1)
    with pytest.raises(
        ValueError, match=r"not Adam's: it lacks \['exp_avg', 'exp_avg_sq', 'step'\]"
    ):
        Adam(list(net.parameters())).load_state_dict(sgd.state_dict())


def test_training_does_not_import_torch_dynamo() -> None:
    # Constructing a torch.optim optimizer imports torch._dynamo: some 70 MB of memory.
    script = (
        "import sys, torch\n"
        "from entityrl.algorithms.common.optimizer import Adam, FlatOptimizer\n"
        "net = torch.nn.Linear(3, 2)\n"
        "opt = FlatOptimizer(net, lambda ps: Adam(ps, lr=0.1))\n"
        "net(torch.randn(4, 3)).sum().backward()\n"
        "opt.step(1.0)\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "False"
