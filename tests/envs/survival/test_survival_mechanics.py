"""The survival world's rules, one situation at a time."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from survival_scenarios import (
    CENTRE,
    carry,
    carrying,
    do,
    do_simple,
    empty_world,
    legal,
    meter,
    place,
    seen,
    set_meter,
)

from entityrl.envs.survival.config import METERS
from entityrl.envs.survival.rules import MOVE_SPEED, VISION


# ---------------------------------------------------------------------------- meters
@settings(max_examples=15, deadline=None)
@given(life_limit=st.integers(1, 150))
def test_an_idle_agent_lives_exactly_life_limit_steps(life_limit: int) -> None:
    env = empty_world(life_limit=life_limit)
    obs = env.refresh()
    for step in range(1, life_limit + 1):
        obs = do(env, obs, "idle")
        assert bool(obs.done[0]) == (step == life_limit)
    assert obs.metrics["episode_length"].tolist() == [life_limit]
    assert obs.metrics["died"].tolist() == [1.0]


def test_consuming_water_refills_thirst_up_to_the_limit() -> None:
    env = empty_world()
    carry(env, "water", 2)
    set_meter(env, "thirst", 10)
    obs = do(env, env.refresh(), "consume water")
    assert meter(env, "thirst") == 10 + 30 - 1  # the drink, then a step of hunger
    assert carrying(env, "water") == 1
    set_meter(env, "thirst", 90)
    do(env, env.refresh(), "consume water")
    assert meter(env, "thirst") == 100 - 1
    assert not legal(env, env.refresh(), "consume water")
    assert obs.reward.shape == (1,)


def test_water_comes_from_collecting_a_river_and_picking_it_up() -> None:
    env = empty_world()
    place(env, "river", 1, 0)
    obs = env.refresh()
    assert legal(env, obs, "collect") and not legal(env, obs, "pickup")
    obs = do(env, obs, "collect")
    water = seen(obs, "Item")
    assert water.shape[0] == 1 and water[0, :3].tolist() == [0, 0, 1]  # at the agent, one unit
    assert legal(env, obs, "pickup")
    obs = do(env, obs, "pickup")
    assert carrying(env, "water") == 1 and seen(obs, "Item").shape[0] == 0
    assert legal(env, obs, "consume water")


def test_the_agent_dies_when_a_meter_runs_out() -> None:
    env = empty_world()
    set_meter(env, "thirst", 1)
    obs = do(env, env.refresh(), "idle")
    assert obs.done[0] and obs.metrics["died"].tolist() == [1.0]
    assert meter(env, "thirst") == 100  # a new episode began


# ---------------------------------------------------------------------------- vision, night, torch
def test_night_shrinks_vision_and_a_torch_restores_it() -> None:
    env = empty_world()
    place(env, "tree", 4, 0)
    carry(env, "torch", 1)
    env.state.t[:] = env.rules.day_length - 1  # the next step starts the night
    obs = env.refresh()
    assert env.state.stats[0, VISION] == 5 and len(seen(obs, "tree")) == 1
    obs = do(env, obs, "idle")
    assert env.state.stats[0, VISION] == 2 and len(seen(obs, "tree")) == 0
    obs = do(env, obs, "equip torch")
    assert env.state.stats[0, VISION] == 5 and len(seen(obs, "tree")) == 1
    names = env.observer.global_names
    assert obs.global_features[0, names.index("buff_torchlight")] == 1.0


def test_a_torch_burns_down_and_keeps_its_wear_in_the_backpack() -> None:
    env = empty_world()
    carry(env, "torch", 1)
    obs = do(env, env.refresh(), "equip torch")
    for _ in range(10):
        obs = do(env, obs, "idle")
    assert env.state.durability[0, 0] == 60 - 11
    obs = do(env, obs, "unequip hand")
    assert carrying(env, "torch") == 1
    obs = do(env, obs, "equip torch")
    assert env.state.durability[0, 0] == 60 - 12  # the same torch, not a fresh one
    env.state.durability[0, 0] = 1
    do(env, env.refresh(), "idle")
    assert env.state.equipped[0, 0] == -1 and carrying(env, "torch") == 0  # burnt out


# ---------------------------------------------------------------------------- items
def test_a_recipe_consumes_its_inputs_and_yields_its_output() -> None:
    env = empty_world()
    carry(env, "wood", 3)
    obs = env.refresh()
    assert legal(env, obs, "synthesize torch")
    obs = do(env, obs, "synthesize torch")
    assert carrying(env, "wood") == 1 and carrying(env, "torch") == 1
    assert not legal(env, obs, "synthesize torch")


def test_recipes_with_several_inputs() -> None:
    env = empty_world("FourSeason")
    carry(env, "wood", 1)
    carry(env, "stone", 1)
    assert not legal(env, env.refresh(), "synthesize spear")
    carry(env, "stone", 2)
    do(env, env.refresh(), "synthesize spear")
    assert [carrying(env, i) for i in ("wood", "stone", "spear")] == [0, 0, 1]


def test_pickup_stops_at_the_backpack_capacity() -> None:
    env = empty_world()
    carry(env, "wood", 23)
    place(env, "tree", 1, 0)
    obs = do(env, env.refresh(), "collect")
    obs = do(env, obs, "collect")  # a stack of two wood
    assert seen(obs, "Item")[0, 2] == 2
    obs = do(env, obs, "pickup")
    assert carrying(env, "wood") == 24 and seen(obs, "Item")[0, 2] == 1
    assert not legal(env, obs, "pickup")
    assert legal(env, obs, "synthesize torch")  # crafting frees room


def test_discard_removes_one_unit() -> None:
    env = empty_world()
    carry(env, "meat", 2)
    do(env, env.refresh(), "discard meat")
    assert carrying(env, "meat") == 1


# ---------------------------------------------------------------------------- creatures
def test_killing_a_pig_leaves_meat_where_it_fell() -> None:
    env = empty_world(overrides={"creatures": {"pig": {"move_chance": 0.0}}})
    slot = place(env, "pig", 1, 1)
    obs = env.refresh()
    for hp in (2, 1):
        obs = do(env, obs, "attack")
        assert env.state.creature_hp[0, slot] == hp and env.state.alive[0, slot]
    obs = do(env, obs, "attack")
    assert not env.state.alive[0, slot]
    meat = seen(obs, "Item")
    assert meat.shape[0] == 1 and meat[0, :3].tolist() == [1, 1, 1]
    assert meat[0, 3 + env.rules.items.names.index("meat")] == 1
    assert env.state.event_counts[0, env.rules.event_index["kill:pig"]] == 1


def test_only_creatures_in_attack_range_can_be_attacked() -> None:
    env = empty_world(overrides={"creatures": {"pig": {"move_chance": 0.0}}})
    place(env, "pig", 2, 0)
    obs = env.refresh()
    assert len(seen(obs, "pig")) == 1 and not legal(env, obs, "attack")
    assert obs.action_masks["attack"].actors.items == 0


def test_pigs_flee_and_wolves_close_in() -> None:
    env = empty_world(
        "FourSeason",
        overrides={"creatures": {"pig": {"move_chance": 1.0}, "wolf": {"move_chance": 1.0}}},
    )
    pig = place(env, "pig", 2, 0)
    wolf = place(env, "wolf", -3, 0)
    do(env, env.refresh(), "idle")
    s = env.state
    assert s.creature_x[0, pig] - CENTRE == 3
    assert s.creature_x[0, wolf] - CENTRE == -2


def test_a_fast_hunter_stops_next_to_the_agent() -> None:
    fast = {"creatures": {"wolf": {"move_chance": 1.0, "move_speed": 3, "attack": 0}}}
    env = empty_world("FourSeason", overrides=fast)
    wolf = place(env, "wolf", -4, 2)
    do(env, env.refresh(), "idle")
    s = env.state
    assert (s.creature_x[0, wolf] - CENTRE, s.creature_y[0, wolf] - CENTRE) == (-1, 1)


def test_a_wolf_bites_and_a_coat_softens_the_bite() -> None:
    env = empty_world("FourSeason", overrides={"creatures": {"wolf": {"move_chance": 0.0}}})
    place(env, "wolf", 1, 0)
    do(env, env.refresh(), "idle")
    assert meter(env, "hp") == 10 - 2
    carry(env, "coat", 1)
    obs = do(env, env.refresh(), "equip coat")
    assert meter(env, "hp") == 10 - 2 - 1
    assert env.state.durability[0, env.rules.items.slot_names.index("body")] == 30 - 1
    assert obs.global_features[0, env.observer.global_names.index("defense")] == 1


# ---------------------------------------------------------------------------- seasons, weather
def test_rain_slows_the_agent() -> None:
    env = empty_world("FourSeason")
    obs = env.refresh()
    assert env.state.stats[0, MOVE_SPEED] == 2 and legal(env, obs, "move +2,+0")
    env.state.weather[:] = env.rules.weather_names.index("rain")
    obs = env.refresh()
    assert env.state.stats[0, MOVE_SPEED] == 1
    assert not legal(env, obs, "move +2,+0") and legal(env, obs, "move +1,+0")
    do(env, obs, "move +1,-1")
    assert (env.state.x[0], env.state.y[0]) == (CENTRE + 1, CENTRE - 1)


def test_winter_chills_and_a_coat_keeps_warm() -> None:
    env = empty_world("FourSeason", copies=2)
    winter = int(env.rules.season_lengths[:3].sum())
    env.state.t[:] = winter
    coat = env.rules.items.names.index("coat")
    body = env.rules.items.slot_names.index("body")
    env.state.equipped[1, body] = coat
    env.state.durability[1, body] = 30
    set_meter(env, "temperature", 20)
    do(env, env.refresh(), "idle")
    temperature = env.state.meters[:, METERS.index("temperature")]
    assert temperature.tolist() == [19, 20]


def test_spring_brings_more_pigs() -> None:
    births = []
    for start in (0, 120):  # spring (from 0) doubles the respawn rate; autumn (from 120) does not
        env = empty_world(
            "FourSeason", copies=200, overrides={"creatures": {"pig": {"respawn": 0.1}}}
        )
        env.state.t[:] = start
        obs = env.refresh()
        for _ in range(5):
            obs = do(env, obs, "idle")
        births.append(int(env.state.alive.sum()))
    assert births[0] > 1.5 * births[1]


# ---------------------------------------------------------------------------- masks
def test_moves_off_the_map_are_masked() -> None:
    env = empty_world()
    env.state.x[:] = 0
    env.state.y[:] = 0
    obs = env.refresh()
    assert legal(env, obs, "move +1,+1")
    assert not legal(env, obs, "move -1,+0") and not legal(env, obs, "move +0,-1")


# ---------------------------------------------------------------------------- rewards
def test_sparse_reward_is_paid_for_meat_and_water_only() -> None:
    env = empty_world(reward="sparse", life_limit=4)
    carry(env, "water", 1)
    carry(env, "wood", 2)
    obs = do(env, env.refresh(), "synthesize torch")
    assert obs.reward[0] == 0
    obs = do(env, obs, "consume water")
    assert obs.reward[0] == 1.0
    obs = do(env, obs, "idle")
    assert obs.reward[0] == 0 and not obs.done[0]
    obs = do(env, obs, "idle")
    assert obs.done[0] and obs.reward[0] == 0


def test_very_sparse_reward_is_a_penalty_at_death_only() -> None:
    env = empty_world(reward="very_sparse", life_limit=4)
    carry(env, "water", 1)
    obs = env.refresh()
    rewards = []
    for label in ("consume water", "idle", "idle", "idle"):
        obs = do(env, obs, label)
        rewards.append(float(obs.reward[0]))
    assert rewards == [0, 0, 0, -1]


def test_very_sparse_reward_does_not_punish_reaching_the_horizon() -> None:
    env = empty_world(reward="very_sparse", life_limit=10, horizon=3)
    obs = env.refresh()
    for _ in range(3):
        obs = do(env, obs, "idle")
    assert obs.done[0] and obs.reward[0] == 0 and obs.metrics["died"].tolist() == [0.0]


def test_dense_reward_adds_life_refills_events_and_death() -> None:
    env = empty_world(reward="dense", life_limit=100)
    dense = env.rules.config.rewards.dense
    carry(env, "water", 1)
    set_meter(env, "thirst", 50)
    obs = do(env, env.refresh(), "idle")
    assert obs.reward[0] == pytest.approx(dense.alive)
    obs = do(env, obs, "consume water")
    assert obs.reward[0] == pytest.approx(dense.alive + dense.meter_gain * 30 / 100)
    place(env, "tree", 0, 1)
    obs = do(env, env.refresh(), "collect")
    assert obs.reward[0] == pytest.approx(dense.alive + dense.collect)
    set_meter(env, "satiety", 1)
    obs = do(env, env.refresh(), "idle")
    assert obs.done[0] and obs.reward[0] == pytest.approx(dense.death)


# ---------------------------------------------------------------------------- simple actions
def test_simple_actions_aim_automatically() -> None:
    env = empty_world(actions="simple", overrides={"creatures": {"pig": {"move_chance": 0.0}}})
    near = place(env, "pig", 1, 0)
    far = place(env, "pig", -1, -1)
    env.state.creature_hp[0, far] = 1
    env.refresh()
    do_simple(env, "attack")  # the nearest first: (1, 0) is as near as (-1, -1); lower slot
    assert env.state.creature_hp[0, near] == 2 and env.state.creature_hp[0, far] == 1
    carry(env, "water", 1)
    carry(env, "meat", 1)
    set_meter(env, "satiety", 20)
    env.refresh()
    do_simple(env, "consume")  # satiety is the emptier meter: meat
    assert carrying(env, "meat") == 0 and carrying(env, "water") == 1


def test_simple_move_heads_for_the_nearest_pig() -> None:
    env = empty_world(actions="simple", overrides={"creatures": {"pig": {"move_chance": 0.0}}})
    place(env, "pig", 3, -2)
    env.refresh()
    do_simple(env, "move")
    assert (env.state.x[0] - CENTRE, env.state.y[0] - CENTRE) == (1, -1)


def test_simple_masks_follow_what_is_possible() -> None:
    env = empty_world(actions="simple")
    obs = env.refresh()
    mask = obs.action_masks["act"].mask
    assert mask is not None
    allowed = dict(zip(env.action_space["act"].choices, mask[0][0].tolist(), strict=True))  # type: ignore[union-attr]
    assert allowed == {
        "idle": True,
        "move": True,
        "attack": False,
        "collect": False,
        "pickup": False,
        "consume": False,
        "synthesize": False,
        "equip": False,
        "discard": False,
    }
    assert obs.action_masks["act"].actors.data[0, 0] == obs.entity_counts()[0]


# ---------------------------------------------------------------------------- observations
def test_fixed_vector_observation_lists_the_nearest_of_each_type() -> None:
    env = empty_world(actions="simple", observation="nearest1")
    place(env, "pig", 3, 1)
    place(env, "pig", -1, 1)
    obs = env.refresh()
    names = env.observer.global_names
    row = dict(zip(names, obs.global_features[0].tolist(), strict=True))
    assert [row[f"pig0_{f}"] for f in ("dx", "dy", "hp")] == [-1, 1, 3]
    assert [row[f"river0_{f}"] for f in ("dx", "dy", "hp")] == [0, 0, 0]
    assert list(obs.features) == ["Agent"]


def test_nearest10_observation_has_ten_slots_whatever_is_seen() -> None:
    env = empty_world(actions="simple", observation="nearest10")
    for d in range(3):
        place(env, "tree", d, 2)
    obs = env.refresh()
    names = env.observer.global_names
    hp = [obs.global_features[0, names.index(f"tree{j}_hp")] for j in range(10)]
    assert hp == [1, 1, 1] + [0] * 7
    assert [obs.global_features[0, names.index(f"tree{j}_dx")] for j in range(3)] == [0, 1, 2]


def test_entity_observation_has_terrain_around_the_agent() -> None:
    env = empty_world()
    obs = env.refresh()
    terrain = seen(obs, "Terrain")
    assert terrain.shape == (9, 2 + len(env.rules.terrain_names))
    assert np.array_equal(terrain[:, 2:].sum(axis=1), np.ones(9))
    env.state.x[:] = 0
    assert seen(env.refresh(), "Terrain").shape[0] == 6
