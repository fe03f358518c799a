"""PPO update: consistency with the rollout, micro-batching, rows without actors."""

from __future__ import annotations

import copy

import numpy as np
import torch

from entityrl.algo.optimizer import FlatOptimizer
from entityrl.algo.ppo import ppo_losses, ppo_update
from entityrl.envs import make_vec
from entityrl.nn import RogueNet, RogueNetConfig
from entityrl.training.config import OptimConfig, PPOConfig
from entityrl.training.sampler import Sampler


def rollout_of(env_name: str, num_envs: int = 8, steps: int = 6, precision: str = "auto", **kwargs):
    torch.manual_seed(0)
    env = make_vec(env_name, num_envs, seed=0, **kwargs)
    config = RogueNetConfig(d_model=16, n_head=2, precision=precision)
    net = RogueNet(env.obs_space, env.action_space, config)
    sampler = Sampler(env, net, steps)
    net.update_normalizers(sampler.obs)
    return net, sampler.collect(0.99, 0.95)


def test_recomputed_logprobs_match_the_rollout() -> None:
    net, rollout = rollout_of("MineSweeper", orbital_cannon=True, cooldown_period=1)
    rows = np.arange(rollout.num_rows)
    batch = rollout.minibatch(rows, rollout.advantages)
    out = net.evaluate(batch.obs, batch.actions)
    for name, head in out.heads.items():
        torch.testing.assert_close(head.logprob, batch.logprobs[name], atol=1e-5, rtol=1e-5)
    terms = ppo_losses(out, batch, PPOConfig())
    assert abs(terms.approx_kl) < 1e-4 and terms.clipped == 0


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
