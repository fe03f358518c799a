"""MoveToOrigin: the reward rule and a thruster controller that reaches the origin."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from entityrl.env import CategoricalAction, Environment, Observation
from entityrl.envs import MoveToOrigin
from entityrl.envs.move_to_origin import THRUST


def best_thrust(position: float, velocity: float, remaining: int) -> int:
    """The thrust that brings the ship closest to 0 at the end if it coasts from then on."""
    return min(range(len(THRUST)), key=lambda i: abs(position + (velocity + THRUST[i]) * remaining))


def steer_home(env: Environment, obs: Observation) -> dict[str, CategoricalAction]:
    x, y, vx, vy, step = np.asarray(obs.features["Spaceship"], dtype=np.float64)[0]
    remaining = env.max_steps - int(step)  # type: ignore[attr-defined]
    ship = [("Spaceship", 0)]
    return {
        "horizontal_thruster": CategoricalAction(ship, np.array([best_thrust(x, vx, remaining)])),
        "vertical_thruster": CategoricalAction(ship, np.array([best_thrust(y, vy, remaining)])),
    }


def test_a_thruster_controller_brings_the_ship_home(play: Callable[..., float]) -> None:
    returns = [play(MoveToOrigin(), steer_home, seed) for seed in range(10)]
    assert min(returns) > 0.99


def test_the_reward_is_the_distance_gained() -> None:
    env = MoveToOrigin(max_steps=2)
    env.reset()
    env.position, env.velocity = np.array([0.6, 0.8]), np.array([-0.01, 0.0])
    ship = [("Spaceship", 0)]
    obs = env.act(
        {
            "horizontal_thruster": CategoricalAction(ship, np.array([4])),  # 100% left
            "vertical_thruster": CategoricalAction(ship, np.array([1])),  # 10% up
        }
    )
    np.testing.assert_allclose(env.velocity, [-0.02, 0.001])
    np.testing.assert_allclose(obs.reward, 1.0 - np.hypot(0.58, 0.801))
    np.testing.assert_allclose(
        obs.features["Spaceship"], [[0.58, 0.801, -0.02, 0.001, 1]], rtol=1e-6
    )
    assert not obs.done
    hold = CategoricalAction(ship, np.array([2]))
    assert env.act({"horizontal_thruster": hold, "vertical_thruster": hold}).done
