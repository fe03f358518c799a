"""The compiled masked categorical kernel against the torch code it replaces.

The kernel (entityrl/nn/kernels/categorical.cpp) runs rows of up to 32 choices a vector
width's worth (16 rows with AVX-512, 8 with AVX) at a time, one row per lane, and wider rows,
as well as the rows after the last full block, one at a time; it scores given actions, takes
the argmax or samples, on one or more threads. Row counts and widths below reach each path, and every result is compared
with :func:`reference_categorical` (the torch code, also the fallback): in float64 for the
values and gradients, in float32 with the same noise for the sampled actions.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from entityrl.nn import heads
from entityrl.nn.kernels import build
from entityrl.nn.kernels.categorical import (
    HeadOutput,
    kernel_available,
    masked_categorical,
    reference_categorical,
    select_logits,
)
from entityrl.nn.layout import ActorInputs

if os.environ.get("ENTITYRL_NO_KERNELS", "") not in ("", "0"):
    pytest.skip("kernels disabled by ENTITYRL_NO_KERNELS", allow_module_level=True)
if build.find_compiler() is None:
    pytest.skip("no C++ compiler to build the kernel", allow_module_level=True)

# Rows: a single one, less than a block, one block, blocks and a tail, many blocks. Choices:
# one, short rows, a row of exactly one and two vectors (block path), the first wide row,
# wide rows with a partial last vector.
ROWS = [1, 7, 16, 37, 300]
CHOICES = [1, 2, 5, 16, 32, 33, 300]
MODES = ["given", "argmax", "sample"]


@pytest.fixture(scope="module", autouse=True)
def _kernel_builds() -> None:
    # A compiler is present: failing to build is a bug, not a reason to skip.
    assert kernel_available(), build.unavailable_reason


def make_case(
    rows: int, choices: int, seed: int, p_legal: float | None = 0.7, scale: float = 3.0
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """Logits, a legal mask (None if p_legal is None; row 0 may have no legal choice, every
    other row at least one) and legal chosen actions (any action where none is legal)."""
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(rows, choices, generator=gen) * scale
    chosen = torch.randint(0, choices, (rows,), generator=gen)
    if p_legal is None:
        return logits, None, chosen
    legal = torch.rand(rows, choices, generator=gen) < p_legal
    legal[torch.arange(rows), chosen] = True
    if rows > 1:
        legal[0] = False
    return logits, legal, chosen


Categorical = Callable[..., HeadOutput]


def run(
    fn: Categorical,
    logits: torch.Tensor,
    legal: torch.Tensor | None,
    chosen: torch.Tensor | None,
    mode: str,
    seed: int = 0,
) -> HeadOutput:
    """fn (masked_categorical or reference_categorical) in ``mode``, the RNG seeded."""
    torch.manual_seed(seed)
    return fn(logits, legal, chosen if mode == "given" else None, mode == "argmax")


def gumbel_scores(logits: torch.Tensor, legal: torch.Tensor | None, seed: int) -> torch.Tensor:
    """The scores whose argmax the sampler takes, with the noise a call seeded so draws."""
    torch.manual_seed(seed)
    masked = logits if legal is None else logits.masked_fill(~legal, float("-inf"))
    return masked - torch.log(-torch.log(torch.rand_like(masked)))


def assert_same_choices(
    actions: torch.Tensor, expected: torch.Tensor, scores: torch.Tensor
) -> None:
    """The same actions, except where the logarithms' last bit may swap two entries whose
    scores agree to 1e-6 (relative): there the kernel's pick must score as high."""
    differ = actions != expected
    if differ.any():
        rows = differ.nonzero().squeeze(1)
        mine = scores[rows, actions[rows]]
        best = scores[rows, expected[rows]]
        assert (best - mine <= 1e-6 * (1 + best.abs())).all(), (rows, mine, best)
        assert differ.sum() <= max(1, len(actions) // 1000)


def check_forward(
    logits: torch.Tensor, legal: torch.Tensor | None, chosen: torch.Tensor, mode: str
) -> HeadOutput:
    """Kernel forward against the reference (float64 values, float32 draws) and the RNG
    left as the reference leaves it."""
    out = run(masked_categorical, logits, legal, chosen, mode, seed=5)
    after = torch.get_rng_state()
    ref32 = run(reference_categorical, logits, legal, chosen, mode, seed=5)
    assert torch.equal(torch.get_rng_state(), after)
    assert out.actions.dtype == torch.int64 and out.actions.shape == (logits.shape[0],)
    if mode == "sample":
        assert_same_choices(out.actions, ref32.actions, gumbel_scores(logits, legal, seed=5))
    else:
        assert torch.equal(out.actions, ref32.actions)
    ref = reference_categorical(logits.double(), legal, out.actions)
    assert out.logprob.dtype == torch.float32 and out.entropy.dtype == torch.float32
    finite = logits[logits.isfinite()]
    atol = 2e-6 * (1 + float(finite.abs().max())) if finite.numel() else 0.0
    torch.testing.assert_close(
        out.logprob.double(), ref.logprob, atol=atol, rtol=1e-5, equal_nan=True
    )
    torch.testing.assert_close(
        out.entropy.double(), ref.entropy, atol=atol, rtol=1e-5, equal_nan=True
    )
    return out


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("choices", CHOICES)
@pytest.mark.parametrize("rows", ROWS)
def test_forward(rows: int, choices: int, mode: str) -> None:
    for p_legal in (None, 0.7):
        check_forward(*make_case(rows, choices, seed=rows * 1000 + choices, p_legal=p_legal), mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("choices", [5, 64])
def test_forward_threads(choices: int, mode: str, threads: int) -> None:
    # Enough entries for two threads (blocks, then single rows, split between them).
    check_forward(*make_case(20_000, choices, seed=choices), mode)


def test_threads_agree() -> None:
    logits, legal, _ = make_case(20_000, 5, seed=3)
    leaf = logits.requires_grad_()
    results = []
    before = torch.get_num_threads()
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            out = run(masked_categorical, leaf, legal, None, "sample", seed=1)
            grad = torch.autograd.grad(out.logprob.nansum() + out.entropy.nansum(), leaf)[0]
            results.append((out.actions, out.logprob, out.entropy, grad))
    finally:
        torch.set_num_threads(before)
    for a, b in zip(*results, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)


def test_empty() -> None:
    for choices in (1, 5, 40):
        for mode in MODES:
            out = check_forward(
                torch.zeros(0, choices),
                torch.zeros(0, choices, dtype=torch.bool),
                torch.zeros(0, dtype=torch.int64),
                mode,
            )
            assert out.logprob.shape == (0,) and out.entropy.shape == (0,)
    leaf = torch.zeros(0, 5, requires_grad=True)
    out = masked_categorical(leaf, None, torch.zeros(0, dtype=torch.int64))
    (grad,) = torch.autograd.grad(out.logprob.sum() + out.entropy.sum(), leaf)
    assert grad.shape == (0, 5)


@pytest.mark.parametrize("choices", [5, 40])
def test_ties(choices: int) -> None:
    # Equal logits: the argmax is the first of them, as torch.argmax's; the probabilities
    # split evenly.
    gen = torch.Generator().manual_seed(choices)
    logits = torch.randint(0, 3, (300, choices), generator=gen).float()
    legal = torch.rand(300, choices, generator=gen) < 0.8
    legal[:, -1] = True
    for mask in (None, legal):
        out = check_forward(logits, mask, torch.zeros(300, dtype=torch.int64), "argmax")
        masked = logits if mask is None else logits.masked_fill(~mask, float("-inf"))
        first = (masked == masked.amax(1, keepdim=True)).int().argmax(1)
        assert torch.equal(out.actions, first)


@pytest.mark.parametrize("choices", [32, 300])
def test_uniform_rows(choices: int) -> None:
    # n equal legal logits: log-probability -log n and entropy log n, to float32 precision
    # (1.5 units in the last place: the kernel's own logarithm on the block path).
    n = torch.arange(1, choices + 1)
    legal = torch.arange(choices)[None, :] < n[:, None]
    out = masked_categorical(torch.full((choices, choices), 0.7), legal, n - 1)
    exact = n.double().log()
    ulp = (exact.float().nextafter(torch.tensor(float("inf"))) - exact.float()).double()
    assert ((-out.logprob.double() - exact).abs() <= 1.5 * ulp).all()
    assert ((out.entropy.double() - exact).abs() <= 1.5 * ulp).all()


# ---------------------------------------------------------------------------------------
# Masks


@pytest.mark.parametrize("choices", [1, 5, 40])
@pytest.mark.parametrize("mode", MODES)
def test_single_legal_choice(choices: int, mode: str) -> None:
    # A certain choice: it is the action whatever the logits say, with log-probability 0
    # and entropy 0 (and so no gradient); rows past the first block take the row path.
    rows = 40
    logits = torch.randn(rows, choices) * 5
    only = torch.randint(0, choices, (rows,))
    legal = torch.zeros(rows, choices, dtype=torch.bool)
    legal[torch.arange(rows), only] = True
    leaf = logits.requires_grad_()
    out = run(masked_categorical, leaf, legal, only, mode)
    assert torch.equal(out.actions, only)
    assert torch.equal(out.logprob.detach(), torch.zeros(rows))
    assert torch.equal(out.entropy.detach().abs(), torch.zeros(rows))
    (grad,) = torch.autograd.grad(out.logprob.sum() + out.entropy.sum(), leaf)
    assert torch.equal(grad, torch.zeros(rows, choices))


@pytest.mark.parametrize("choices", [5, 40])
def test_illegal_never_sampled(choices: int) -> None:
    # Illegal entries with the largest logits: never sampled, whatever the noise.
    logits, legal, _ = make_case(2000, choices, seed=4)
    logits = torch.where(legal, logits, 100.0)
    legal[0, 0] = True  # no row without a legal choice here
    for seed in range(5):
        out = run(masked_categorical, logits, legal, None, "sample", seed=seed)
        assert legal[torch.arange(2000), out.actions].all()


@pytest.mark.parametrize("choices", [3, 40])
def test_sample_frequencies(choices: int) -> None:
    # One distribution sampled in every row: the frequencies are its probabilities (within
    # five standard deviations; the seed makes the outcome fixed).
    rows = 40_000
    row = torch.randn(choices)
    legal = torch.rand(choices) < 0.6
    legal[0] = True
    probs = torch.softmax(row.masked_fill(~legal, float("-inf")), 0).double()
    torch.manual_seed(0)
    out = masked_categorical(row.expand(rows, choices), legal.expand(rows, choices))
    freq = torch.bincount(out.actions, minlength=choices).double() / rows
    assert (freq[~legal] == 0).all()
    assert ((freq - probs).abs() <= 5 * (probs * (1 - probs) / rows).sqrt() + 1e-9).all()


@pytest.mark.parametrize("choices", [4, 40])
@pytest.mark.parametrize("mode", MODES)
def test_no_legal_choice(choices: int, mode: str) -> None:
    # As torch: action 0 (unless given), NaN log-probability and entropy, zero gradient; the
    # other rows unaffected. Rows 0 (block path) and 17 (tail, row path) have no choice.
    logits, legal, chosen = make_case(18, choices, seed=1)
    legal[17] = False
    leaf = logits.requires_grad_()
    out = run(masked_categorical, leaf, legal, chosen, mode)
    ref = run(reference_categorical, leaf, legal, chosen, mode)
    none = torch.zeros(18, dtype=torch.bool)
    none[[0, 17]] = True
    if mode != "given":
        assert torch.equal(out.actions[none], torch.zeros(2, dtype=torch.int64))
    assert out.logprob[none].isnan().all() and out.entropy[none].isnan().all()
    assert not out.logprob[~none].isnan().any() and not out.entropy[~none].isnan().any()
    assert torch.equal(out.actions, ref.actions)
    (grad,) = torch.autograd.grad(out.logprob.nansum() + out.entropy.nansum(), leaf)
    (ref_grad,) = torch.autograd.grad(ref.logprob.nansum() + ref.entropy.nansum(), leaf)
    assert torch.equal(grad[none], torch.zeros(2, choices))
    torch.testing.assert_close(grad, ref_grad, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("choices", [4, 40])
def test_illegal_chosen_action(choices: int) -> None:
    # Scoring an illegal action: log-probability -inf (as torch), no gradient to it.
    logits, legal, chosen = make_case(20, choices, seed=2)
    legal[:, 1] = False
    chosen[:] = 1
    legal[:, 0] = True
    leaf = logits.requires_grad_()
    out = masked_categorical(leaf, legal, chosen)
    assert torch.equal(out.logprob.detach(), torch.full((20,), float("-inf")))
    (grad,) = torch.autograd.grad(out.entropy.sum(), leaf)
    assert torch.equal(grad[~legal], torch.zeros(int((~legal).sum())))


@pytest.mark.parametrize("choices", [5, 40])
def test_extreme_logits(choices: int) -> None:
    # Logits far apart (probabilities below float32's smallest number), far from zero, and
    # infinite or NaN ones: as torch, a -inf legal logit has probability 0 but makes the
    # entropy NaN (0 * -inf), a NaN one makes its row NaN.
    logits, legal, chosen = make_case(40, choices, seed=6, scale=1e3)
    logits[1:4] += 1e4
    logits[5, :] = float("-inf")
    logits[6, 0] = float("-inf")
    logits[7, 1] = float("nan")
    legal[5:8] = True
    for mode in ("given", "argmax"):
        check_forward(logits, legal, chosen, mode)
    out = masked_categorical(logits, legal, chosen)
    assert out.entropy[5:8].isnan().all() and not out.entropy[8:].isnan().any()


# ---------------------------------------------------------------------------------------
# Gradients


def check_gradients(
    logits: torch.Tensor,
    legal: torch.Tensor | None,
    chosen: torch.Tensor,
    mode: str,
    outputs: tuple[str, ...] = ("logprob", "entropy"),
) -> None:
    """Gradient of a random combination of the outputs against the reference in float64."""
    gen = torch.Generator().manual_seed(1)
    weights = {name: torch.randn(logits.shape[0], generator=gen) for name in outputs}
    leaf = logits.clone().requires_grad_()
    out = run(masked_categorical, leaf, legal, chosen, mode)
    loss = sum((getattr(out, name) * w).nansum() for name, w in weights.items())
    (grad,) = torch.autograd.grad(loss, leaf)
    leaf64 = logits.double().requires_grad_()
    ref = reference_categorical(leaf64, legal, out.actions)
    loss64 = sum((getattr(ref, name) * w.double()).nansum() for name, w in weights.items())
    (ref_grad,) = torch.autograd.grad(loss64, leaf64)
    assert grad.dtype == torch.float32 and grad.shape == logits.shape
    torch.testing.assert_close(grad.double(), ref_grad, atol=1e-5, rtol=1e-4)
    if legal is not None:
        assert torch.equal(grad[~legal], torch.zeros(int((~legal).sum())))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("choices", CHOICES)
@pytest.mark.parametrize("rows", [7, 37, 300])
def test_gradients(rows: int, choices: int, mode: str) -> None:
    for p_legal in (None, 0.7):
        check_gradients(*make_case(rows, choices, seed=rows + choices, p_legal=p_legal), mode)


@pytest.mark.parametrize("outputs", [("logprob",), ("entropy",)], ids=["logprob", "entropy"])
@pytest.mark.parametrize("choices", [5, 40])
def test_gradient_of_one_output(choices: int, outputs: tuple[str, ...]) -> None:
    check_gradients(*make_case(37, choices, seed=choices), "given", outputs)


@pytest.mark.parametrize("choices", [5, 64])
def test_gradients_threads(choices: int, threads: int) -> None:
    check_gradients(*make_case(20_000, choices, seed=7), "given")


def test_gradient_in_a_graph() -> None:
    # Logits computed from parameters, the outputs in a PPO-like loss with other terms.
    torch.manual_seed(0)
    proj = torch.nn.Linear(8, 6)
    x = torch.randn(50, 8)
    legal = torch.rand(50, 6) < 0.7
    legal[:, 3] = True
    chosen = torch.full((50,), 3)
    old = torch.randn(50)
    grads = []
    for fn in (masked_categorical, reference_categorical):
        out = fn(proj(x), legal, chosen)
        ratio = (out.logprob - old).exp()
        loss = -(ratio * old).mean() - 0.01 * out.entropy.mean()
        grads.append(torch.autograd.grad(loss, list(proj.parameters())))
    for g, r in zip(*grads, strict=True):
        torch.testing.assert_close(g, r, atol=1e-5, rtol=1e-4)


def test_no_graph_without_grad() -> None:
    logits, legal, chosen = make_case(40, 5, seed=0)
    leaf = logits.requires_grad_()
    with torch.no_grad():
        out = masked_categorical(leaf, legal, chosen)
    assert out.logprob.grad_fn is None and not out.entropy.requires_grad
    with torch.inference_mode():
        again = masked_categorical(leaf, legal, chosen)
    torch.testing.assert_close(again.logprob, out.logprob, rtol=0, atol=0, equal_nan=True)
    plain = masked_categorical(logits.detach(), legal, chosen)
    assert plain.logprob.grad_fn is None and not plain.entropy.requires_grad
    assert masked_categorical(leaf, legal, chosen).logprob.grad_fn is not None


@given(
    rows=st.integers(0, 40),
    choices=st.integers(1, 70),
    p_legal=st.one_of(st.none(), st.floats(0.0, 1.0)),
    scale=st.floats(0.01, 100.0),
    mode=st.sampled_from(MODES),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_property(
    rows: int, choices: int, p_legal: float | None, scale: float, mode: str, seed: int
) -> None:
    case = make_case(rows, choices, seed, p_legal, scale)
    check_forward(*case, mode)
    check_gradients(*case, mode)


# ---------------------------------------------------------------------------------------
# Inputs, fallback and wiring


def test_inputs_checked() -> None:
    logits = torch.randn(4, 3)
    with pytest.raises(ValueError, match=r"logits must be \(actors, choices\)"):
        masked_categorical(torch.randn(12), None)
    with pytest.raises(ValueError, match=r"logits must be \(actors, choices\)"):
        masked_categorical(torch.randn(2, 2, 3), None)
    with pytest.raises(ValueError, match="legal must be bool"):
        masked_categorical(logits, torch.ones(4, 3, dtype=torch.uint8))
    with pytest.raises(ValueError, match="legal must be bool"):
        masked_categorical(logits, torch.ones(4, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match="chosen must be integer"):
        masked_categorical(logits, None, torch.zeros(4))
    with pytest.raises(ValueError, match=r"chosen must be \(4,\)"):
        masked_categorical(logits, None, torch.zeros(3, dtype=torch.int64))
    with pytest.raises(ValueError, match="out of range"):
        masked_categorical(logits, None, torch.tensor([0, 1, 3, 0]))
    with pytest.raises(ValueError, match="out of range"):
        masked_categorical(torch.randn(40, 50), None, torch.full((40,), -1))


def test_other_layouts_and_index_dtypes() -> None:
    logits, legal, chosen = make_case(37, 5, seed=9)
    wide = torch.randn(37, 10)
    wide[:, ::2] = logits  # not contiguous
    out = masked_categorical(wide[:, ::2], legal, chosen.int())
    assert out.actions.dtype == torch.int64 and torch.equal(out.actions, chosen)
    ref = reference_categorical(logits, legal, chosen)
    torch.testing.assert_close(out.logprob, ref.logprob, equal_nan=True, atol=1e-5, rtol=1e-5)
    given = masked_categorical(logits, legal, chosen)
    assert given.actions is chosen  # the given actions themselves, as the torch code returns


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_other_dtypes_use_torch(dtype: torch.dtype) -> None:
    logits, legal, chosen = make_case(10, 4, seed=3)
    logits = logits.to(dtype)
    out = masked_categorical(logits, legal, chosen)
    ref = reference_categorical(logits, legal, chosen)
    assert out.logprob.dtype == dtype
    assert torch.equal(out.logprob.nan_to_num(), ref.logprob.nan_to_num())
    if dtype == torch.float64:
        mask = torch.rand(6, 4) < 0.7
        mask[:, 2] = True

        def outputs(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            out = masked_categorical(x, mask, torch.full((6,), 2))
            return out.logprob, out.entropy

        assert torch.autograd.gradcheck(
            outputs, (torch.randn(6, 4, dtype=dtype, requires_grad=True),)
        )


@pytest.mark.usefixtures("no_kernel")
@pytest.mark.parametrize("mode", MODES)
def test_disabled_by_environment_uses_torch(mode: str) -> None:
    assert not kernel_available()
    logits, legal, chosen = make_case(37, 5, seed=8)
    leaf = logits.requires_grad_()
    out = run(masked_categorical, leaf, legal, chosen, mode)
    ref = run(reference_categorical, leaf, legal, chosen, mode)
    assert torch.equal(out.actions, ref.actions)
    assert torch.equal(out.logprob.nan_to_num(), ref.logprob.nan_to_num())
    assert torch.equal(out.entropy.nan_to_num(), ref.entropy.nan_to_num())
    # The reference's own graph (a kernel's backward would be named after the kernel).
    assert "MaskedCategorical" not in type(out.logprob.grad_fn).__name__


def test_heads_use_the_kernel() -> None:
    assert heads.masked_categorical is masked_categorical
    assert heads.HeadOutput is HeadOutput
    head = heads.CategoricalHead(8, 5)
    x = torch.randn(10, 8)
    actors = torch.tensor([1, 4, 7])
    inputs = ActorInputs(actors, torch.ones(3, 5, dtype=torch.bool))
    out = head(x, inputs, torch.tensor([0, 2, 4]))
    assert "MaskedCategorical" in type(out.logprob.grad_fn).__name__


# ---------------------------------------------------------------------------------------
# Select-entity logits


@pytest.mark.parametrize("width", [1, 16, 32, 37])
def test_select_logits_match_torch_values_and_gradients(width: int) -> None:
    gen = torch.Generator().manual_seed(width)
    slots, actors, candidates = 50, 6, 9
    x = torch.randn(slots, width, generator=gen, requires_grad=True)
    u = torch.randn(actors, width, generator=gen, requires_grad=True)
    # Every actor scores some candidates; slots repeat across actors (several actors per row).
    actor = torch.repeat_interleave(torch.arange(actors), torch.tensor([3, 9, 1, 4, 4, 2]))
    slot = torch.randint(0, slots, actor.shape, generator=gen)
    position = torch.cat(
        [torch.randperm(candidates, generator=gen)[:n] for n in [3, 9, 1, 4, 4, 2]]
    )
    pos = actor * candidates + position
    grad = torch.randn(actors, candidates, generator=gen)
    logits = select_logits(x, u, slot, actor, pos, (actors, candidates), 0.25)
    logits.backward(grad)
    got = (logits.detach(), x.grad, u.grad)
    x.grad = u.grad = None
    flat = 0.25 * (x[slot] * u[actor]).sum(1)
    want = torch.zeros(actors * candidates).index_put((pos,), flat).view(actors, candidates)
    want.backward(grad)
    torch.testing.assert_close(got[0], want.detach())
    torch.testing.assert_close(got[1], x.grad)
    torch.testing.assert_close(got[2], u.grad)
    assert not got[1][torch.tensor([s not in slot for s in range(slots)])].any()


def test_select_logits_refuse_indices_out_of_range() -> None:
    x, u = torch.randn(4, 8), torch.randn(2, 8)
    ok = torch.tensor([0, 1]), torch.tensor([0, 1]), torch.tensor([0, 3])
    select_logits(x, u, *ok, (2, 2), 1.0)
    for which, bad in [(0, 4), (1, 2), (2, 4)]:
        indices = list(ok)
        indices[which] = torch.tensor([0, bad])
        with pytest.raises(ValueError, match="select_logits: a pair's slot, actor or position"):
            select_logits(x, u, *indices, (2, 2), 1.0)
