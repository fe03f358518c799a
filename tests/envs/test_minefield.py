"""Minefield: reaching the target, hitting a mine, turning, and a driver that avoids mines."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from entityrl.env import CategoricalAction, Environment, Observation
from entityrl.envs import Minefield
from entityrl.envs.minefield import REACH, SPEED, TURN

LEFT, FORWARD, RIGHT = 0, 1, 2


def move(choice: int) -> dict[str, CategoricalAction]:
    return {"move": CategoricalAction([("Vehicle", 0)], np.array([choice]))}


def drive(env: Environment, obs: Observation) -> dict[str, CategoricalAction]:
    """Head for the reachable heading whose next step is safe and closest to the target."""
    assert isinstance(env, Minefield)
    turns = np.arange(16)  # headings reachable by k left turns
    headings = env.direction + turns * TURN
    steps = env.vehicle + SPEED * np.column_stack([np.cos(headings), np.sin(headings)])
    gaps = np.linalg.norm(steps[:, None, :] - env.mines[None, :, :], axis=2)
    safe = (gaps > REACH + 0.5).all(axis=1) if env.mines.size else np.ones(16, dtype=bool)
    distance = np.where(safe, np.linalg.norm(steps - env.target, axis=1), np.inf)
    best = int(np.argmin(distance))
    if best == 0:
        return move(FORWARD)
    return move(LEFT if best <= 8 else RIGHT)


def test_a_careful_driver_reaches_the_target(play: Callable[..., float]) -> None:
    returns = [play(Minefield(), drive, seed) for seed in range(20)]
    assert returns == [1.0] * 20


def test_reaching_the_target_pays_one_and_ends_the_episode() -> None:
    env = Minefield()
    env.set_state(vehicle=(0, 0), direction=0.0, target=(7, 0), mines=[(0, 20)])
    obs = env.act(move(FORWARD))
    np.testing.assert_allclose(env.vehicle, [3, 0])
    assert obs.done and obs.reward == 1.0


def test_driving_onto_a_mine_ends_the_episode_without_reward() -> None:
    env = Minefield()
    env.set_state(vehicle=(0, 0), direction=np.pi / 2, target=(50, 50), mines=[(0, 7)])
    obs = env.act(move(FORWARD))
    assert obs.done and obs.reward == 0.0


def test_left_turns_counterclockwise_and_time_runs_out() -> None:
    env = Minefield(max_steps=2)
    env.set_state(vehicle=(0, 0), direction=0.0, target=(50, 50), mines=[])
    obs = env.act(move(LEFT))
    assert env.direction == TURN and not obs.done
    obs = env.act(move(RIGHT))
    assert env.direction == 0.0 and obs.done and obs.reward == 0.0


def test_start_keeps_its_distances_and_translate_centres_on_the_vehicle() -> None:
    env = Minefield(translate=True)
    env.seed(0)
    for _ in range(20):
        obs = env.reset()
        assert np.hypot(*(env.target - env.vehicle)) >= 15
        points = np.vstack([env.vehicle, env.target, env.mines])
        gaps = np.linalg.norm(points[:, None] - points[None], axis=2) + np.eye(len(points)) * 99
        assert gaps.min() >= 15
        np.testing.assert_allclose(obs.features["Target"][0], env.target - env.vehicle, rtol=1e-5)
