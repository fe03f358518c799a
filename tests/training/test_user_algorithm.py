"""An algorithm written outside entityrl (docs/algorithms.md's example) trains from the command
line with its own settings section, checkpoints and resumes exactly."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from stop_after import StopAfter

from entityrl.algorithms import lookup, register, registry
from entityrl.training import Trainer, load_config
from entityrl.training.checkpoint import load_checkpoint
from entityrl.training.config import ConfigError, describe

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "algorithms.md").read_text()
ALGO = "algo=sum_dqn:SumDQN"
TINY = [ALGO, "log.tensorboard=false", "log.progress=false", "torch_threads=1",
        "rollout.num_envs=4", "net.d_model=16", "net.n_head=1", "net.n_layer=1",
        "sumdqn.learning_starts=16", "sumdqn.batch_size=16", "total_timesteps=96"]  # fmt: skip


def example() -> str:
    after = DOC[DOC.index("<!-- the example algorithm") :]
    found = re.search(r"```python\n(.*?)```", after, re.S)
    assert found is not None, "docs/algorithms.md lost its example"
    return found.group(1)


@pytest.fixture
def module_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The example as sum_dqn.py in a directory of its own, importable."""
    directory = tmp_path / "mine"
    directory.mkdir()
    (directory / "sum_dqn.py").write_text(example())
    monkeypatch.syspath_prepend(str(directory))
    yield directory
    sys.modules.pop("sum_dqn", None)


def test_the_example_is_complete_and_short() -> None:
    assert len(example().splitlines()) <= 80


def test_its_settings_are_a_config_section_with_help_and_checks(module_dir: Path) -> None:
    config = load_config("CherryPick", [ALGO, "sumdqn.epsilon=0.25", "sumdqn.buffer_size=1e3"])
    assert config.sumdqn.epsilon == 0.25 and config.sumdqn.buffer_size == 1000
    text = describe(config)
    assert "sumdqn.epsilon=0.25" in text and "Probability that an actor takes" in text
    assert "sumdqn.buffer_size=1000" in text and "Transitions the replay buffer holds" in text
    with pytest.raises(ConfigError, match=re.escape("'sumdqn.epsilom'. Did you mean 'epsilon'")):
        load_config("CherryPick", [ALGO, "sumdqn.epsilom=0.2"])
    with pytest.raises(ConfigError, match=re.escape("sumdqn.batch_size must be > 0, got 0")):
        load_config("CherryPick", [ALGO, "sumdqn.batch_size=0"])
    with pytest.raises(ConfigError, match=re.escape("has no 'SumDQM'. Did you mean 'SumDQN'")):
        load_config("CherryPick", ["algo=sum_dqn:SumDQM"])
    with pytest.raises(ConfigError, match=re.escape("cannot import module 'no_such_module'")):
        load_config("CherryPick", ["algo=no_such_module:X"])
    with pytest.raises(ConfigError, match=re.escape("Did you mean 'ppo'")):
        load_config("CherryPick", ["algo=ppp"])


def test_a_registered_class_is_named_by_its_name(
    module_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(registry, "_registered", {})  # this test's registrations only
    algorithm = lookup("sum_dqn:SumDQN")
    register(algorithm)
    assert lookup("sumdqn") is algorithm
    assert load_config("CherryPick", ["algo=sumdqn"]).sumdqn.epsilon == 0.1
    with pytest.raises(ValueError, match=re.escape("taken by a built-in")):
        algorithm.name = "ppo"
        try:
            register(algorithm)
        finally:
            algorithm.name = "sumdqn"


def test_the_command_line_trains_it_shows_its_help_and_resumes(module_dir: Path) -> None:
    env = {**os.environ, "PYTHONPATH": ""}

    def entityrl(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "entityrl", *args]
        return subprocess.run(command, cwd=module_dir, env=env, capture_output=True, text=True)

    shown = entityrl("train", "CherryPick", ALGO, "--help")
    assert shown.returncode == 0, shown.stderr
    assert "sumdqn.tau=0.01" in shown.stdout and "How far the target network" in shown.stdout
    run = module_dir / "run"
    first = entityrl("train", "CherryPick", *TINY, f"log.run_dir={run}")
    assert first.returncode == 0, first.stderr
    more = entityrl("train", "--resume", str(run), "total_timesteps=192")
    assert more.returncode == 0, more.stderr
    assert load_checkpoint(run)["step"] == 192


def test_a_resumed_run_ends_like_an_uninterrupted_one(module_dir: Path, tmp_path: Path) -> None:
    def config(name: str):
        return load_config("CherryPick", [*TINY, f"log.run_dir={tmp_path / name}"])

    whole = Trainer(config("whole")).run()
    Trainer(config("parts"), callbacks=[StopAfter(10)]).run()
    resumed = Trainer(config("parts"), resume=tmp_path / "parts")
    assert resumed.step == 40 and len(resumed.algorithm.replay) == 40
    rest = resumed.run()
    assert rest.steps == whole.steps == 96
    a, b = load_checkpoint(whole.checkpoint), load_checkpoint(rest.checkpoint)
    for key, value in a["model"].items():
        assert torch.equal(value, b["model"][key]), key
    target_a, target_b = a["owned"][0]["target"], b["owned"][0]["target"]
    assert all(torch.equal(v, target_b[k]) for k, v in target_a.items())
    assert a["owned"][0]["replay"]["added"] == 96
    logged = (tmp_path / "whole" / "metrics.jsonl").read_text()
    assert logged.count('"loss/q_loss"') >= 15  # it learned: one update an iteration from step 16
