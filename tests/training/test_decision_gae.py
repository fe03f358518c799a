"""Advantages over each agent's own decisions (entityrl.algorithms.common.gae.decision_gae)
and rollouts that learn from decision steps only."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
import torch

from entityrl.algorithms import registry
from entityrl.algorithms.common.gae import decision_gae, gae
from entityrl.algorithms.ppo.loss import PPOConfig, ppo_terms
from entityrl.env.decisions import Decisions
from entityrl.envs import make_vec
from entityrl.nn import RogueNet, RogueNetConfig
from entityrl.training.config import ConfigError, load_config
from entityrl.training.sampler import make_sampler

T, F = True, False
GAMMA, LAMBDA = 0.5, 0.5


def fold(
    decides: list[bool] | list[list[bool]],
    dones: list[bool],
    next_decides: list[bool],
    values: npt.NDArray[np.float32] | None = None,
    ratios: list[float] | None = None,
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32], npt.NDArray[np.bool_]]:
    """decision_gae over 6 steps of one or more rows (``decides`` per step): rewards 1..6,
    values 10 and 20 at steps 0 and 3 unless given, 30 after the last step; ``ratios`` per
    step (one row), or None."""
    deciding = np.array(decides, dtype=np.bool_).reshape(6, -1)
    envs = deciding.shape[1]
    values = (
        np.array([10, 0, 0, 20, 0, 0], np.float32)[:, None].repeat(envs, 1)
        if values is None
        else values
    )
    return decision_gae(
        np.arange(1, 7, dtype=np.float32)[:, None].repeat(envs, 1),
        values,
        np.array(dones, dtype=np.bool_).reshape(6, envs),
        deciding,
        np.full(envs, 30, np.float32),
        np.array(next_decides, dtype=np.bool_),
        GAMMA,
        LAMBDA,
        None if ratios is None else np.array(ratios, np.float32).reshape(6, envs),
    )


def test_rewards_sum_over_the_period_and_discount_once_per_decision() -> None:
    adv, ret, samples = fold([T, F, F, T, F, F], [F] * 6, [T])
    # Decision 3: rewards 4 + 5 + 6, bootstrapped from the next observation's value 30.
    # Decision 0: rewards 1 + 2 + 3, then decision 3's value 20, then its advantage.
    delta3 = 15 + GAMMA * 30 - 20
    delta0 = 6 + GAMMA * 20 - 10
    np.testing.assert_allclose(adv[:, 0], [delta0 + GAMMA * LAMBDA * delta3, 0, 0, delta3, 0, 0])
    np.testing.assert_allclose(ret[[0, 3], 0], [10 + adv[0, 0], 20 + adv[3, 0]])
    assert samples[:, 0].tolist() == [T, F, F, T, F, F]


def test_an_episode_ending_mid_period_ends_the_decision_with_what_it_accumulated() -> None:
    # Done at step 4: decision 3 earns 4 + 5 and ends; step 5 is the next episode's, before
    # its first decision, and belongs to no decision.
    adv, _, samples = fold([T, F, F, T, F, F], [F, F, F, F, T, F], [F])
    delta3 = 9 - 20
    np.testing.assert_allclose(
        adv[[0, 3], 0], [6 + GAMMA * 20 - 10 + GAMMA * LAMBDA * delta3, delta3]
    )
    assert samples[:, 0].tolist() == [T, F, F, T, F, F]


def test_a_period_cut_by_the_rollout_is_no_sample_but_bootstraps_the_one_before() -> None:
    adv, _, samples = fold([T, F, F, T, F, F], [F] * 6, [F])
    assert samples[:, 0].tolist() == [T, F, F, F, F, F]
    np.testing.assert_allclose(adv[0, 0], 6 + GAMMA * 20 - 10)  # no trace past decision 3


def test_staggered_rows_fold_independently() -> None:
    # Row 0 every 3 steps from 0, row 1 every 3 steps from 1 (the next observation, step 6,
    # is row 0's decision, not row 1's).
    decides = [[T, F], [F, T], [F, F], [T, F], [F, T], [F, F]]
    values = np.array([[10, 0], [0, 11], [0, 0], [20, 0], [0, 21], [0, 0]], np.float32)
    adv, _, samples = fold(decides, [F] * 12, [T, F], values=values)
    assert samples.tolist() == [[T, F], [F, T], [F, F], [T, F], [F, F], [F, F]]
    # Row 1's decision at step 1: rewards 2 + 3 + 4, then step 4's value 21 (no trace); the
    # reward of step 0 (before its first decision in the rollout) is nobody's.
    np.testing.assert_allclose(adv[1, 1], 9 + GAMMA * 21 - 11)
    np.testing.assert_allclose(adv[3, 0], 15 + GAMMA * 30 - 20)


def test_the_ratios_of_the_decisions_weigh_their_errors_and_traces() -> None:
    # V-trace over decisions: decision 3's ratio 0.8 weighs its error; decision 0's ratio 0.5
    # weighs its error and the trace through it. Rows without a decision have ratio 1.
    adv, ret, samples = fold([T, F, F, T, F, F], [F] * 6, [T], ratios=[0.5, 1, 1, 0.8, 1, 1])
    delta3 = 15 + GAMMA * 30 - 20
    delta0 = 6 + GAMMA * 20 - 10
    adv3 = 0.8 * delta3
    adv0 = 0.5 * (delta0 + GAMMA * LAMBDA * adv3)
    np.testing.assert_allclose(adv[:, 0], [adv0, 0, 0, adv3, 0, 0], rtol=1e-6)
    np.testing.assert_allclose(ret[[0, 3], 0], [10 + adv0, 20 + adv3], rtol=1e-6)
    assert samples[:, 0].tolist() == [T, F, F, T, F, F]


def test_with_ratios_one_decision_gae_is_what_it_is_without() -> None:
    rng = np.random.default_rng(1)
    steps, envs = 8, 5
    args = (
        rng.normal(size=(steps, envs)).astype(np.float32),
        rng.normal(size=(steps, envs)).astype(np.float32),
        rng.random((steps, envs)) < 0.2,
        rng.random((steps, envs)) < 0.5,
        rng.normal(size=envs).astype(np.float32),
        rng.random(envs) < 0.5,
        0.9,
        0.8,
    )
    ones = np.ones((steps, envs), np.float32)
    for with_ones, without in zip(decision_gae(*args, ones), decision_gae(*args), strict=True):
        np.testing.assert_array_equal(with_ones, without)
    lower = np.minimum(rng.uniform(0.2, 2.0, size=(steps, envs)), 1.0).astype(np.float32)
    assert not np.allclose(decision_gae(*args, lower)[0], decision_gae(*args)[0], atol=1e-3)


def test_deciding_every_step_is_plain_gae() -> None:
    rng = np.random.default_rng(0)
    rewards = rng.normal(size=(6, 3)).astype(np.float32)
    values = rng.normal(size=(6, 3)).astype(np.float32)
    dones = rng.random((6, 3)) < 0.3
    next_values = rng.normal(size=3).astype(np.float32)
    expected = gae(rewards, values, dones, next_values, GAMMA, LAMBDA)
    adv, ret, samples = decision_gae(
        rewards,
        values,
        dones,
        np.ones((6, 3), np.bool_),
        next_values,
        np.ones(3, np.bool_),
        GAMMA,
        LAMBDA,
    )
    np.testing.assert_allclose(adv, expected[0], rtol=1e-6)
    np.testing.assert_allclose(ret, expected[1], rtol=1e-6)
    assert samples.all()


def test_steps_without_a_decision_are_no_training_samples() -> None:
    decisions = Decisions(periods={"1": 5}, offsets={"1": 2})
    env = make_vec("Lanes", 4, seed=0, decisions=decisions, length=15, max_steps=40)
    torch.manual_seed(0)
    net = RogueNet(env.obs_space, env.action_space, RogueNetConfig(d_model=16))
    generator = torch.Generator().manual_seed(0)
    sampler = make_sampler(env, net, 10, np.random.default_rng(0), generator, decisions=True)
    rollout = sampler.collect()
    rollout.estimate_advantages(rollout.rewards, 0.99, 0.95)
    acting = sum(a.lengths for a in rollout.actions.values()).reshape(10, 8) > 0
    rows = rollout.shuffled_rows(np.random.default_rng(0), 10)
    taken = np.zeros(80, np.bool_)
    taken[rows] = True
    taken = taken.reshape(10, 8)
    assert not (taken & ~acting).any()  # only decisions are samples
    # Player 1 (odd rows) decides at steps 2 and 7 of its first game: step 2's period is
    # complete within the rollout, step 7's is not (its next decision is step 12), unless the
    # player arrives before the rollout's end.
    going = ~rollout.dones[:, 1::2].any(axis=0)
    assert going.any()
    assert acting[:, 1::2][:, going].tolist() == [[s in (2, 7)] * going.sum() for s in range(10)]
    assert taken[2, 1::2][going].all() and not taken[7, 1::2][going].any()
    env.close()


def test_with_memory_steps_without_a_decision_carry_the_state_and_weigh_nothing() -> None:
    """With net.memory the chunks replayed by the loss keep every step (the state runs over
    all of them); the steps that are no samples weigh 0: changing their targets changes no
    loss term, and the minibatch's counts are those of the samples."""
    decisions = Decisions(periods={"1": 5}, offsets={"1": 2})
    env = make_vec("Lanes", 4, seed=0, decisions=decisions, length=15, max_steps=40)
    torch.manual_seed(0)
    net = RogueNet(env.obs_space, env.action_space, RogueNetConfig(d_model=16, memory=True))
    generator = torch.Generator().manual_seed(0)
    sampler = make_sampler(env, net, 10, np.random.default_rng(0), generator, decisions=True)
    rollout = sampler.collect()
    env.close()
    rollout.estimate_advantages(rollout.rewards, 0.99, 0.95)
    assert rollout.samples is not None
    rows = rollout.shuffled_rows(np.random.default_rng(0), 5)
    assert sorted(rows.tolist()) == list(range(80))  # whole chunks: every step
    weights = rollout.sample_weights(rows)
    assert weights is not None
    np.testing.assert_array_equal(weights, rollout.samples.reshape(-1)[rows])
    assert 0 < weights.sum() < 80
    # The incomplete last decision of player 1 (step 7) has an actor but is no sample.
    acting = sum(a.lengths for a in rollout.actions.values())[rows] > 0
    assert (acting & (weights == 0)).any()

    def terms(advantages: npt.NDArray[np.float32]) -> list[float]:
        batch = rollout.minibatch(rows, advantages, 5, weights)
        out = net.evaluate(batch.obs, batch.actions, batch.sequences)
        t = ppo_terms(out, batch, PPOConfig())
        return [t.policy, t.entropy, t.value, t.approx_kl, t.clipped]

    advantages = rollout.advantages[rows] + 1.0
    before = terms(advantages)
    noise = np.where(weights == 0, 100.0, 0.0).astype(np.float32)
    rollout.returns[rows] += noise  # targets of rows that are no samples
    assert terms(advantages + noise) == pytest.approx(before, rel=1e-6)
    rollout.returns[rows[weights > 0][0]] += 1.0  # a sample's target does count
    assert terms(advantages + noise)[2] != pytest.approx(before[2], rel=1e-6)


@pytest.mark.parametrize(
    ("algo", "setting", "message"),
    [
        ("dqn", "seed=0", "algo=dqn learns from single steps"),
        ("poca", "seed=0", "algo=poca does not support env.decisions"),
        ("ppo", "rollout.steps=1", r"expected rollout.steps >= 2, got 1"),
    ],
)
def test_algorithms_that_run_over_every_step_refuse_decisions(
    algo: str, setting: str, message: str
) -> None:
    config = load_config("Lanes", [f"algo={algo}", "env.decisions.period=2", setting])
    with pytest.raises(ConfigError, match=message):
        registry.lookup(algo).check(config)
    registry.lookup(algo).check(load_config("Lanes", [f"algo={algo}"]))  # without: accepted
