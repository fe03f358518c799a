"""The entity embedding kernel (entityrl/nn/kernels/embedding.py) against the torch path.

EntityEmbedding runs one kernel call per entity type where the kernel serves. Its forward and
the gradients of the projections' and layer norms' parameters are compared with the same
module computed by torch in float64 (the kernel's error must stay near float32 rounding and
not far from the float32 torch path's), over feature counts, model widths that are and are
not whole vectors, several types in slots in any order, padding slots, types without
entities, one and two threads; and a whole RogueNet step with and without the kernel.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from entityrl.env import (
    Batcher,
    CategoricalActionMask,
    CategoricalActionSpace,
    Entity,
    GlobalCategoricalActionMask,
    GlobalCategoricalActionSpace,
    Observation,
    ObsSpace,
)
from entityrl.nn import RogueNet, RogueNetConfig, TranslationConfig
from entityrl.nn.embedding import EntityEmbedding
from entityrl.nn.kernels import build
from entityrl.nn.kernels import embedding as embedding_kernel
from entityrl.nn.kernels.pointwise import kernel_available
from entityrl.nn.layout import BatchLayout

if os.environ.get("ENTITYRL_NO_KERNELS", "") not in ("", "0"):
    pytest.skip("kernels disabled by ENTITYRL_NO_KERNELS", allow_module_level=True)
if build.find_compiler() is None:
    pytest.skip("no C++ compiler to build the kernel", allow_module_level=True)


@pytest.fixture(scope="module", autouse=True)
def _kernel_builds() -> None:
    # A compiler is present: failing to build is a bug, not a reason to skip.
    assert kernel_available(), build.unavailable_reason


def embedding(
    widths: dict[str, int], d_model: int, seed: int, globals_: int = 0, global_token: bool = False
) -> EntityEmbedding:
    """An EntityEmbedding with random parameters and normalization statistics."""
    space = ObsSpace(
        entities={name: Entity([f"f{i}" for i in range(k)]) for name, k in widths.items()},
        global_features=[f"g{i}" for i in range(globals_)],
    )
    torch.manual_seed(seed)
    module = EntityEmbedding(space, d_model, global_token, norm_clip=2.0)
    with torch.no_grad():
        for norm in module.norms.values():
            norm.scale_mean.normal_()
            norm.scale_inv_std.uniform_(0.2, 2.0)
        for p in module.parameters():
            p.normal_()
    return module


def layout(counts: dict[str, int], slots: int, seed: int) -> BatchLayout:
    """Every type's entities in random distinct slots; the slots left over are padding. (Only
    what the embedding reads is filled in.)"""
    order = torch.randperm(slots, generator=torch.Generator().manual_seed(seed))
    positions, start = {}, 0
    for name, n in counts.items():
        positions[name] = order[start : start + n].clone()
        start += n
    return BatchLayout(
        num_rows=1,
        num_slots=slots,
        lengths=np.array([start]),
        inverse_lengths=torch.ones(1, 1),
        type_positions=positions,
        slot_row=torch.zeros(slots, dtype=torch.int64),
        row_slot=np.zeros(1, dtype=np.int64),
        buckets=[],
        padded=start < slots,
        sole_type=False,
        slot_per_row=False,
        visible=None,
    )


def features(module: EntityEmbedding, counts: dict[str, int], seed: int) -> dict[str, torch.Tensor]:
    """Raw features of every type (own and global), some beyond the normalization's clip."""
    gen = torch.Generator().manual_seed(seed)
    raw = {}
    for name, n in counts.items():
        key = name.replace(".", "\u2024")
        width = module.norms[key].scale_mean.shape[0] if key in module.norms else 0
        raw[name] = torch.randn(n, width, generator=gen) * 3
    return raw


def run(
    module: EntityEmbedding, raw: dict[str, torch.Tensor], lay: BatchLayout, grad: torch.Tensor
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The forward and the parameters' gradients of (output * grad).sum()."""
    module.zero_grad()
    out = module(raw, lay)
    out.backward(grad.to(out.dtype))
    grads = {n: p.grad.clone() for n, p in module.named_parameters() if p.grad is not None}
    return out.detach(), grads


def torch_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedding_kernel, "embed", lambda *args: None)


