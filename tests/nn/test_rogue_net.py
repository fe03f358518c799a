"""Behaviour of RogueNet: equivariance, isolation, padding invariance, masks, gradients."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from entityrl.env import (
    Batcher,
    CategoricalActionMask,
    CategoricalActionSpace,
    Entity,
    GlobalCategoricalActionMask,
    GlobalCategoricalActionSpace,
    Observation,
    ObsSpace,
    SelectEntityActionMask,
    SelectEntityActionSpace,
    VecObs,
)
from entityrl.nn import RelposConfig, RogueNet, RogueNetConfig, TranslationConfig
from entityrl.nn.kernels import kernel_available, pointwise
from entityrl.nn.precision import compute_dtype, native_bfloat16
from entityrl.nn.transformer import attention_context

OBS_SPACE = ObsSpace(
    entities={
        "Unit": Entity(["x", "y", "hp"]),
        "Item": Entity(["x", "y"]),
    },
    global_features=["time"],
)
ACTION_SPACE = {
    "move": CategoricalActionSpace(["n", "e", "s", "w"]),
    "pick": SelectEntityActionSpace(),
    "plan": GlobalCategoricalActionSpace(["a", "b", "c"]),
}
BATCHER = Batcher(OBS_SPACE, ACTION_SPACE)


def observation(units: np.ndarray, items: np.ndarray, time: float = 0.5, **extra) -> Observation:
    """Units move and pick items; a global plan is chosen each step."""
    actions = {
        "move": CategoricalActionMask(actor_types=["Unit"], mask=extra.pop("move_mask", None)),
        "plan": GlobalCategoricalActionMask(),
    }
    if len(units) and len(items):
        actions["pick"] = SelectEntityActionMask(
            actor_types=["Unit"], actee_types=["Item"], mask=extra.pop("pick_mask", None)
        )
    return Observation(
        features={"Unit": units, "Item": items},
        actions=actions,
        global_features=[time],
        **extra,
    )


def random_row(rng: np.random.Generator, units: int, items: int) -> Observation:
    return observation(
        rng.normal(size=(units, 3)).astype(np.float32),
        rng.normal(size=(items, 2)).astype(np.float32),
        float(rng.normal()),
    )


def net(seed: int = 0, **config) -> RogueNet:
    torch.manual_seed(seed)
    model = RogueNet(OBS_SPACE, ACTION_SPACE, RogueNetConfig(**config))
    model.eval()
    return model


def score(model: RogueNet, obs: VecObs):
    """Deterministic outputs: log-probs of action 0 / candidate 0 for every actor, and values."""
    actions = {
        name: torch.zeros(mask.actors.items, dtype=torch.int64)
        for name, mask in obs.action_masks.items()
    }
    with torch.no_grad():
        return model(model.prepare(obs), actions)


CONFIGS = [
    {},
    {"n_layer": 0},
    {"pooling": "mean"},
    {"pooling": "max"},
    {"pooling": "meanmax"},
    {"relpos": RelposConfig(["x", "y"], [2, 2], per_entity_values=True)},
    {"translation": TranslationConfig("Unit", ["x", "y"])},
    {"separate_value": True, "d_model": 16, "n_head": 4},
]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: ",".join(c) or "default")
def test_permuting_entities_permutes_outputs_and_keeps_value(config: dict) -> None:
    rng = np.random.default_rng(0)
    units = rng.normal(size=(5, 3)).astype(np.float32)
    items = rng.normal(size=(7, 2)).astype(np.float32)
    # Translation re-centres on the *first* unit, so keep it first when permuting units.
    unit_perm = np.concatenate([[0], 1 + rng.permutation(4)])
    item_perm = rng.permutation(7)
    model = net(**config)
    a = BATCHER.batch([observation(units, items)])
    b = BATCHER.batch([observation(units[unit_perm], items[item_perm])])
    out_a, out_b = score(model, a), score(model, b)
    torch.testing.assert_close(out_a.values, out_b.values, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(
        out_a.heads["move"].logprob[unit_perm], out_b.heads["move"].logprob, atol=1e-5, rtol=1e-5
    )
    torch.testing.assert_close(out_a.heads["plan"].logprob, out_b.heads["plan"].logprob)
    # Candidate 0 is a different item after permuting items, so compare full distributions
    # through the entropy, which is permutation invariant.
    torch.testing.assert_close(
        out_a.heads["pick"].entropy[unit_perm], out_b.heads["pick"].entropy, atol=1e-5, rtol=1e-5
    )


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: ",".join(c) or "default")
def test_rows_do_not_see_each_other(config: dict) -> None:
    rng = np.random.default_rng(1)
    rows = [random_row(rng, u, i) for u, i in [(3, 4), (2, 6), (4, 1)]]
    changed = list(rows)
    changed[1] = random_row(rng, 5, 2)
    model = net(**config)
    out_a = score(model, BATCHER.batch(rows))
    out_b = score(model, BATCHER.batch(changed))
    keep = [0, 2]
    torch.testing.assert_close(out_a.values[keep], out_b.values[keep])
    a_rows = BATCHER.batch(rows).action_masks["move"].actors.row_index()
    b_rows = BATCHER.batch(changed).action_masks["move"].actors.row_index()
    for r in keep:
        torch.testing.assert_close(
            out_a.heads["move"].logprob[a_rows == r], out_b.heads["move"].logprob[b_rows == r]
        )


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: ",".join(c) or "default")
def test_a_row_alone_equals_the_row_among_longer_rows(config: dict) -> None:
    rng = np.random.default_rng(2)
    short = random_row(rng, 1, 1)
    long_rows = [random_row(rng, 30, 34), random_row(rng, 12, 50)]
    model = net(**config)
    alone = score(model, BATCHER.batch([short]))
    among = score(model, BATCHER.batch([long_rows[0], short, long_rows[1]]))
    torch.testing.assert_close(alone.values[0], among.values[1], atol=1e-5, rtol=1e-5)
    row_of_actor = (
        BATCHER.batch([long_rows[0], short, long_rows[1]]).action_masks["move"].actors.row_index()
    )
    for name in ("move", "pick"):
        mine = row_of_actor == 1
        torch.testing.assert_close(
            alone.heads[name].logprob, among.heads[name].logprob[mine], atol=1e-5, rtol=1e-5
        )


def test_rows_without_entities_give_finite_outputs() -> None:
    rng = np.random.default_rng(3)
    empty = observation(np.zeros((0, 3), np.float32), np.zeros((0, 2), np.float32))
    obs = BATCHER.batch([empty, random_row(rng, 3, 3), empty])
    out = net().act(obs)
    assert torch.isfinite(out.values).all()
    assert out.heads["plan"].actions.shape == (3,)


def test_masked_choices_are_never_sampled() -> None:
    rng = np.random.default_rng(4)
    mask = np.array([[True, False, True, False], [False, False, False, True]])
    row = observation(
        rng.normal(size=(2, 3)).astype(np.float32),
        rng.normal(size=(3, 2)).astype(np.float32),
        move_mask=mask,
        pick_mask=np.array([[False, True, True], [True, False, False]]),
    )
    obs = BATCHER.batch([row] * 5000)  # 10,000 actors
    out = net().act(obs)
    moves = out.heads["move"].actions.numpy().reshape(5000, 2)
    assert mask[0][moves[:, 0]].all() and mask[1][moves[:, 1]].all()
    assert set(np.unique(moves[:, 0])) == {0, 2}  # both legal choices do occur
    picks = out.heads["pick"].actions.numpy().reshape(5000, 2)
    assert set(np.unique(picks[:, 0])) == {1, 2}
    assert set(np.unique(picks[:, 1])) == {0}
    assert torch.isfinite(out.heads["move"].entropy).all()


PICK_MASK = np.array([[True, False, True], [False, True, True]])


def picking_rows(seed: int, sizes: list[tuple[int, int]]) -> list[Observation]:
    """Random rows of (units, items) entities; the first row's 2 units and 3 items with
    PICK_MASK over which items each unit may pick."""
    rng = np.random.default_rng(seed)
    rows = [random_row(rng, u, i) for u, i in sizes]
    rows[0] = observation(
        rng.normal(size=(2, 3)).astype(np.float32),
        rng.normal(size=(3, 2)).astype(np.float32),
        pick_mask=PICK_MASK,
    )
    return rows


def test_select_entity_probabilities_sum_to_one_over_legal_candidates() -> None:
    obs = BATCHER.batch(picking_rows(5, [(2, 3), (1, 6), (3, 1), (2, 2)]))
    model = net()
    mask = obs.action_masks["pick"]
    per_actor = np.repeat(mask.actees.lengths, mask.actors.lengths)
    total = torch.zeros(mask.actors.items)
    with torch.no_grad():
        for j in range(per_actor.max()):
            chosen = torch.full((mask.actors.items,), j)
            ok = torch.from_numpy(j < per_actor)
            out = model(
                model.prepare(obs),
                {
                    "move": torch.zeros(8, dtype=torch.int64),
                    "plan": torch.zeros(4, dtype=torch.int64),
                    "pick": chosen.where(ok, 0),
                },
            )
            total += torch.where(ok, out.heads["pick"].logprob.exp(), 0.0)
    torch.testing.assert_close(total, torch.ones_like(total))
    # The masked candidates of row 0 have probability exactly zero.
    out = model(
        model.prepare(obs),
        {
            "move": torch.zeros(8, dtype=torch.int64),
            "plan": torch.zeros(4, dtype=torch.int64),
            "pick": torch.tensor([1, 0, 0, 0, 0, 0, 0, 0]),
        },
    )
    assert out.heads["pick"].logprob[0].exp().item() == 0.0
    assert out.heads["pick"].logprob[1].exp().item() == 0.0


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: ",".join(c) or "default")
def test_gradients_reach_every_parameter(config: dict) -> None:
    rng = np.random.default_rng(6)
    obs = BATCHER.batch([random_row(rng, u, i) for u, i in [(3, 4), (1, 2), (5, 5)]])
    model = net(**config)
    model.train()
    model.update_normalizers(obs)
    out = model.evaluate(obs, model.act(obs).actions(obs))
    loss = out.values.sum() + sum(h.logprob.sum() + h.entropy.sum() for h in out.heads.values())
    loss.backward()
    silent = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.any()]
    # The select-entity key's bias adds the same score to all of an actor's candidates, which
    # the softmax ignores: it has no effect on the policy, and so no gradient.
    assert silent == ["heads.pick.key.bias"]


def test_hidden_entities_are_invisible_to_the_policy_but_not_the_value() -> None:
    rng = np.random.default_rng(7)
    units = rng.normal(size=(2, 3)).astype(np.float32)
    items = rng.normal(size=(2, 2)).astype(np.float32)
    hidden = {"Item": np.array([True, False])}  # visible flags: item 1 is hidden
    other = items.copy()
    other[1] = [5.0, -5.0]
    model = net()
    a = score(model, BATCHER.batch([observation(units, items, visible=hidden)]))
    b = score(model, BATCHER.batch([observation(units, other, visible=hidden)]))
    torch.testing.assert_close(a.heads["move"].logprob, b.heads["move"].logprob)
    assert not torch.allclose(a.values, b.values)


def test_act_is_reproducible_under_a_seed_and_evaluate_matches_act() -> None:
    rng = np.random.default_rng(8)
    obs = BATCHER.batch([random_row(rng, 3, 3) for _ in range(6)])
    model = net()
    torch.manual_seed(0)
    first = model.act(obs)
    torch.manual_seed(0)
    second = model.act(obs)
    for name in ACTION_SPACE:
        assert torch.equal(first.heads[name].actions, second.heads[name].actions)
    scored = model.evaluate(obs, first.actions(obs))
    for name in ACTION_SPACE:
        torch.testing.assert_close(scored.heads[name].logprob, first.heads[name].logprob)


def test_normalizer_statistics_change_only_through_update() -> None:
    rng = np.random.default_rng(9)
    obs = BATCHER.batch([random_row(rng, 3, 3) for _ in range(4)])
    model = net()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    model.act(obs)
    model.evaluate(obs, model.act(obs).actions(obs))
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    model.update_normalizers(obs)
    norm = model.encoder.embedding.norms["Unit"]
    assert norm.count.item() == obs.features["Unit"].items
    expected = np.concatenate(
        [obs.features["Unit"].data, obs.global_features[obs.features["Unit"].row_index()]], 1
    ).mean(0)
    np.testing.assert_allclose(norm.mean.numpy(), expected, rtol=1e-6)
    assert "encoder.embedding.norms.Unit.mean" in model.state_dict()


def test_bad_inputs_name_what_is_wrong() -> None:
    with pytest.raises(ValueError, match=r"divisible by net\.n_head"):
        RogueNetConfig(d_model=30, n_head=4)
    with pytest.raises(ValueError, match="pooling"):
        RogueNetConfig(pooling="sum")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="reference_entity"):
        RogueNet(
            OBS_SPACE, ACTION_SPACE, RogueNetConfig(translation=TranslationConfig("Ship", ["x"]))
        )
    with pytest.raises(ValueError, match="one extent per position feature"):
        RogueNet(OBS_SPACE, ACTION_SPACE, RogueNetConfig(relpos=RelposConfig(["x", "y"], [1])))
    other = Batcher(ObsSpace({"Unit": Entity(["x"]), "Item": Entity(["x", "y"])}, ["time"]), {})
    obs = other.batch([Observation(features={"Unit": [[1.0]]}, global_features=[0.0])])
    with pytest.raises(ValueError, match="'Unit': the network expects 3 features, got 1"):
        net().prepare(obs)


@pytest.mark.parametrize("config", [{}, CONFIGS[5]], ids=["default", "relpos"])
def test_length_buckets_give_the_same_outputs_as_rows_alone(config: dict) -> None:
    # Enough rows of varied length that attention splits them into several buckets.
    rng = np.random.default_rng(10)
    rows = [random_row(rng, int(u), int(i)) for u, i in rng.integers(1, 20, size=(300, 2))]
    model = net(**config)
    model.grid_layout = True  # torch's attention on padded grids, even where the kernel runs
    batch = BATCHER.batch(rows)
    assert len(model.prepare(batch).layout.buckets) > 1
    together = score(model, batch)
    actor_rows = batch.action_masks["move"].actors.row_index()
    for r in (0, 57, 299):
        alone = score(model, BATCHER.batch([rows[r]]))
        torch.testing.assert_close(alone.values[0], together.values[r], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(
            alone.heads["move"].logprob,
            together.heads["move"].logprob[actor_rows == r],
            atol=1e-5,
            rtol=1e-5,
        )


def hidden_items(rng: np.random.Generator, units: int, items: int) -> Observation:
    row = random_row(rng, units, items)
    row.visible = {"Item": rng.random(items) < 0.5}
    return row


@pytest.mark.skipif(not kernel_available(), reason="no C++ compiler for the attention kernel")
@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_attention_kernel_matches_torch_attention_on_grids(precision: str) -> None:
    rng = np.random.default_rng(11)
    sizes = rng.integers(0, 25, size=(60, 2))
    batch = BATCHER.batch([hidden_items(rng, int(u), int(i)) for u, i in sizes])
    outputs = []
    for grids in (False, True):
        model = net(precision=precision)
        model.grid_layout = grids
        out = score_with_grad(model, batch)
        outputs.append(out)
    (kernel, kernel_grads), (grid, grid_grads) = outputs
    # The two sum in different orders; in bfloat16, a sum may then round to a neighbour.
    tol = 1e-5 if precision == "float32" else 2e-3
    torch.testing.assert_close(kernel.values, grid.values, atol=tol, rtol=10 * tol)
    for name in ACTION_SPACE:
        torch.testing.assert_close(
            kernel.heads[name].logprob, grid.heads[name].logprob, atol=tol, rtol=10 * tol
        )
    for name, grad in kernel_grads.items():
        torch.testing.assert_close(grad, grid_grads[name], atol=10 * tol, rtol=100 * tol, msg=name)


def score_with_grad(model: RogueNet, obs: VecObs):
    """Outputs for action 0 of every actor, and the gradients of their sum."""
    actions = {
        name: torch.zeros(mask.actors.items, dtype=torch.int64)
        for name, mask in obs.action_masks.items()
    }
    out = model(model.prepare(obs), actions)
    total = out.values.sum() + sum(h.logprob.sum() + h.entropy.sum() for h in out.heads.values())
    total.backward()
    return out, {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.skipif(
    not pointwise.kernel_available(), reason="no C++ compiler for the pointwise kernels"
)
@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
@pytest.mark.parametrize("config", [{}, {"pooling": "mean"}], ids=["attention", "pooling"])
def test_pointwise_kernels_match_torch_layers(
    config: dict, precision: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(13)
    batch = BATCHER.batch(
        [random_row(rng, int(u), int(i)) for u, i in rng.integers(0, 20, (40, 2))]
    )
    kernel, kernel_grads = score_with_grad(net(precision=precision, **config), batch)
    monkeypatch.setattr(pointwise, "_get_kernel", lambda: None)  # torch's LayerNorm and GELU
    reference, reference_grads = score_with_grad(net(precision=precision, **config), batch)
    # bfloat16 GELU outputs may round to a neighbour (torch's float32 GELU is less accurate).
    tol = 1e-5 if precision == "float32" else 2e-3
    torch.testing.assert_close(kernel.values, reference.values, atol=tol, rtol=10 * tol)
    for name in ACTION_SPACE:
        torch.testing.assert_close(
            kernel.heads[name].logprob, reference.heads[name].logprob, atol=tol, rtol=10 * tol
        )
    assert kernel_grads.keys() == reference_grads.keys()
    for name, grad in kernel_grads.items():
        torch.testing.assert_close(
            grad, reference_grads[name], atol=10 * tol, rtol=100 * tol, msg=name
        )


def test_bfloat16_precision_stays_close_to_float32() -> None:
    rng = np.random.default_rng(12)
    batch = BATCHER.batch(
        [random_row(rng, int(u), int(i)) for u, i in rng.integers(0, 20, (40, 2))]
    )
    full, half = score(net(precision="float32"), batch), score(net(precision="bfloat16"), batch)
    # bfloat16 keeps 8 significant bits: outputs agree to about 1%.
    torch.testing.assert_close(half.values, full.values, atol=2e-2, rtol=2e-2)
    for name in ACTION_SPACE:
        torch.testing.assert_close(
            half.heads[name].logprob, full.heads[name].logprob, atol=2e-2, rtol=2e-2
        )


def test_precision_auto_uses_bfloat16_only_where_the_cpu_multiplies_it() -> None:
    expected = torch.bfloat16 if native_bfloat16() else torch.float32
    assert compute_dtype("auto") == expected
    assert compute_dtype("float32") == torch.float32
    with pytest.raises(ValueError, match=r"net.precision must be one of .*got 'half'"):
        RogueNetConfig(precision="half")  # type: ignore[arg-type]


def test_select_entity_scores_are_query_dot_key_over_each_rows_candidates() -> None:
    # The head computes (W_k^T q) . x; the softmax must equal that of q . (W_k x + b_k) / sqrt(d)
    # over each actor's candidates, with several actors per row and masked candidates.
    rows = picking_rows(8, [(2, 3), (1, 6), (3, 1), (0, 2), (2, 2)])
    obs = BATCHER.batch(rows)
    model = net()
    with torch.no_grad():
        model.heads["pick"].key.bias.normal_()  # (has no effect: the softmax drops it)
        batch = model.prepare(obs)
        x = model.encoder(batch, attention_context(batch.layout))
        head = model.heads["pick"]
        mask = obs.action_masks["pick"]
        actors = batch.heads["pick"].actor_flat
        row_of_actor = np.repeat(np.arange(len(rows)), mask.actors.lengths)
        first_slot = batch.layout.row_slot
        expected = []
        for a, r in enumerate(row_of_actor):
            slots = first_slot[r] + mask.actees.take([r]).data[:, 0]
            scores = head.key(x[slots]) @ head.query(x[actors[a]]) / head.d_qk**0.5
            legal = torch.ones(len(slots), dtype=torch.bool)
            if r == 0:
                legal = torch.from_numpy(PICK_MASK[a])
            expected.append(torch.log_softmax(scores.masked_fill(~legal, -torch.inf), 0))
        for j in range(6):
            chosen = torch.tensor([min(j, len(e) - 1) for e in expected])
            out = head(x, batch.heads["pick"], chosen)
            want = torch.stack([e[c] for e, c in zip(expected, chosen.tolist(), strict=True)])
            torch.testing.assert_close(out.logprob, want, rtol=1e-5, atol=1e-5)
