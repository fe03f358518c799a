"""The paper's observation and action formats: the raw vector of Figure 6, the fixed-size states
of Figure 7, the count parameter of Figure 9 and the action expansions of Figure 10."""

from __future__ import annotations

import numpy as np
import pytest
from survival_scenarios import CENTRE, carry, carrying, do, do_simple, empty_world, meter, place

from entityrl.envs.survival import SurvivalWorld
from entityrl.envs.survival.actions import EXPANSIONS
from entityrl.envs.survival.config import STATS


def row_of(env: SurvivalWorld) -> dict[str, float]:
    obs = env.refresh()
    return dict(zip(env.observer.global_names, obs.global_features[0].tolist(), strict=True))


# ---------------------------------------------------------------------------- Figure 7 sizes
# DayAndNight: agent state = 3 meters + 6 stats + action result; backpack = 4 items; arm = 1
# (the torch); objects = (dx, dy, hp) per creature listed (3 types); materials = (dx, dy,
# count) per stack listed (4 items).
@pytest.mark.parametrize(
    ("mode", "size"),
    [
        ("nearest1", 10 + 4 + 1 + 3 * 3 + 4 * 3),  # 36
        ("nearest10_prey", 10 + 4 + 1 + (10 + 2) * 3 + 4 * 3),  # 63
        ("nearest10", 10 + 4 + 1 + 3 * 10 * 3 + 4 * 10 * 3),  # 225
    ],
)
def test_fixed_size_states_of_day_and_night_have_the_documented_sizes(mode: str, size: int) -> None:
    env = SurvivalWorld(2, seed=0, observation=mode, actions="simple")
    obs = env.reset()
    assert obs.global_features.shape == (2, size)
    assert list(obs.features) == ["Agent"]


def test_ten_prey_add_the_papers_27_numbers_to_the_nearest_state() -> None:
    # The paper: 78 -> 105 dimensions; nine more pigs of three numbers each.
    sizes = {
        mode: len(SurvivalWorld(1, observation=mode, actions="simple").obs_space.global_features)
        for mode in ("nearest1", "nearest10_prey")
    }
    assert sizes["nearest10_prey"] - sizes["nearest1"] == 27


def test_fixed_state_holds_agent_backpack_arm_objects_and_materials() -> None:
    env = empty_world(actions="simple", observation="nearest1")
    place(env, "pig", 2, -1)
    place(env, "pig", 1, 1)  # the nearest pig
    carry(env, "wood", 3)
    env.state.equipped[:, 0] = env.rules.items.names.index("torch")
    env.state.durability[:, 0] = 10
    env.simulation._drop(
        np.array([0]), np.array([CENTRE - 2]), np.array([CENTRE]), np.array([[2, 0, 0, 0]])
    )
    row = row_of(env)
    assert row["satiety"] == 1.0 and row["action_ok"] == 1.0
    assert [row[s] for s in STATS] == env.state.stats[0].tolist()
    assert row["carrying_wood"] == 3 and row["carrying_meat"] == 0
    assert row["wearing_torch"] == 1
    assert [row[f"pig0_{f}"] for f in ("dx", "dy", "hp")] == [1, 1, 3]
    assert [row[f"water0_ground_{f}"] for f in ("dx", "dy", "count")] == [-2, 0, 2]
    assert [row[f"meat0_ground_{f}"] for f in ("dx", "dy", "count")] == [0, 0, 0]


# ---------------------------------------------------------------------------- Figure 6
def test_raw_vector_size_is_the_sum_of_its_seven_blocks() -> None:
    env = SurvivalWorld(1, seed=0, observation="raw", actions="simple")
    r = env.rules
    window = (2 * int(r.stat_max[0]) + 1) ** 2  # widest vision: 5 + 3 (torchlight) -> 17 x 17
    expected = (
        (3 + 6 + 1)  # block 1: meters, stats, action result
        + 24 * 2  # block 2: 24 backpack slots of (id, durability)
        + 1 * 2  # block 3: the hand slot's (id, durability)
        + 3  # block 4: hunger, night, torchlight
        + 76 * 7  # block 5: every creature slot (12 pigs, 40 trees, 24 rivers) x 7
        + 24 * 3  # block 6: map.drop_slots units of (type, x, y)
        + window * 4  # block 7: (x, y, terrain, weather) per cell
    )
    assert window == 289
    assert env.reset().global_features.shape == (1, expected) == (1, 1823)


def test_raw_vector_lists_backpack_units_equipment_creatures_and_units_on_the_ground() -> None:
    env = empty_world(actions="simple", observation="raw")
    items = env.rules.items.names
    carry(env, "water", 2)
    carry(env, "torch", 2)
    env.state.worn[:, items.index("torch")] = 7  # one partly used torch
    place(env, "tree", 3, 0)
    place(env, "pig", 1, 0)
    env.simulation._drop(
        np.array([0]), np.array([CENTRE]), np.array([CENTRE + 2]), np.array([[0, 2, 0, 0]])
    )
    row = row_of(env)
    backpack = [(row[f"backpack{j}_id"], row[f"backpack{j}_durability"]) for j in range(5)]
    water, torch = items.index("water") + 1, items.index("torch") + 1
    assert backpack == [(water, 0), (water, 0), (torch, 7), (torch, 60), (0, 0)]
    assert (row["hand_id"], row["hand_durability"]) == (0, 0)
    objects = [[row[f"object{j}_{f}"] for f in ("type", "x", "y", "hp")] for j in range(3)]
    assert objects == [[1, CENTRE + 1, CENTRE, 3], [2, CENTRE + 3, CENTRE, 1], [0, 0, 0, 0]]
    meat = items.index("meat") + 1
    units = [[row[f"material{j}_{f}"] for f in ("type", "x", "y")] for j in range(3)]
    assert units == [[meat, CENTRE, CENTRE + 2]] * 2 + [[0, 0, 0]]
    shown = [row[f"cell{c}_terrain"] > 0 for c in range(289)]
    assert sum(shown) == 11 * 11  # vision 5 by day: the 17 x 17 window's inner 11 x 11
    assert row["buff_hunger"] == 1 and row["action_ok"] == 1


