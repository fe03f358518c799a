"""Difficulty metrics: task times under a random policy, goal levels, policy information
capacity."""

from __future__ import annotations

import math

import numpy as np
import pytest

from entityrl.envs.survival import SurvivalWorld
from entityrl.envs.survival.metrics import (
    goal_deadlines,
    information_capacity,
    play_first_episodes,
    policy_information_capacity,
    task_difficulty,
    ttmx,
)
from entityrl.envs.survival.policies import LinearSoftmaxPolicies
from entityrl.ragged import RaggedArray


def test_ttmx_is_the_step_by_which_enough_episodes_did_the_task() -> None:
    first = np.array([4.0, 1.0, 3.0, np.inf])
    assert ttmx(first, 0.5) == 3.0
    assert ttmx(first, 0.75) == 4.0
    assert math.isinf(ttmx(first, 1.0))
    with pytest.raises(ValueError, match="threshold"):
        ttmx(first, 0.0)


def test_goal_levels_in_the_papers_order_start_at_ttmn() -> None:
    # [3, 468] in 4 parts: a_0..a_4 = 3, 119.25, 235.5, 351.75, 468; level i + 1 <-> a_i.
    assert goal_deadlines(3, 468, 4) == [3, 119, 236, 352]
    assert goal_deadlines(10, 50, 4, "paper") == [10, 20, 30, 40]
    assert goal_deadlines(3, 4, 4) == [3, 4]  # deadlines that coincide are one level
    assert goal_deadlines(5, math.inf, 4) == []
    with pytest.raises(ValueError, match="levels"):
        goal_deadlines(1, 2, 0)
    with pytest.raises(ValueError, match="unknown level order 'up'; expected one of paper"):
        goal_deadlines(1, 2, 2, "up")


def test_goal_levels_easiest_first_start_at_ttmx() -> None:
    assert goal_deadlines(3, 468, 4, "easiest_first") == [468, 352, 236, 119]
    assert goal_deadlines(10, 50, 4, "easiest_first") == [50, 40, 30, 20]
    assert goal_deadlines(3, 4, 4, "easiest_first") == [4, 3]


def test_information_capacity_of_known_distributions() -> None:
    distinct = np.repeat(np.arange(4.0)[:, None], 5, axis=1)  # each policy its own return
    assert information_capacity(distinct, bins=8) == pytest.approx(math.log(4))
    same = np.tile(np.array([0.0, 1.0, 2.0, 3.0]), (6, 1))  # every policy the same spread
    assert information_capacity(same, bins=4) == pytest.approx(0.0)
    assert information_capacity(np.ones((3, 3)), bins=4) == 0.0
    with pytest.raises(ValueError, match="policies, episodes"):
        information_capacity(np.ones(3), bins=4)


def test_first_episodes_record_returns_of_every_reward_mode() -> None:
    env = SurvivalWorld(3, seed=0, life_limit=7)
    idle = {"act": RaggedArray(np.zeros((3, 1), dtype=np.int64), np.ones(3, dtype=np.int64))}

    def policy(obs: object) -> dict[str, RaggedArray]:
        return idle | {
            name: RaggedArray(np.zeros((m.actors.items, 1), dtype=np.int64), m.actors.lengths)
            for name, m in obs.action_masks.items()  # type: ignore[attr-defined]
            if name != "act"
        }

    played = play_first_episodes(env, policy, ["drink water"], max_steps=50)
    assert played.lengths.tolist() == [7, 7, 7]
    dense = env.rules.config.rewards.dense
    np.testing.assert_allclose(played.returns["dense"], 6 * dense.alive + dense.death)
    assert played.returns["sparse"].tolist() == [0, 0, 0]
    assert played.returns["very_sparse"].tolist() == [-1, -1, -1]
    assert np.isinf(played.first).all()


def test_task_difficulty_under_random_play() -> None:
    results = task_difficulty(
        "DayAndNight",
        episodes=64,
        max_steps=200,
        actions="simple",
        threshold=0.5,
        order="easiest_first",
        seed=1,
    )
    assert [r.task for r in results] == list(SurvivalWorld(1).rules.config.tasks)
    wood = next(r for r in results if r.task == "collect wood")
    assert 0.5 <= wood.completed <= 1 and 1 <= wood.ttmn <= min(wood.mean, wood.ttmx)
    assert wood.deadlines[0] == wood.ttmx and wood.deadlines == sorted(wood.deadlines, reverse=True)
    assert wood.success[0] >= 0.5 and wood.success == sorted(wood.success, reverse=True)
    with pytest.raises(KeyError, match="unknown task 'fly'"):
        task_difficulty("DayAndNight", ["fly"], episodes=2, max_steps=2)


def test_linear_policies_differ_and_respect_masks() -> None:
    env = SurvivalWorld(40, seed=0, observation="nearest1", actions="simple")
    obs = env.reset()
    choices = len(env.action_space["act"])  # type: ignore[arg-type]
    policies = LinearSoftmaxPolicies(
        2, 20, obs.global_features.shape[1], choices, np.random.default_rng(0)
    )
    counts = np.zeros((2, choices))
    for _ in range(30):
        actions = policies.act(obs)
        chosen = actions["act"].data[:, 0]
        mask = obs.action_masks["act"].mask
        assert mask is not None and mask.data[np.arange(40), chosen].all()
        np.add.at(counts, (np.arange(40) // 20, chosen), 1)
        obs = env.act(actions)
    assert not np.array_equal(counts[0], counts[1])


def test_policy_information_capacity_needs_more_bins_than_episodes() -> None:
    with pytest.raises(ValueError, match=r"the paper's B > M\), got B = 16, M = 32"):
        policy_information_capacity("DayAndNight", policies=2, episodes=32, bins=16)


def test_policy_information_capacity_of_the_reward_modes() -> None:
    report = policy_information_capacity(
        "DayAndNight", policies=6, episodes=4, bins=8, goals={"drink water": [60, 30]}, seed=2
    )
    assert set(report.returns) == {"dense", "sparse", "very_sparse"}
    assert report.returns["very_sparse"] == 0.0  # every agent dies: the same return for all
    assert 0 < report.returns["dense"] <= math.log(6) + 1e-9
    assert set(report.goals) == {("drink water", 60), ("drink water", 30)}
    assert all(0 <= v <= math.log(6) + 1e-9 for v in report.goals.values())
