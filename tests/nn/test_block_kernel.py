"""The fused transformer block (one autograd node over the block's kernels) against the layer by
layer path it replaces: the same values and gradients, to the bit."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from test_rogue_net import ACTION_SPACE, BATCHER, OBS_SPACE, observation  # (tests/nn on the path)

import entityrl.nn.rogue_net as rogue_net
import entityrl.nn.transformer as transformer
from entityrl.env import (
    Batcher,
    CategoricalActionMask,
    CategoricalActionSpace,
    Entity,
    Observation,
    ObsSpace,
)
from entityrl.nn import RogueNet, RogueNetConfig
from entityrl.nn.kernels import block as block_kernel
from entityrl.nn.kernels import build
from entityrl.nn.kernels import linear as lk

CAN_RUN = lk.kernel_available() and build.find_compiler() is not None
needs_kernels = pytest.mark.skipif(
    not CAN_RUN, reason="the fused block needs the bfloat16 kernels (AVX512-BF16, a compiler)"
)


def batch(rows: int, seed: int, hidden: bool = False) -> tuple:
    """Rows of 0-9 units and 0-4 items (so empty, one-token and longer rows), some entities
    hidden from the policy if asked."""
    rng = np.random.default_rng(seed)
    observations = []
    for i in range(rows):
        units = rng.normal(size=(i % 10, 3)).astype(np.float32)
        items = rng.normal(size=(i % 5, 2)).astype(np.float32)
        shown = {"Unit": np.arange(len(units)) % 3 != 1} if hidden else {}
        observations.append(observation(units, items, float(rng.normal()), visible=shown))
    return BATCHER.batch(observations)


def step(net: RogueNet, obs, actions) -> tuple[list[torch.Tensor], list[torch.Tensor]]:  # type: ignore[no-untyped-def]
    """Outputs of evaluate (values, log-probabilities, entropies) and every gradient."""
    net.zero_grad()
    out = net.evaluate(obs, actions)
    heads = list(out.heads.values())
    loss = out.values.square().sum() + sum((h.logprob + 0.1 * h.entropy).sum() for h in heads)
    loss.backward()
    outputs = [out.values, *(h.logprob for h in heads), *(h.entropy for h in heads)]
    return [t.detach() for t in outputs], [
        p.grad.clone() for p in net.parameters() if p.grad is not None
    ]


@pytest.fixture
def fused_calls(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Records, for every block forward, whether the fused block ran."""
    calls: list[bool] = []
    fused = transformer.fused_block

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        out = fused(*args, **kwargs)
        calls.append(out is not None)
        return out

    monkeypatch.setattr(transformer, "fused_block", spy)
    return calls


@needs_kernels
@pytest.mark.parametrize("hidden", [False, True])
@pytest.mark.parametrize("d_model", [32, 64])
def test_equals_the_layer_by_layer_path(
    monkeypatch: pytest.MonkeyPatch,
    fused_calls: list[bool],
    hidden: bool,
    d_model: int,
    threads: int,
) -> None:
    obs = batch(40, seed=d_model, hidden=hidden)
    torch.manual_seed(0)
    config = RogueNetConfig(d_model=d_model, n_head=2, n_layer=2, precision="bfloat16")
    net = RogueNet(OBS_SPACE, ACTION_SPACE, config)
    actions = net.act(obs).actions(obs)
    assert fused_calls == [True, True]
    with torch.no_grad():
        values = net.values(obs)
    outputs, grads = step(net, obs, actions)
    assert fused_calls == [True] * 6

    monkeypatch.setattr(transformer, "fused_block", lambda *args: None)
    with torch.no_grad():
        assert torch.equal(values, net.values(obs))
    plain_outputs, plain_grads = step(net, obs, actions)
    for ours, theirs in zip(outputs, plain_outputs, strict=True):
        assert torch.equal(ours, theirs)
    assert len(grads) == len(plain_grads)
    for ours, theirs in zip(grads, plain_grads, strict=True):
        assert torch.equal(ours, theirs)


