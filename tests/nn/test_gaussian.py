"""The Gaussian head of continuous actions, alone and with every other kind in one policy."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from mixed_actions import Mixed

from entityrl.env import ContinuousActionSpace, RandomPolicy, SerialVecEnv
from entityrl.nn import RogueNet
from entityrl.nn.gaussian import LOG_STD_MAX, GaussianHead
from entityrl.nn.layout import ActorInputs
from entityrl.nn.rogue_net import RogueNetConfig

SPACE = ContinuousActionSpace(["a", "b", "c"], low=[-1.0, 0.0, 10.0], high=[1.0, 4.0, 11.0])


def test_log_probabilities_and_entropy_are_the_gaussians() -> None:
    torch.manual_seed(0)
    head = GaussianHead(8, SPACE)
    with torch.no_grad():
        head.log_std.copy_(torch.tensor([0.3, -1.0, 0.0]))
        head.proj.weight.normal_()
    x = torch.randn(5, 8)
    out = head(x, ActorInputs(torch.tensor([4, 0, 2])), generator=torch.Generator().manual_seed(1))
    assert out.actions.shape == (3, 3)
    mean = head.center + head.half_range * head.proj(x[[4, 0, 2]])
    std = head.half_range * head.log_std.exp()
    normal = torch.distributions.Normal(mean, std)
    torch.testing.assert_close(out.logprob, normal.log_prob(out.actions).sum(1))
    torch.testing.assert_close(out.entropy, normal.entropy().sum(1))
    scored = head(x, ActorInputs(torch.tensor([4, 0, 2])), out.actions)
    torch.testing.assert_close(scored.logprob, out.logprob)
    best = head(x, ActorInputs(torch.tensor([4, 0, 2])), deterministic=True)
    torch.testing.assert_close(best.actions, mean)


def test_samples_are_unbounded_and_the_std_is_kept_within_its_limits() -> None:
    head = GaussianHead(4, SPACE)
    with torch.no_grad():
        head.log_std.fill_(50.0)
    out = head(torch.zeros(2000, 4), ActorInputs(None), generator=torch.Generator().manual_seed(0))
    spread = out.actions.std(0) / head.half_range
    assert torch.allclose(spread, torch.full((3,), math.exp(LOG_STD_MAX)), rtol=0.1)
    # Samples past the bounds are kept as sampled: the environment gets them clipped.
    assert (out.actions[:, 0] > 1.0).any() and (out.actions[:, 0] < -1.0).any()


def test_gradients_reach_the_mean_and_the_log_std() -> None:
    head = GaussianHead(4, SPACE)
    x = torch.randn(6, 4)
    chosen = torch.tensor([[0.5, 1.0, 10.5]]).repeat(6, 1)
    out = head(x, ActorInputs(None), chosen)
    (-out.logprob.sum() - out.entropy.sum()).backward()
    assert head.log_std.grad is not None and head.log_std.grad.abs().min() > 0
    assert head.proj.weight.grad is not None and head.proj.weight.grad.abs().sum() > 0


@pytest.mark.parametrize("layers", [0, 2])
def test_one_policy_acts_with_every_kind_and_scores_what_it_did(layers: int) -> None:
    env = SerialVecEnv(Mixed, 3, seed=0)
    obs = env.reset()
    torch.manual_seed(0)
    net = RogueNet(env.obs_space, env.action_space, RogueNetConfig(n_layer=layers))
    assert net.global_token
    for _ in range(3):
        out = net.act(obs, generator=torch.Generator().manual_seed(2))
        actions = out.actions(obs)
        assert actions["move"].data.dtype == np.float32 and actions["move"].features == 2
        assert actions["speed"].features == 1 and actions["speed"].lengths.tolist() == [1] * 3
        assert actions["grip"].data.dtype == np.int64
        scored = net.evaluate(obs, actions)
        for name, head in out.heads.items():
            torch.testing.assert_close(scored.heads[name].logprob.detach(), head.logprob)
        obs = env.act(actions)


def test_a_batch_where_nobody_takes_a_continuous_action() -> None:
    env = SerialVecEnv(Mixed, 2, seed=0)
    obs = env.reset()
    net = RogueNet(env.obs_space, env.action_space)
    random = RandomPolicy(env.action_space, seed=0).act(obs)
    rows = np.array([], dtype=np.int64)
    empty = obs.take(rows)
    out = net.act(empty)
    assert out.heads["move"].actions.shape == (0, 2)
    assert out.actions(empty)["move"].features == 2
    assert random["move"].items == 4
