"""PickMatchingBalls: masks, the end-of-episode reward, and the optimal strategy."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from entityrl.env import Environment, Observation, SelectEntityAction
from entityrl.envs import PickMatchingBalls


def pick(index: int) -> dict[str, SelectEntityAction]:
    return {"Pick Ball": SelectEntityAction([("Player", 0)], [("Ball", index)])}


def most_common_color_first(env: Environment, obs: Observation) -> dict[str, SelectEntityAction]:
    balls = np.asarray(obs.features["Ball"])
    colors, picked = balls[:, 0].astype(int), balls[:, -1].astype(bool)
    target = np.bincount(colors).argmax()
    candidates = np.flatnonzero(~picked & (colors == target))
    if not candidates.size:
        candidates = np.flatnonzero(~picked)
    return pick(int(candidates[0]))


def test_picking_the_most_common_color_returns_one(play: Callable[..., float]) -> None:
    for kwargs in ({}, {"randomize": True, "max_balls": 8}):
        returns = [play(PickMatchingBalls(**kwargs), most_common_color_first, s) for s in range(10)]
        assert returns == [1.0] * 10


def test_only_unpicked_balls_may_be_picked() -> None:
    env = PickMatchingBalls()
    env.set_state(colors=[0, 0, 1, 2, 0], picked=[False] * 5)
    obs = env.act(pick(1))
    assert obs.actions["Pick Ball"].actee_ids == [("Ball", i) for i in (0, 2, 3, 4)]  # type: ignore[union-attr]
    assert np.asarray(obs.features["Ball"])[:, -1].tolist() == [0, 1, 0, 0, 0]


def test_a_mismatch_ends_the_episode_with_the_share_of_the_most_common_color() -> None:
    env = PickMatchingBalls()
    env.set_state(colors=[0, 0, 1, 2, 0], picked=[False] * 5)
    assert not env.act(pick(0)).done
    obs = env.act(pick(3))
    assert obs.done and obs.reward == 1 / 3  # one matching pick of three balls of color 0


def test_picking_the_last_ball_with_a_new_color_is_still_a_mismatch() -> None:
    env = PickMatchingBalls()
    env.set_state(colors=[1, 0, 0], picked=[False] * 3)
    env.act(pick(0))
    obs = env.act(pick(1))
    assert obs.done and obs.reward == 1 / 2
    env.set_state(colors=[4, 4], picked=[False, True])
    obs = env.act(pick(0))
    assert obs.done and obs.reward == 1.0


def test_color_features_are_one_hot_or_repeated() -> None:
    balls = PickMatchingBalls(one_hot=True).set_state([2], [False]).features["Ball"]
    assert np.asarray(balls).tolist() == [[0, 0, 1, 0, 0, 0, 0]]
    balls = PickMatchingBalls().set_state([2], [True]).features["Ball"]
    assert np.asarray(balls).tolist() == [[2, 2, 2, 2, 2, 2, 1]]
