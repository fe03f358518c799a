"""GoalGrid: rewards, ends, the time limit, which combinations appear in which mode, errors."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from entityrl.env import CategoricalAction, Environment, Observation
from entityrl.env.stacking import stacked_space, unstacked_space
from entityrl.envs import GoalGrid
from entityrl.envs.goal_grid import (
    ALL_COMBINATIONS,
    DEFAULT_HELD_OUT,
    MOVES,
    NAMED_COMBINATIONS,
    STEP_COST,
    first_moves,
)

HELD_OUT = {NAMED_COMBINATIONS[name] for name in DEFAULT_HELD_OUT}


def go(label: str) -> dict[str, CategoricalAction]:
    return {"move": CategoricalAction(["agent"], np.array([list(MOVES).index(label)]), list(MOVES))}


def to_goal(env: Environment, obs: Observation) -> dict[str, CategoricalAction]:
    """The first move of a shortest walk to the goal object around the others."""
    assert isinstance(env, GoalGrid)
    target = env.cells[env.kinds.index(env.goal)]
    return go(first_moves(env.agent, env.size, env.cells)[target])


def test_walking_to_the_goal_succeeds_every_time(play: Callable[..., float]) -> None:
    env = GoalGrid()
    returns = [play(env, to_goal, seed) for seed in range(50)]
    # Each return is 1 less 0.01 per step: at most 8 steps on a 5x5 grid, plus detours.
    assert all(0.85 <= r <= 1.0 - STEP_COST for r in returns), returns
    assert 0.94 < np.mean(returns) < 0.98  # the docstring's "about 0.96"


def test_rewards_ends_and_the_success_metric() -> None:
    env = GoalGrid(objects=2)
    env.reset()
    env.agent, env.cells = (0, 0), [(0, 1), (1, 0)]
    env.kinds = [env.goal, next(c for c in ALL_COMBINATIONS if c != env.goal)]
    obs = env.act(go("left"))  # off the grid: stays, pays the step
    assert env.agent == (0, 0) and obs.reward == -STEP_COST and not obs.done
    assert obs.metrics == {}
    obs = env.act(go("up"))
    assert obs.done and not obs.truncated and obs.reward == pytest.approx(1.0 - STEP_COST)
    assert obs.metrics == {"success": 1.0}
    env.reset()
    env.agent, env.cells = (0, 0), [(0, 1), (1, 0)]
    env.kinds = [env.goal, next(c for c in ALL_COMBINATIONS if c != env.goal)]
    obs = env.act(go("right"))  # the other object
    assert obs.done and not obs.truncated and obs.reward == pytest.approx(-1.0 - STEP_COST)
    assert obs.metrics == {"success": 0.0}


def test_the_time_limit_truncates() -> None:
    env = GoalGrid(size=6, objects=1, max_steps=3)
    env.reset()
    env.agent, env.cells = (0, 0), [(5, 5)]
    observations = [env.act(go(label)) for label in ("up", "down", "up")]
    assert [o.done for o in observations] == [False, False, True]
    assert observations[-1].truncated and observations[-1].metrics == {"success": 0.0}


def test_the_observation_shows_the_goal_and_relative_positions() -> None:
    env = GoalGrid()
    env.seed(3)
    obs = env.reset()
    shape, colour = env.goal
    assert env.obs_space().goal_features == env.obs_space().global_features
    assert np.flatnonzero(obs.global_features).tolist() == [shape, 3 + colour]
    objects = np.asarray(obs.features["Object"])
    for (x, y), (s, c), features in zip(env.cells, env.kinds, objects, strict=True):
        assert features[:2].tolist() == [x - env.agent[0], y - env.agent[1]]
        assert np.flatnonzero(features[2:]).tolist() == [s, 3 + c]


@pytest.mark.parametrize("goals", ["train", "held_out", "all"])
def test_which_combinations_appear(goals: str) -> None:
    env = GoalGrid(objects=4, goals=goals)
    env.seed(0)
    seen_goals = set()
    for _ in range(200):
        env.reset()
        seen_goals.add(env.goal)
        distractors = [k for k in env.kinds if k != env.goal]
        assert len(set(env.kinds)) == 4 and len(distractors) == 3
        assert len(set(env.cells) | {env.agent}) == 5
        # Only both attributes together name the goal.
        assert any(k[0] == env.goal[0] for k in distractors)
        assert any(k[1] == env.goal[1] for k in distractors)
        if goals != "all":
            assert not HELD_OUT & set(distractors)
    if goals == "train":
        assert seen_goals == set(ALL_COMBINATIONS) - HELD_OUT
    elif goals == "held_out":
        assert seen_goals == HELD_OUT
    else:
        assert seen_goals == set(ALL_COMBINATIONS)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"size": 1}, "size must be >= 2, got 1"),
        ({"max_steps": 0}, "max_steps must be >= 1, got 0"),
        ({"goals": "test"}, "goals must be one of"),
        ({"held_out": ["red_star"]}, r"held_out names unknown combinations \['red_star'\]"),
        ({"held_out": "red_square"}, r"must be a list of combination names, got the string"),
        ({"held_out": [], "goals": "held_out"}, "leaves no goal combination"),
        ({"objects": 7}, r"objects must be between 1 and 6 .* got 7"),
        ({"objects": 0}, r"objects must be between 1 and 6 .* got 0"),
        ({"size": 2, "objects": 4}, r"objects must be between 1 and 3 .* got 4"),
    ],
)
def test_bad_arguments_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        GoalGrid(**kwargs)


def test_stacking_keeps_the_current_goal() -> None:
    space = GoalGrid().obs_space()
    stacked = stacked_space(space, 3)
    assert stacked.goal_features == space.goal_features
    assert unstacked_space(stacked, 3) == space
