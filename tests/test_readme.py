"""The README's commands and examples stay true."""

from __future__ import annotations

import importlib.util
import re
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from entityrl.env import ValidatingEnvironment
from entityrl.env.validator import EnvValidationError

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def code_blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, re.S)


def commands(block: int) -> list[str]:
    """The commands of the README's ``block``-th bash block (comments left out)."""
    return [line for line in code_blocks("bash")[block].splitlines() if line and line[0] != "#"]


def opening_commands() -> list[str]:
    """The README's first two commands: set up and train, set up and test."""
    opening = commands(0)
    assert len(opening) == 2, "the README opens with two commands"
    return opening


def cpu_command() -> str:
    """The first command again, with PyTorch's CPU build (the README's next block)."""
    (command,) = commands(1)
    return command


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert opening_commands()[1] in ci.splitlines()


def test_the_cpu_command_is_the_first_one_with_pytorchs_cpu_index() -> None:
    pypi, cpu = opening_commands()[0], cpu_command()
    index = "--extra-index-url https://download.pytorch.org/whl/cpu"
    assert cpu == pypi.replace("-c constraints.txt ", f"-c constraints.txt {index} ")
    # The pin names a version PyPI has (no local label) and admits PyTorch's CPU build of it.
    (pin,) = (line for line in (ROOT / "constraints.txt").read_text().splitlines()
              if line.startswith("torch=="))  # fmt: skip
    requirement = Requirement(pin)
    (version,) = (Version(spec.version) for spec in requirement.specifier)
    assert version.local is None, f"{pin}: PyPI has no build with a local label"
    assert requirement.specifier.contains(f"{version}+cpu")


def test_the_first_commands_install_what_the_follow_ups_need() -> None:
    # A subcommand that needs an extra names it in its error: pip install 'entityrl[EXTRA]'.
    for command in (opening_commands()[0], cpu_command()):
        extras = re.search(r"-e '\.\[([\w,]+)\]'", command)
        installed = set(extras.group(1).split(",")) if extras else set()
        for sub in re.findall(r"^\.venv/bin/entityrl (\w+)", code_blocks("bash")[2], re.M):
            source = (ROOT / "entityrl" / "cli" / f"{sub}.py").read_text()
            needed = set(re.findall(r"pip install 'entityrl\[(\w+)\]'", source))
            assert needed <= installed, f"entityrl {sub} needs {needed - installed}"


def test_ci_reads_the_first_commands_pip_arguments_and_size_statement() -> None:
    # .ci/pypi_resolution.py resolves the first command against PyPI (in CI, with the network)
    # and compares with the README's figures; here only that it finds both.
    spec = importlib.util.spec_from_file_location(
        "pypi_resolution", ROOT / ".ci" / "pypi_resolution.py"
    )
    assert spec is not None and spec.loader is not None
    resolution = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(resolution)
    command = resolution.first_command(README)
    assert command == opening_commands()[0]
    assert resolution.pip_arguments(command) == ["-c", "constraints.txt", "-e", ".[plot]"]
    nvidia, gigabytes = resolution.claim(README)
    assert nvidia > 0 and gigabytes > 1


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
