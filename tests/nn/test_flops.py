"""The appendix-B estimates against the real network."""

from __future__ import annotations

import pytest
from torch import nn

from entityrl.env import CategoricalActionSpace, Entity, ObsSpace
from entityrl.nn import RogueNet, RogueNetConfig, flops, param_count


def procgen_like_space(types: int = 5, features: int = 50) -> ObsSpace:
    return ObsSpace({f"type{i}": Entity([f"f{j}" for j in range(features)]) for i in range(types)})


def ignored_terms(model: nn.Module) -> int:
    """What the appendix leaves out: biases, layer norms and the heads."""
    total = 0
    for name, module in model.named_modules():
        if name.startswith(("heads", "value_head")):
            continue
        if isinstance(module, nn.Linear) and module.bias is not None:
            total += module.bias.numel()
        if isinstance(module, nn.LayerNorm):
            total += sum(p.numel() for p in module.parameters())
    heads = sum(
        p.numel() for n, p in model.named_parameters() if n.startswith(("heads", "value_head"))
    )
    return total + heads


@pytest.mark.parametrize(("d_model", "n_layer"), [(16, 2), (32, 1), (64, 3)])
def test_param_count_is_the_real_count_minus_the_ignored_terms(d_model: int, n_layer: int) -> None:
    space = procgen_like_space()
    model = RogueNet(
        space,
        {"act": CategoricalActionSpace(["a", "b"])},
        RogueNetConfig(d_model=d_model, n_layer=n_layer, n_head=2),
    )
    real = sum(p.numel() for p in model.parameters())
    assert real - ignored_terms(model) == param_count(d_model, n_layer, [50] * 5)


def test_reproduces_the_appendix_example() -> None:
    # D=16, L=2, S=10 entities over 5 types of ~50 features: "around 10K parameters and 100K
    # FLOPS".
    params = param_count(16, 2, [50] * 5)
    compute = flops(16, 2, [50] * 5, [2] * 5)
    assert params == 12 * 2 * 16**2 + 16 * 250 == 10_144
    assert compute == 12 * 2 * 16**2 * 10 + 2 * 16 * 10**2 + 16 * 50 * 10 == 72_640
    assert 9_000 <= params <= 11_000
    assert 50_000 <= compute <= 150_000


def test_flops_needs_one_count_per_type() -> None:
    with pytest.raises(ValueError, match="one entity count per entity type"):
        flops(16, 2, [50, 50], [3])
