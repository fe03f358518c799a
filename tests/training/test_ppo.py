"""PPO update: consistency with the rollout, micro-batching, rows without actors."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch

from entityrl.algorithms.common.optimizer import FlatOptimizer
from entityrl.algorithms.common.rollout import Minibatch
from entityrl.algorithms.ppo.loss import ppo_terms, ppo_update
from entityrl.envs import make_vec
from entityrl.nn import RogueNet, RogueNetConfig
from entityrl.nn.heads import HeadOutput
from entityrl.nn.rogue_net import PolicyOutput
from entityrl.training import Trainer, load_config
from entityrl.training.config import OptimConfig, PPOConfig
from entityrl.training.sampler import Sampler


def rollout_of(env_name: str, num_envs: int = 8, steps: int = 6, precision: str = "auto", **kwargs):
    torch.manual_seed(0)
    env = make_vec(env_name, num_envs, seed=0, **kwargs)
    config = RogueNetConfig(d_model=16, n_head=2, precision=precision)
    net = RogueNet(env.obs_space, env.action_space, config)
    sampler = Sampler(env, net, steps)
    net.update_normalizers(sampler.obs)
    rollout = sampler.collect()
    rollout.estimate_advantages(rollout.rewards, 0.99, 0.95)
    return net, rollout


def test_recomputed_logprobs_match_the_rollout() -> None:
    net, rollout = rollout_of("MineSweeper", orbital_cannon=True, cooldown_period=1)
    rows = np.arange(rollout.num_rows)
    batch = rollout.minibatch(rows, rollout.advantages)
    out = net.evaluate(batch.obs, batch.actions)
    for name, head in out.heads.items():
        torch.testing.assert_close(head.logprob, batch.logprobs[name], atol=1e-5, rtol=1e-5)
    terms = ppo_terms(out, batch, PPOConfig())
    assert abs(terms.approx_kl) < 1e-4 and terms.clipped == 0


def test_torch_terms_match_a_hand_computed_example() -> None:
    c = 0.2
    # Two actors of row 0 and one of row 1; ratios 1.5 (clipped at 1.2), 0.9 and 1.0.
    old = torch.tensor([0.0, 0.0, -1.0])
    new = torch.log(torch.tensor([1.5, 0.9, 1.0])) + old
    out = PolicyOutput(
        {"a": HeadOutput(torch.zeros(3, dtype=torch.int64), new, torch.tensor([0.1, 0.2, 0.3]))},
        torch.tensor([1.0, 0.0]),
    )
    batch = Minibatch(
        obs=None,  # type: ignore[arg-type]
        actions={},
        logprobs={"a": old},
        actor_rows={"a": torch.tensor([0, 0, 1])},
        values=torch.tensor([0.5, 0.0]),
        advantages=torch.tensor([2.0, -1.0]),
        returns=torch.tensor([2.0, 1.0]),
    )
    terms = ppo_terms(out, batch, PPOConfig(clip_coef=c))
    # Actor 0: max(-2 * 1.5, -2 * 1.2) = -2.4; actor 1: max(-1.8, -2.0) = -1.8; actor 2: 1.0.
    assert terms.policy == pytest.approx(-2.4 - 1.8 + 1.0)
    assert terms.entropy == pytest.approx(0.6)
    # Row 0: v moved 0.5 from V = 0.5, clipped to 0.7: max((1 - 2)^2, (0.7 - 2)^2) = 1.69;
    # row 1: v = V, (0 - 1)^2 = 1.
    assert terms.value == pytest.approx(0.5 * (1.69 + 1.0))
    assert terms.clipped == 1
    kl = sum((r - 1) - np.log(r) for r in (1.5, 0.9, 1.0))
    assert terms.approx_kl == pytest.approx(kl, rel=1e-5)


def test_micro_batches_give_the_same_update_as_one_batch() -> None:
    # float32: in bfloat16, weight gradients are rounded per micro-batch before they are summed.
    net, rollout = rollout_of("PickMatchingBalls", precision="float32")
    results = []
    for micro_bs in (None, 12):
        model = copy.deepcopy(net)
        optimizer = FlatOptimizer(model, lambda ps: torch.optim.SGD(ps, lr=0.1))
        optim = OptimConfig(bs=48, micro_bs=micro_bs, max_grad_norm=1e9)
        ppo_update(
            model,
            optimizer,
            rollout,
            PPOConfig(update_epochs=1),
            optim,
            0.01,
            np.random.default_rng(0),
        )
        results.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
    torch.testing.assert_close(results[0], results[1], atol=1e-5, rtol=1e-4)
    assert not torch.equal(results[0], torch.cat([p.flatten() for p in net.parameters()]))


def test_rows_without_actors_still_train_the_value() -> None:
    # NotHotdog's "unused_action" never has actors; its head must simply contribute nothing.
    net, rollout = rollout_of("NotHotdog")
    assert rollout.actions["unused_action"].items == 0
    before = copy.deepcopy(net.value_head.state_dict())
    stats = ppo_update(
        net,
        FlatOptimizer(net, lambda ps: torch.optim.Adam(ps, lr=0.01)),
        rollout,
        PPOConfig(),
        OptimConfig(bs=16),
        0.0,
        np.random.default_rng(0),
    )
    assert np.isfinite(list(stats.values())).all()
    assert not torch.equal(before["proj.weight"], net.value_head.state_dict()["proj.weight"])


def test_target_kl_stops_the_epochs_early() -> None:
    net, rollout = rollout_of("CherryPick")
    stats = ppo_update(
        net,
        FlatOptimizer(net, lambda ps: torch.optim.Adam(ps, lr=0.5)),
        rollout,
        PPOConfig(update_epochs=10, target_kl=1e-6),
        OptimConfig(bs=16),
        0.0,
        np.random.default_rng(0),
    )
    assert stats["epochs"] < 10


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ((), [0.2, 0.2, 0.2]),
        (("ppo.anneal_entropy=true",), [0.2, 0.1, 0.0]),
        (("ppo.anneal_entropy=true", "ppo.ent_coef_final=0.04"), [0.2, 0.12, 0.04]),
        # Without annealing the floor is not used: the coefficient stays where it is set.
        (("ppo.ent_coef_final=0.04",), [0.2, 0.2, 0.2]),
    ],
    ids=["constant", "to-0", "to-floor", "floor-unused"],
)
def test_the_entropy_coefficient_anneals_to_its_floor(
    tmp_path: Path, overrides: tuple[str, ...], expected: list[float]
) -> None:
    config = load_config(
        "CherryPick",
        ["log.tensorboard=false", "log.progress=false", f"log.run_dir={tmp_path}",
         "total_timesteps=1000", "ppo.ent_coef=0.2", *overrides],
    )  # fmt: skip
    algorithm = Trainer(config).algorithm
    coefs = [algorithm.entropy_coef(step) for step in (0, 500, 1000)]
    assert coefs == pytest.approx(expected, abs=1e-12)


def test_a_negative_entropy_floor_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match=r"ppo.ent_coef_final .* got 0.01, -0.1 and 0.5") as e:
        PPOConfig(ent_coef=0.01, ent_coef_final=-0.1)
    assert "\n" not in str(e.value)