# ---------------------------------------------------------------------------- Figure 9
def test_count_consumes_that_many_units_and_flags_a_shortfall() -> None:
    env = empty_world(max_count=3)
    carry(env, "water", 2)
    env.state.meters[:, 1] = 10
    obs = do(env, env.refresh(), "consume water", count=2)
    assert carrying(env, "water") == 0
    assert meter(env, "thirst") == 10 + 60 - 1
    carry(env, "water", 2)
    obs = do(env, env.refresh(), "consume water", count=3)
    assert carrying(env, "water") == 0
    assert not env.state.action_ok[0]
    assert obs.action_masks["count"].mask is None
    assert list(env.action_space["count"].choices) == ["1", "2", "3"]  # type: ignore[union-attr]


def test_count_crafts_as_many_times_as_the_inputs_allow() -> None:
    env = empty_world(max_count=3)
    carry(env, "wood", 5)
    do(env, env.refresh(), "synthesize torch", count=3)
    assert (carrying(env, "torch"), carrying(env, "wood")) == (2, 1)
    assert not env.state.action_ok[0]


def test_count_discards_and_picks_up_that_many() -> None:
    env = empty_world(max_count=4)
    carry(env, "wood", 4)
    obs = do(env, env.refresh(), "discard wood", count=3)
    assert carrying(env, "wood") == 1 and env.state.action_ok[0]
    env.simulation._drop(
        np.array([0]), np.array([CENTRE]), np.array([CENTRE]), np.array([[3, 0, 0, 0]])
    )
    obs = do(env, env.refresh(), "pickup", count=2)
    assert carrying(env, "water") == 2
    assert env.state.drop_count[0][env.state.dropped[0]].tolist() == [1]
    del obs


def test_without_a_count_a_pickup_takes_the_whole_stack() -> None:
    env = empty_world()
    assert "count" not in env.action_space
    env.simulation._drop(
        np.array([0]), np.array([CENTRE]), np.array([CENTRE]), np.array([[3, 0, 0, 0]])
    )
    do(env, env.refresh(), "pickup")
    assert carrying(env, "water") == 3 and env.state.action_ok[0]


# ---------------------------------------------------------------------------- Figure 10
@pytest.mark.parametrize(
    ("expand", "size"),
    [
        ((), 9),
        (("3pig",), 11),
        (("5pig",), 13),
        (("expand_consume",), 10),  # water, meat
        (("expand_pickup",), 12),  # water, meat, wood, torch
        (("expand_collect",), 10),  # tree, river
        (("expand_all",), 16),
    ],
)
def test_action_expansions_have_the_documented_number_of_choices(
    expand: tuple[str, ...], size: int
) -> None:
    env = SurvivalWorld(1, actions="simple", expand=expand)
    assert len(env.action_space["act"].choices) == size  # type: ignore[union-attr]


def test_expanded_attack_approaches_or_hits_the_chosen_creature() -> None:
    env = empty_world(actions="simple", expand=["3pig"])
    near = place(env, "pig", 1, 0)
    far = place(env, "pig", -3, 0)
    env.refresh()
    do_simple(env, "attack 1")
    assert env.state.creature_hp[0, near] == 2
    do_simple(env, "attack 2")  # out of range: one step toward it
    assert env.state.x[0] == CENTRE - 1
    assert env.state.creature_hp[0, far] == 3


def test_expanded_collect_and_consume_act_on_the_named_type() -> None:
    env = empty_world(actions="simple", expand=["expand_collect", "expand_consume"])
    place(env, "tree", 1, 0)
    place(env, "river", 0, 1)
    carry(env, "meat", 1)
    carry(env, "water", 1)
    obs = env.refresh()
    labels = list(env.action_space["act"].choices)  # type: ignore[union-attr]
    mask = obs.action_masks["act"].mask[0][0]  # type: ignore[index]
    assert mask[labels.index("collect river")] and mask[labels.index("consume meat")]
    do_simple(env, "collect river")
    counts = dict(zip(env.rules.event_names, env.state.event_counts[0].tolist(), strict=True))
    assert counts["collect:river"] == 1 and counts["collect:tree"] == 0
    do_simple(env, "consume meat")
    assert (carrying(env, "meat"), carrying(env, "water")) == (0, 1)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"actions": "simple", "expand": ["7pig"]}, "unknown action expansion '7pig'"),
        ({"actions": "simple", "expand": ["3pig", "5pig"]}, "3pig and 5pig exclude each other"),
        ({"actions": "full", "expand": ["3pig"]}, "applies to actions='simple'"),
        ({"actions": "simple", "max_count": 2}, "max_count applies to actions='full'"),
        ({"actions": "full", "max_count": 0}, "max_count must be >= 1, got 0"),
        ({"observation": "raw"}, "use actions='simple'"),
    ],
)
def test_bad_format_options_are_named(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SurvivalWorld(1, **kwargs)


def test_every_expansion_plays_with_random_actions() -> None:
    from entityrl.env import RandomPolicy

    for option in EXPANSIONS:
        env = SurvivalWorld(4, seed=1, actions="simple", expand=[option], validate=True)
        obs = env.reset()
        policy = RandomPolicy(env.action_space, seed=0)
        for _ in range(60):
            obs = env.act(policy.act(obs))
