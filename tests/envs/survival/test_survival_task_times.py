"""The paper's task-time estimators (Eqs. 8-10) against hand-computed examples."""

from __future__ import annotations

import math

import numpy as np
import pytest

from entityrl.envs.survival import Rules, load_config
from entityrl.envs.survival.task_times import (
    estimate_task_times,
    estimated_ttmx,
    first_completion,
    task_chain,
)


def test_first_completion_of_two_actions_at_one_half() -> None:
    # Two necessary actions, each taken with p* = 1/2: first done at t with probability
    # (t - 1) / 2^t (t >= 2): 1/4, 2/8, 3/16, 4/32, 5/64, 6/128.
    p = first_completion([0.5, 0.5], 7)
    np.testing.assert_allclose(p, [0, 0, 1 / 4, 2 / 8, 3 / 16, 4 / 32, 5 / 64, 6 / 128])
    # Done by t: 0.25, 0.5, 0.6875, 0.8125, 0.890625, 0.9375 -> th 0.9 first met at t = 7.
    assert estimated_ttmx([0.5, 0.5], 0.9, 100) == 7
    assert estimated_ttmx([0.5, 0.5], 0.8, 100) == 5


def test_first_completion_with_stages_of_different_probabilities() -> None:
    # The first action always taken, the second at 1/2: done by t = 2, 3, 4, 5: 1/2, 3/4,
    # 7/8, 15/16.
    np.testing.assert_allclose(
        np.cumsum(first_completion([1.0, 0.5], 5))[2:], [0.5, 0.75, 0.875, 0.9375]
    )
    assert estimated_ttmx([1.0, 0.5], 0.9, 100) == 5
    assert math.isinf(estimated_ttmx([0.01], 0.9, 10))


def test_bad_estimator_inputs_are_named() -> None:
    with pytest.raises(ValueError, match=r"p_star must be probabilities in \(0, 1\], got \[0.0\]"):
        first_completion([0.0], 5)
    with pytest.raises(ValueError, match=r"threshold must be in \(0, 1\], got 0"):
        estimated_ttmx([0.5], 0, 5)


def test_task_chains_of_day_and_night() -> None:
    rules = Rules(load_config("DayAndNight"))
    drink = task_chain(rules, "consume:water")
    assert drink.actions == {"consume": 1, "collect": 1, "pickup": 1} and drink.sources == ["river"]
    assert (drink.g, drink.repeats) == (3, 0)
    pig = task_chain(rules, "kill:pig")  # 3 hp, attack 1: three attacks, one action type
    assert (pig.g, pig.repeats) == (1, 2)
    torch = task_chain(rules, "equip:torch")  # equip, craft, 2 x collect wood, 1 pickup
    assert torch.actions == {"equip": 1, "synthesize": 1, "collect": 2, "pickup": 1}


def test_a_creature_dropping_two_units_is_hunted_once_for_two() -> None:
    rules = Rules(load_config("FourSeason"))
    coat = task_chain(rules, "synthesize:coat")  # 2 leather; a wolf (6 hp) drops 2
    assert coat.actions == {"synthesize": 1, "attack": 6, "pickup": 1}


def test_estimates_follow_eq8_and_eq10() -> None:
    [wood] = estimate_task_times("DayAndNight", ["collect wood"], maps=32)
    assert wood.g == 1 and wood.e >= 0 and wood.ttmn == wood.g + wood.e
    stages = math.ceil(wood.ttmn)
    assert wood.ttmx == estimated_ttmx([1 / 9] * stages, 0.9, 10_000)
    with pytest.raises(KeyError, match="unknown task 'fly'"):
        estimate_task_times("DayAndNight", ["fly"], maps=2)