SOLO_SPACE = ObsSpace(entities={"Ship": Entity(["x", "y", "speed"])})
SOLO_ACTIONS = {"thrust": CategoricalActionSpace(["left", "right", "none"])}


def solo_batch(rows: int, seed: int):  # type: ignore[no-untyped-def]
    """Rows of exactly one entity: every slot is its own row."""
    rng = np.random.default_rng(seed)
    mask = CategoricalActionMask(actor_types=["Ship"])
    return Batcher(SOLO_SPACE, SOLO_ACTIONS).batch(
        [
            Observation(
                features={"Ship": rng.normal(size=(1, 3)).astype(np.float32)},
                actions={"thrust": mask},
            )
            for _ in range(rows)
        ]
    )


@needs_kernels
@pytest.mark.parametrize("precision", ["bfloat16", "float32"])
def test_one_entity_rows_attend_to_themselves(
    monkeypatch: pytest.MonkeyPatch, fused_calls: list[bool], precision: str
) -> None:
    """With one slot per row the blocks skip the attention kernel and (fused) the query and key
    products; the outputs and gradients are those of the attention kernel's path."""
    obs = solo_batch(48, seed=3)
    torch.manual_seed(0)
    config = RogueNetConfig(d_model=32, n_head=2, n_layer=2, precision=precision)
    net = RogueNet(SOLO_SPACE, SOLO_ACTIONS, config)
    actions = net.act(obs).actions(obs)
    assert net.prepare(obs).layout.slot_per_row
    outputs, grads = step(net, obs, actions)
    assert fused_calls == ([True] * 4 if precision == "bfloat16" else [])  # act, evaluate
    for block in net.encoder.blocks:
        qk_grad = block.mix.qkv.weight.grad[:64]
        assert qk_grad is not None and not qk_grad.any()

    if precision == "bfloat16":  # the layer by layer path, to the bit
        with monkeypatch.context() as patch:
            patch.setattr(transformer, "fused_block", lambda *args: None)
            plain_outputs, plain_grads = step(net, obs, actions)
        for ours, theirs in [
            *zip(outputs, plain_outputs, strict=True),
            *zip(grads, plain_grads, strict=True),
        ]:
            assert torch.equal(ours, theirs)

    # The general path: the attention kernel over rows of one slot.
    build = rogue_net.build_layout
    monkeypatch.setattr(
        rogue_net,
        "build_layout",
        lambda *args: dataclasses.replace(build(*args), slot_per_row=False),
    )
    kernel_outputs, kernel_grads = step(net, obs, actions)
    tolerance = 2e-2 if precision == "bfloat16" else 1e-5
    for ours, theirs in [
        *zip(outputs, kernel_outputs, strict=True),
        *zip(grads, kernel_grads, strict=True),
    ]:
        torch.testing.assert_close(ours, theirs, rtol=tolerance, atol=tolerance)


@needs_kernels
def test_declines_what_the_kernels_do_not_compute(fused_calls: list[bool]) -> None:
    obs = batch(12, seed=1)
    for config in (
        RogueNetConfig(d_model=32, precision="float32"),  # not bfloat16: not even tried
        RogueNetConfig(d_model=48, n_head=2, precision="bfloat16"),  # 4 * 48 is fine, 48 too
        RogueNetConfig(d_model=24, n_head=2, precision="bfloat16"),  # not a multiple of 16
    ):
        torch.manual_seed(0)
        RogueNet(OBS_SPACE, ACTION_SPACE, config).values(obs)
    assert fused_calls == [True, True, False, False]


def test_without_kernels_declines(no_kernel: None) -> None:
    x = torch.randn(4, 32)
    layers = transformer.Block(32, 2, None, None, torch.bfloat16)
    mix = layers.mix
    rows = (torch.tensor([0, 2]), torch.tensor([2, 2]))
    assert (
        block_kernel.fused_block(
            x,
            layers.ln1,
            mix.qkv,
            mix.proj,
            layers.ln2,
            layers.mlp[0],
            layers.mlp[2],
            2,
            *rows,
            None,
        )
        is None
    )
