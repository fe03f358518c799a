"""Configs: files, overrides, validation messages, help text."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from entityrl.training.config import (
    CONFIG_DIR,
    ConfigError,
    TrainConfig,
    describe,
    from_dict,
    load_config,
    to_dict,
)


def test_overrides_reach_nested_fields() -> None:
    config = load_config("Xor", ["ppo.gamma=0.9", "net.d_model=64"])
    assert config.ppo.gamma == 0.9 and config.net.d_model == 64 and config.env.id == "Xor"


def test_unknown_key_names_the_key_and_the_allowed_ones() -> None:
    with pytest.raises(ConfigError) as err:
        load_config("Xor", ["ppo.gama=0.9"])
    message = str(err.value)
    assert "'ppo.gama'" in message and "Did you mean 'gamma'" in message
    assert "gae_lambda" in message  # the allowed keys are listed


def test_wrong_type_names_the_key() -> None:
    with pytest.raises(ConfigError, match=r"'optim\.bs'"):
        load_config("Xor", ["optim.bs=big"])


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        ("ppo.gamma=1.5", "ppo.gamma must be in [0, 1]"),
        ("optim.lr=0", "optim.lr must be > 0"),
        ("optim.micro_bs=300", "must divide optim.bs"),
        ("net.d_model=31", "divisible by net.n_head"),
        ("net.pooling=sum", "net.pooling"),
        ("rollout.num_envs=0", "rollout.num_envs must be > 0"),
        ("env.kwargs.nope=1", "unknown argument 'nope'"),
        ("env.id=NoSuchEnv", "unknown environment 'NoSuchEnv'"),
    ],
)
def test_bad_values_are_rejected_before_training(override: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config("Xor", [override])
    assert fragment in str(err.value)


def test_malformed_override_and_source() -> None:
    with pytest.raises(ConfigError, match="key=value"):
        load_config("Xor", ["ppo.gamma"])
    with pytest.raises(ConfigError, match="neither a config file nor a registered environment"):
        load_config("NoSuchThing")
    with pytest.raises(ConfigError, match="does not exist"):
        load_config("missing.yaml")


def test_yaml_files_are_validated(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("env:\n  id: Count\nppo:\n  gamma: 0.5\n")
    assert load_config(good).ppo.gamma == 0.5
    bad = tmp_path / "bad.yaml"
    bad.write_text("ppo:\n  gama: 0.5\n")
    with pytest.raises(ConfigError, match=r"'ppo\.gama'"):
        load_config(bad)
    broken = tmp_path / "broken.yaml"
    broken.write_text("ppo: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(broken)


def test_every_shipped_config_loads_and_states_its_target() -> None:
    files = sorted(CONFIG_DIR.glob("*.yaml"))
    assert files, "no shipped configs"
    for path in files:
        config = load_config(path)
        assert config.target_return is not None, f"{path.name} does not state target_return"


def test_round_trip_through_a_dict() -> None:
    config = load_config("FloorIsLava", ["net.relpos={position_features: [x, y], extent: [1, 1]}"])
    again = from_dict(to_dict(config))
    assert again == config


def test_help_lists_every_parameter_with_its_doc() -> None:
    text = describe(TrainConfig())

    def keys(obj: object, prefix: str = "") -> list[str]:
        out = []
        for f in dataclasses.fields(obj):  # type: ignore[arg-type]
            value = getattr(obj, f.name)
            if dataclasses.is_dataclass(value):
                out += keys(value, f"{prefix}{f.name}.")
            else:
                out.append(f"{prefix}{f.name}")
        return out

    for key in keys(TrainConfig()):
        assert f"  {key}=" in text, key
    assert "Discount factor." in text


def test_every_shipped_config_is_the_one_its_environment_name_finds() -> None:
    # `entityrl train MineSweeper` must train with mine_sweeper.yaml, not silently with the
    # defaults: each shipped file is named as config_path_for names its environment.
    from entityrl.training.config import CONFIG_DIR, config_path_for

    for path in sorted(CONFIG_DIR.glob("*.yaml")):
        env_id = load_config(path).env.id
        assert config_path_for(env_id).exists(), f"{path.name}: {env_id} looks for another file"
