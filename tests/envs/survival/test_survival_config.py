"""World configs: presets load, overrides apply, and malformed configs are refused with an
error naming the field, what was expected and what came."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from entityrl.envs import make_vec
from entityrl.envs.survival import (
    SurvivalConfigError,
    SurvivalWorld,
    load_config,
    preset_names,
)
from entityrl.envs.survival.config import PRESET_DIR


def preset(name: str = "DayAndNight") -> dict[str, Any]:
    return yaml.safe_load((PRESET_DIR / f"{name}.yaml").read_text())


def test_presets_are_shipped_and_valid() -> None:
    assert preset_names() == ["DayAndNight", "FourSeason"]
    day = load_config("DayAndNight")
    assert set(day.creatures) == {"pig", "tree", "river"}
    assert set(day.items) == {"water", "meat", "wood", "torch"}
    four = load_config("FourSeason")
    assert {"wolf", "mine"} <= set(four.creatures)
    assert {"stone", "leather", "coat", "spear"} <= set(four.items)
    assert [s.name for s in four.seasons] == ["spring", "summer", "autumn", "winter"]
    assert four.agent.temperature > 0 and four.weather.kinds


def test_a_yaml_file_defines_a_world(tmp_path: Path) -> None:
    config = preset()
    config["name"] = "Tiny"
    config["map"].update(width=8, height=8)
    config["creatures"]["pig"]["max_count"] = 2
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(config))
    env = SurvivalWorld(2, seed=0, config=str(path))
    env.reset()
    assert env.rules.config.name == "Tiny" and env.state.terrain.shape == (2, 8, 8)


def test_a_new_creature_item_recipe_and_buff_are_config_changes() -> None:
    config = preset()
    config["creatures"]["rabbit"] = {
        "glyph": "r",
        "hp": 1,
        "vision": 2,
        "move_speed": 1,
        "move_chance": 0.7,
    }
    config["terrain"]["grassland"]["spawns"]["rabbit"] = 0.05
    config["items"]["stew"] = {
        "kind": "consumable",
        "glyph": "s",
        "effects": {"satiety": 60, "thirst": 10},
    }
    config["recipes"].append({"output": "stew", "inputs": {"meat": 1, "water": 1}})
    config["drop_table"]["rabbit"] = {"kill": {"meat": 1}}
    config["buffs"]["forest_shade"] = {"terrain": ["forest"], "effects": {"thirst": 0.5}}
    config["tasks"]["cook stew"] = "synthesize:stew"
    env = SurvivalWorld(2, seed=0, config=config)
    obs = env.reset()
    assert "rabbit" in obs.features
    assert "synthesize stew" in env.action_space["act"].choices  # type: ignore[union-attr]
    assert "buff_forest_shade" in env.observer.global_names


def test_life_limit_and_overrides_replace_config_values() -> None:
    env = make_vec("DayAndNight", 2, seed=0, life_limit=50, overrides={"agent": {"vision": 3}})
    assert isinstance(env, SurvivalWorld)
    assert env.rules.config.agent.life_limit == 50 and env.rules.meter_max[0] == 50
    assert env.rules.config.agent.vision == 3


@pytest.mark.parametrize(
    ("edit", "field", "expected"),
    [
        (
            lambda c: c["creatures"]["pig"].update(hp="lots"),
            "creatures.pig.hp",
            "could not be converted to Integer",
        ),
        (
            lambda c: c["agent"].update(sight=3),
            "agent.sight",
            "unknown field; expected one of: life_limit",
        ),
        (
            lambda c: c["items"]["torch"].update(kind="weapon"),
            "items.torch.kind",
            "expected one of",
        ),
        (
            lambda c: c["recipes"][0]["inputs"].update(wod=2),
            "recipes[0].inputs",
            "unknown item 'wod'",
        ),
        (
            lambda c: c["drop_table"].update(cow={"kill": {"meat": 1}}),
            "drop_table",
            "unknown creature 'cow'",
        ),
        (
            lambda c: c["terrain"]["forest"]["spawns"].update(pig=1.5),
            "terrain.forest.spawns.pig",
            "expected a probability in [0, 1], got 1.5",
        ),
        (
            lambda c: c["buffs"]["night"].update(phases=["dusk"]),
            "buffs.night.phases",
            "unknown phase",
        ),
        (
            lambda c: c["buffs"]["hunger"]["effects"].update(mana=-1),
            "buffs.hunger.effects",
            "unknown meter or stat 'mana'",
        ),
        (
            lambda c: c["items"]["torch"].update(slot=None),
            "items.torch.slot",
            "equipment needs a slot",
        ),
        (
            lambda c: c["items"]["water"]["effects"].update(temperature=1),
            "items.water.effects",
            "agent.temperature is 0",
        ),
        (
            lambda c: c["agent"].update(life_limit=0),
            "agent.life_limit",
            "expected a value >= 1, got 0",
        ),
        (lambda c: c["tasks"].update(swim="swim:river"), "tasks.swim", "unknown event kind 'swim'"),
        (
            lambda c: c["tasks"].update(drink="consume:wood"),
            "tasks.drink",
            "cannot happen in this world",
        ),
        (lambda c: c.pop("name"), "name", "missing mandatory value"),
    ],
)
def test_a_malformed_config_names_the_field(edit: Any, field: str, expected: str) -> None:
    config = preset()
    edit(config)
    with pytest.raises(SurvivalConfigError) as caught:
        SurvivalWorld(1, config=config)
    message = str(caught.value)
    assert f"field {field}:" in message
    assert expected.lower() in message.lower()


def test_a_missing_file_or_preset_is_named(tmp_path: Path) -> None:
    with pytest.raises(SurvivalConfigError, match=r"DayAndNite.*DayAndNight, FourSeason"):
        load_config("DayAndNite")
    broken = tmp_path / "broken.yaml"
    broken.write_text("map: [1, 2\n")
    with pytest.raises(SurvivalConfigError, match=r"broken\.yaml: not valid YAML"):
        load_config(broken)


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"reward": "dense_ish"}, "unknown reward 'dense_ish'"),
        ({"observation": "pixels"}, "unknown observation 'pixels'"),
        ({"actions": "some"}, "unknown actions 'some'"),
        ({"observation": "nearest1"}, "use actions='simple'"),
        ({"horizon": 0}, "field horizon: expected a value >= 1, got 0"),
        (
            {"config": [1, 2]},
            "config: expected a preset name (DayAndNight, FourSeason), a YAML file or a mapping "
            "of sections, got a list",
        ),
        ({"overrides": [1]}, "overrides: expected a mapping of sections"),
    ],
)
def test_bad_constructor_arguments_are_named(kwargs: dict[str, Any], expected: str) -> None:
    with pytest.raises(ValueError, match=re.escape(expected)):
        SurvivalWorld(1, **kwargs)
