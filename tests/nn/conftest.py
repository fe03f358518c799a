"""Fixtures shared by the kernel tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from entityrl.nn import kernels
from entityrl.nn.kernels import categorical, linear, pointwise

_MODULES = (kernels, pointwise, categorical, linear)


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request: pytest.FixtureRequest) -> Iterator[int]:
    """Runs the test with torch (and so the kernels) on one thread, then on two."""
    before = torch.get_num_threads()
    torch.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(before)


@pytest.fixture
def no_kernel(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every kernel switched off by the environment; each loaded again afterwards as before."""
    before = [module.kernel_available() for module in _MODULES]
    monkeypatch.setenv("ENTITYRL_NO_KERNELS", "1")
    for module in _MODULES:
        module._reset()
    yield
    monkeypatch.undo()
    for module in _MODULES:
        module._reset()
    assert [module.kernel_available() for module in _MODULES] == before
