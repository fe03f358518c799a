"""Worlds composed of parts (``include``), meters declared by the config, temperature's basic
buff, and the one-line errors of malformed files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from survival_scenarios import carry, do, do_simple, empty_world, meter, set_meter

from entityrl.cli.main import main
from entityrl.env import RandomPolicy
from entityrl.envs import make_vec
from entityrl.envs.survival import SurvivalConfigError, SurvivalWorld, load_config

ROOT = Path(__file__).resolve().parents[3]
FATIGUE = ROOT / "experiments" / "eden" / "worlds" / "fatigue.yaml"


def write(tmp_path: Path, text: str, name: str = "world.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# ---------------------------------------------------------------------------- malformed files
def test_a_top_level_list_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "- name: W\n- horizon: 3\n")
    with pytest.raises(SurvivalConfigError) as info:
        load_config(path)
    expected = (
        "world.yaml: field (top level): expected a mapping of sections (name, map, terrain, "
        "agent, ...), got a list"
    )
    assert str(info.value) == expected
    assert main(["survival", "check", str(path)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"entityrl survival: error: {expected}"]


# ---------------------------------------------------------------------------- composition
def test_a_world_composed_of_a_preset_and_two_modules(tmp_path: Path) -> None:
    path = write(
        tmp_path, "name: Composed\ninclude: [DayAndNight, modules/seasons, modules/wolves]\n"
    )
    config = load_config(path)
    assert config.name == "Composed"
    assert list(config.creatures) == ["pig", "tree", "river", "wolf"]
    assert [r.output for r in config.recipes] == ["torch", "coat"]  # lists are concatenated
    assert config.terrain["forest"].spawns == {"pig": 0.008, "tree": 0.08, "wolf": 0.006}
    assert config.buffs["hunger"].effects == {"satiety": -1, "thirst": -1, "temperature": -0.5}
    assert config.items["meat"].effects == {"satiety": 40, "hp": 2}
    assert [s.name for s in config.seasons] == ["spring", "summer", "autumn", "winter"]
    assert {"drink water", "kill a wolf", "craft a coat"} <= set(config.tasks)
    SurvivalWorld(2, seed=0, config=path).reset()


def test_parts_that_disagree_are_named_unless_the_including_file_decides(tmp_path: Path) -> None:
    write(tmp_path, "agent: {vision: 3}\n", "dim.yaml")
    write(tmp_path, "agent: {vision: 7}\n", "keen.yaml")
    path = write(tmp_path, "name: W\ninclude: [DayAndNight, dim.yaml, keen.yaml]\n")
    with pytest.raises(SurvivalConfigError) as info:
        load_config(path)
    assert str(info.value) == (
        "world.yaml: include: dim.yaml: field agent.vision: 3 here but 5 in DayAndNight.yaml; "
        "expected one value (set it in the including file to choose)"
    )
    decided = write(tmp_path, "name: W\ninclude: [DayAndNight, dim, keen]\nagent: {vision: 4}\n")
    assert load_config(decided).agent.vision == 4


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: W\ninclude: DayAndNight\n", "world.yaml: field include: expected a list of world"),
        ("name: W\ninclude: [Atlantis]\n", "no world config 'Atlantis'"),
        (
            "name: W\ninclude: [world.yaml]\n",
            "world.yaml: includes itself: world.yaml -> world.yaml",
        ),
    ],
)
def test_bad_includes_are_named(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(SurvivalConfigError, match=message.replace("(", r"\(")):
        load_config(write(tmp_path, text))


@pytest.mark.parametrize(
    "part", ["/etc/hostname", "../outside.yaml", "modules/../../outside.yaml", "link.yaml"]
)
def test_an_include_stays_in_the_world_files_folder(tmp_path: Path, part: str) -> None:
    (tmp_path / "outside.yaml").write_text("agent: {vision: 3}\n")
    folder = tmp_path / "world"
    folder.mkdir()
    (folder / "link.yaml").symlink_to(tmp_path / "outside.yaml")
    path = write(folder, f"name: W\ninclude: ['{part}']\n")
    with pytest.raises(SurvivalConfigError) as info:
        load_config(path)
    assert str(info.value) == (
        f"world.yaml: field include: {part!r} leads outside {folder}; expected a file in that "
        "folder or below it (a relative path without '..'), a preset (DayAndNight, FourSeason) "
        "or a preset module (modules/...)"
    )


def test_an_include_below_the_folder_includes_its_own_parts(tmp_path: Path) -> None:
    (tmp_path / "parts").mkdir()
    write(tmp_path, "include: [keen.yaml]\n", "parts/sight.yaml")
    write(tmp_path, "agent: {vision: 7}\n", "parts/keen.yaml")
    path = write(tmp_path, "name: W\ninclude: [DayAndNight, parts/sight]\nagent: {vision: 7}\n")
    assert load_config(path).agent.vision == 7


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "root:x:0:0:root:/root:/bin/bash daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin: 1\n",
            "notes.yaml: field root:x:0:0:root:/root:/bin/bash daemon:x:1:1:daemon:/usr/...: "
            "unknown field; expected one of: name, horizon, map,",
        ),
        ("a: [\n", "notes.yaml: not valid YAML at line 2: did not find expected node content"),
        ("a: 1\na: 2\n", "notes.yaml: not valid YAML at line 2: found duplicate key a"),
        ("\xff", "notes.yaml: not valid YAML: expected printable UTF-8 text"),
    ],
    ids=["a line of another file", "unclosed list", "duplicate key", "not text"],
)
def test_a_part_that_is_not_a_world_is_named_not_quoted(
    tmp_path: Path, text: str, message: str
) -> None:
    (tmp_path / "notes.yaml").write_bytes(text.encode("latin-1"))
    with pytest.raises(SurvivalConfigError) as info:
        load_config(write(tmp_path, "name: W\ninclude: [notes.yaml]\n"))
    assert str(info.value).startswith(message)
    assert "/usr/sbin/nologin" not in str(info.value) and "\n" not in str(info.value)


# ---------------------------------------------------------------------------- meters
def test_a_config_meter_decays_is_restored_by_an_item_and_kills_at_zero() -> None:
    env = empty_world(FATIGUE, actions="simple", observation="nearest1")
    assert env.rules.meter_names[-1] == "fatigue"
    assert meter(env, "fatigue") == 80
    set_meter(env, "fatigue", 10)
    carry(env, "herb", 1)
    env.refresh()
    do_simple(env, "consume")  # the herb relieves the emptiest meter
    assert meter(env, "fatigue") == 10 + 40 - 1
    assert "fatigue" in env.observer.global_names
    set_meter(env, "fatigue", 1)
    obs = do_simple(env, "idle")
    assert obs.done[0] and obs.metrics["died"].tolist() == [1.0]


def test_a_meter_without_death_only_empties() -> None:
    env = empty_world(
        "DayAndNight",
        overrides={"meters": {"boredom": {"max": 5, "start": 2, "decay": 1, "death": False}}},
    )
    obs = env.refresh()
    for _ in range(4):
        obs = do(env, obs, "idle")
    assert meter(env, "boredom") == 0 and not obs.done[0]


@pytest.mark.parametrize(
    ("meters", "message"),
    [
        ({"hp": {"max": 3}}, "field meters.hp: 'hp' is built in; give the new meter another name"),
        ({"fatigue": {"max": 0}}, r"field meters.fatigue.max: expected a value > 0, got 0"),
        (
            {"fatigue": {"max": 5, "start": 9}},
            r"field meters.fatigue.start: expected a value in \(0, 5",
        ),
    ],
)
def test_bad_meters_are_named(meters: dict, message: str) -> None:
    with pytest.raises(SurvivalConfigError, match=message):
        load_config("DayAndNight", {"meters": meters})


def test_effects_name_the_config_meters_among_the_known_ones() -> None:
    overrides = {"items": {"water": {"effects": {"fatigeu": 3}}}, "meters": {"fatigue": {"max": 5}}}
    with pytest.raises(
        SurvivalConfigError,
        match=r"unknown meter 'fatigeu'; expected one of: .*temperature, fatigue",
    ):
        load_config("DayAndNight", overrides)


def test_the_fatigue_world_is_measured_by_the_metrics_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["survival", "metrics", str(FATIGUE), "--task", "chew a herb", "--episodes", "16"]
    assert main([*args, "--max-steps", "80", "--actions", "simple"]) == 0
    out = capsys.readouterr().out
    assert "chew a herb" in out and "consume:herb" in out
    assert main(["survival", "check", str(FATIGUE)]) == 0
    assert "  meters: satiety, thirst, hp, fatigue" in capsys.readouterr().out


# ---------------------------------------------------------------------------- temperature
def test_the_basic_buff_lowers_temperature_every_step() -> None:
    env = empty_world("FourSeason", copies=2)
    assert env.rules.buffs.meter_effects[env.rules.buffs.names.index("hunger")][3] == -0.5
    env.state.t[:] = [0, int(env.rules.season_lengths[:3].sum())]  # spring, winter
    set_meter(env, "temperature", 20)
    do(env, env.refresh(), "idle")
    temperature = env.state.meters[:, env.rules.meter_names.index("temperature")]
    np.testing.assert_allclose(temperature, [20 - 0.5 + 1, 20 - 0.5 - 0.5])


# ---------------------------------------------------------------------------- sparse reward
def test_sparse_reward_at_a_full_meter_is_a_config_option() -> None:
    paid = []
    for when_full in (True, False):
        env = empty_world(
            reward="sparse", overrides={"rewards": {"sparse_when_full": when_full}}, copies=2
        )
        carry(env, "water", 1)
        env.state.meters[1, 1] = 50  # copy 1 is thirsty, copy 0 is not
        obs = do(env, env.refresh(), "consume water")
        paid.append(obs.reward.tolist())
    assert paid == [[1.0, 1.0], [0.0, 1.0]]


def test_in_day_and_night_no_meal_finds_its_meter_full() -> None:
    # Meters decay at the end of every step, so a meal never finds its meter full: both
    # settings pay the same rewards (why the study full_meter trains identical runs).
    rewards = []
    for when_full in (True, False):
        overrides = {"rewards": {"sparse_when_full": when_full}}
        env = make_vec("DayAndNight", 16, seed=0, reward="sparse", overrides=overrides)
        policy = RandomPolicy(env.action_space, seed=0)
        obs, paid = env.reset(), []
        for _ in range(400):
            obs = env.act(policy.act(obs))
            paid.append(obs.reward.copy())
        rewards.append(np.array(paid))
    assert rewards[0].sum() >= 10  # meals were eaten and paid
    np.testing.assert_array_equal(rewards[0], rewards[1])