def reference(
    module: EntityEmbedding,
    raw: dict[str, torch.Tensor],
    lay: BatchLayout,
    grad: torch.Tensor,
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[tuple[torch.Tensor, dict[str, torch.Tensor]], ...]:
    """The torch path's results in float32 and in float64."""
    with monkeypatch.context() as m:
        torch_path(m)
        single = run(module, raw, lay, grad)
        module.double()
        double = run(module, {k: v.double() for k, v in raw.items()}, lay, grad.double())
        module.float()
    return single, double


def assert_close_to_reference(
    kernel: tuple[torch.Tensor, dict[str, torch.Tensor]],
    single: tuple[torch.Tensor, dict[str, torch.Tensor]],
    double: tuple[torch.Tensor, dict[str, torch.Tensor]],
) -> None:
    out, grads = kernel
    assert out.dtype == torch.float32
    torch.testing.assert_close(out.double(), double[0], atol=2e-5, rtol=1e-5)
    assert grads.keys() == double[1].keys()
    for name, exact in double[1].items():
        scale = exact.abs().max().item() or 1.0
        err = (grads[name].double() - exact).abs().max().item() / scale
        torch_err = (single[1][name].double() - exact).abs().max().item() / scale
        assert err <= 1e-5, (name, err)
        assert err <= 3 * torch_err + 1e-6, (name, err, torch_err)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    widths=st.lists(st.integers(1, 64), min_size=1, max_size=3),
    counts=st.lists(st.integers(0, 300), min_size=3, max_size=3),
    d_model=st.sampled_from([16, 20, 32, 48, 64, 100, 128, 256]),
    padding=st.integers(0, 40),
    seed=st.integers(0, 2**16),
)
def test_matches_torch_in_float64(
    widths: list[int],
    counts: list[int],
    d_model: int,
    padding: int,
    seed: int,
    threads: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    names = [f"type.{i}" for i in range(len(widths))]  # (dots: module keys differ from names)
    module = embedding(dict(zip(names, widths, strict=False)), d_model, seed)
    n = dict(zip(names, counts, strict=False))
    lay = layout(n, sum(n.values()) + padding, seed)
    raw = features(module, n, seed)
    # A pre-activation within rounding of 0 may take the ReLU's other side in float32 than in
    # float64, which changes its whole column of the weight gradient: no float32 computation
    # can be held to the float64 reference there.
    assume(smallest_preactivation(module, raw) > 1e-5)
    grad = torch.randn(lay.num_slots, d_model, generator=torch.Generator().manual_seed(seed))
    kernel = run(module, raw, lay, grad)
    assert_close_to_reference(kernel, *reference(module, raw, lay, grad, monkeypatch))


def smallest_preactivation(module: EntityEmbedding, raw: dict[str, torch.Tensor]) -> float:
    """The smallest |linear(normalized features)| of any entity, in float64."""
    smallest = float("inf")
    for name, feats in raw.items():
        key = name.replace(".", "\u2024")
        if key not in module.norms or feats.shape[0] == 0:
            continue
        norm, linear = module.norms[key], module.projections[key][0]
        u = ((feats.double() - norm.scale_mean.double()) * norm.scale_inv_std.double()).clamp(
            -norm.clip, norm.clip
        )
        z = u @ linear.weight.double().T + linear.bias.double()
        smallest = min(smallest, z.abs().min().item())
    return smallest


@pytest.mark.parametrize("d_model", [16, 32, 33])
def test_padding_slots_are_zero_and_get_no_gradient(d_model: int, threads: int) -> None:
    module = embedding({"a": 7, "b": 3}, d_model, seed=1)
    counts = {"a": 2000, "b": 100}
    lay = layout(counts, 2500, seed=1)
    raw = features(module, counts, seed=1)
    grad = torch.randn(lay.num_slots, d_model)
    out, grads = run(module, raw, lay, grad)
    used = torch.cat(list(lay.type_positions.values()))
    padding = torch.ones(lay.num_slots, dtype=torch.bool)
    padding[used] = False
    assert padding.sum() == 400
    assert (out[padding] == 0).all()
    grad[padding] = 0
    _, unpadded = run(module, raw, lay, grad)
    for name, g in grads.items():
        assert torch.equal(g, unpadded[name]), name


def test_types_without_entities_get_zero_gradients(threads: int) -> None:
    module = embedding({"a": 4, "b": 5}, 32, seed=2)
    counts = {"a": 50, "b": 0}
    lay = layout(counts, 64, seed=2)
    out, grads = run(module, features(module, counts, seed=2), lay, torch.randn(64, 32))
    assert out.shape == (64, 32)
    for name, g in grads.items():
        assert g.any() == name.startswith("projections.a"), name


def test_every_slot_filled_needs_no_zeros(monkeypatch: pytest.MonkeyPatch) -> None:
    module = embedding({"a": 3}, 32, seed=3)
    lay = layout({"a": 100}, 100, seed=3)
    assert not lay.padded
    raw = features(module, {"a": 100}, seed=3)
    grad = torch.randn(100, 32)
    assert_close_to_reference(
        run(module, raw, lay, grad), *reference(module, raw, lay, grad, monkeypatch)
    )


@pytest.mark.parametrize("globals_", [0, 2], ids=["constant-token", "global-features"])
def test_global_token_and_global_features(globals_: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # Without global features, the global token is a learned constant placed by torch inside
    # the kernel's node; with them, a type like the others.
    module = embedding({"a": 3, "b": 2}, 32, seed=4, globals_=globals_, global_token=True)
    counts = {"a": 40, "b": 30, "__global__": 10}
    lay = layout(counts, 96, seed=4)
    raw = features(module, counts, seed=4)
    grad = torch.randn(96, 32)
    kernel = run(module, raw, lay, grad)
    assert_close_to_reference(kernel, *reference(module, raw, lay, grad, monkeypatch))
    assert ("projections.__global__.embedding" in kernel[1]) == (globals_ == 0)


def test_inference_keeps_nothing_for_a_backward() -> None:
    module = embedding({"a": 5}, 32, seed=5)
    lay = layout({"a": 128}, 128, seed=5)
    raw = features(module, {"a": 128}, seed=5)
    with torch.no_grad():
        assert module(raw, lay).grad_fn is None
    module.requires_grad_(False)
    assert module(raw, lay).grad_fn is None
    module.requires_grad_(True)
    assert type(module(raw, lay).grad_fn).__name__ == "_EmbeddingBackward"


def test_features_that_need_a_gradient_take_the_torch_path() -> None:
    module = embedding({"a": 5}, 32, seed=6)
    lay = layout({"a": 20}, 20, seed=6)
    raw = {k: v.requires_grad_() for k, v in features(module, {"a": 20}, seed=6).items()}
    module(raw, lay).sum().backward()
    assert raw["a"].grad is not None and raw["a"].grad.any()


def test_other_dtypes_take_the_torch_path() -> None:
    module = embedding({"a": 5}, 32, seed=7).double()
    lay = layout({"a": 20}, 24, seed=7)
    raw = {k: v.double() for k, v in features(module, {"a": 20}, seed=7).items()}
    assert module(raw, lay).dtype == torch.float64


@pytest.mark.usefixtures("no_kernel")
def test_without_kernels_the_torch_path_serves() -> None:
    module = embedding({"a": 5, "b": 2}, 32, seed=8)
    counts = {"a": 30, "b": 10}
    lay = layout(counts, 48, seed=8)
    raw = features(module, counts, seed=8)
    types = [
        embedding_kernel.Placed(torch.zeros(n, 32), lay.type_positions[name])
        for name, n in counts.items()
    ]
    assert embedding_kernel.embed(types, 48, 32, True) is None
    out, grads = run(module, raw, lay, torch.randn(48, 32))
    assert out.shape == (48, 32) and len(grads) == 8


@pytest.mark.parametrize(
    "config",
    [{}, {"translation": TranslationConfig("Unit", ["x", "y"]), "d_model": 48, "n_head": 4}],
    ids=["default", "translation"],
)
def test_rogue_net_training_step_matches_torch(
    config: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    space = ObsSpace(
        entities={"Unit": Entity(["x", "y", "hp"]), "Item": Entity(["x", "y"])},
        global_features=["time"],
    )
    actions = {
        "move": CategoricalActionSpace(["n", "e", "s", "w"]),
        "plan": GlobalCategoricalActionSpace(["a", "b"]),  # (a global token)
    }
    rng = np.random.default_rng(21)
    rows = [
        Observation(
            features={
                "Unit": rng.normal(size=(u, 3)).astype(np.float32),
                "Item": rng.normal(size=(i, 2)).astype(np.float32),
            },
            actions={
                "move": CategoricalActionMask(actor_types=["Unit"]),
                "plan": GlobalCategoricalActionMask(),
            },
            global_features=[float(rng.normal())],
        )
        for u, i in rng.integers(0, 20, (40, 2))
    ]
    obs = Batcher(space, actions).batch(rows)

    def step() -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        torch.manual_seed(3)
        # float32: bfloat16 products would round the embeddings' last-bit differences apart.
        model = RogueNet(space, actions, RogueNetConfig(precision="float32", **config))
        model.train()
        model.update_normalizers(obs)
        out = model.evaluate(obs, model.act(obs).actions(obs))
        loss = out.values.sum() + sum(h.logprob.sum() + h.entropy.sum() for h in out.heads.values())
        loss.backward()
        grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
        return loss.detach(), grads

    loss, grads = step()
    torch_path(monkeypatch)
    reference_loss, reference_grads = step()
    torch.testing.assert_close(loss, reference_loss, atol=1e-5, rtol=1e-5)
    assert grads.keys() == reference_grads.keys()
    assert any(name.startswith("encoder.embedding.projections") for name in grads)
    for name, grad in grads.items():
        torch.testing.assert_close(grad, reference_grads[name], atol=1e-5, rtol=1e-4, msg=name)
