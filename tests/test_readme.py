"""The README's commands and examples stay true."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from entityrl.env import ValidatingEnvironment
from entityrl.env.validator import EnvValidationError

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def code_blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, re.S)


def test_ci_runs_the_readme_test_command() -> None:
    commands = [line for line in code_blocks("bash")[0].splitlines() if line and line[0] != "#"]
    assert len(commands) == 2, "the README opens with two commands"
    ci = (ROOT / ".ci" / "run").read_text()
    assert commands[1] in ci.splitlines()


@pytest.fixture
def example_module(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    module = types.ModuleType("readme_example")
    exec(code_blocks("python")[0], module.__dict__)
    monkeypatch.setitem(sys.modules, "readme_example", module)
    return module


def test_the_example_environment_validates_and_trains(
    example_module: types.ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    usage = code_blocks("python")[1].replace("total_timesteps=20000", "total_timesteps=4096")
    usage = usage.replace('overrides=["', 'overrides=["log.progress=false", "')
    namespace = dict(example_module.__dict__)
    exec(usage, namespace)
    assert namespace["result"].steps == 4096
    assert (namespace["result"].run_dir / "checkpoint.pt").exists()


def test_the_quoted_validation_message_is_what_the_validator_says(
    example_module: types.ModuleType,
) -> None:
    env = ValidatingEnvironment(example_module.PickHeaviest())
    env.env.seed(0)
    env.env.reset()

    broken = example_module.Observation(features={"Box": np.zeros((3, 2))})
    env.env.reset = lambda: broken  # type: ignore[method-assign]
    with pytest.raises(EnvValidationError) as err:
        env.reset()
    quoted = re.search(r"`(PickHeaviest: Observation.*?)`", README.replace("\n", " "), re.S)
    assert quoted is not None
    assert " ".join(quoted.group(1).split()) == str(err.value)
