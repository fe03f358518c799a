"""``--record`` of ``entityrl play`` (a person's keystrokes) and ``entityrl eval`` (an agent)."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np
import pytest

from entityrl.cli.main import main
from entityrl.recording import Recording
from entityrl.training import train

# One row of cells, the cannon ready at once: Mine #0, Mine #1, Robot #2, Orbital Cannon #3.
LINE_WORLD = [
    "MineSweeper",
    "--seed",
    "4",
    "--kwargs",
    '{"width": 4, "height": 1, "nmines": 2, "nrobots": 1, "orbital_cannon": true, "cooldown_period": 0}',
]


def test_a_person_s_episodes_are_recorded_with_the_choices_typed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Defuse (choice 4) and fire the cannon at the robot (candidate 2): the episode ends at
    # once. Twice; then the robot moves (choice 0) in a third episode and the person quits.
    monkeypatch.setattr(sys, "stdin", io.StringIO("4\n2\n4\n2\n0\n"))
    path = tmp_path / "human.arrow"
    assert main(["play", *LINE_WORLD, "--record", str(path)]) == 0
    assert f"recorded 2 complete episodes into {path}\n" in capsys.readouterr().out
    recording = Recording(path)
    assert recording.header.env_id == "MineSweeper"
    assert recording.header.env_kwargs["orbital_cannon"] is True
    episode = next(recording.episodes())
    assert episode.length == 1
    assert episode.actions["Move"][0].ravel().tolist() == [4]
    assert episode.actions["Fire Orbital Cannon"][0].ravel().tolist() == [2]
    assert episode.total_reward == 1.0


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A few PPO iterations on MoveToOrigin episodes of five steps."""
    directory = tmp_path_factory.mktemp("run")
    overrides = {
        "env.kwargs": "{max_steps: 5}",
        "rollout.num_envs": 8,
        "rollout.steps": 10,
        "total_timesteps": 160,
        "net.d_model": 8,
        "net.n_head": 1,
        "net.n_layer": 1,
        "log.run_dir": directory,
        "log.tensorboard": "false",
        "log.progress": "false",
    }
    train("MoveToOrigin", overrides=[f"{key}={value}" for key, value in overrides.items()])
    return directory


def test_eval_records_the_agent_s_episodes(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "agent.arrow"
    args = ["eval", str(run_dir), "--episodes", "6", "--num-envs", "3", "--record", str(path)]
    assert main(args) == 0
    out = capsys.readouterr().out
    episodes = list(Recording(path).episodes())
    assert f"recorded {len(episodes)} complete episodes" in out
    assert len(episodes) >= 6
    assert all(e.length == 5 for e in episodes)
    mean = float(out.split("episode_return")[1].split()[0])
    assert np.isclose(np.mean([e.total_reward for e in episodes[:6]]), mean, atol=0.05)


def test_an_unwritable_record_path_is_a_one_line_error(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    code = main(["eval", str(run_dir), "--record", str(blocker / "agent.arrow")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("entityrl eval: error: --record: cannot write")
    assert len(err.strip().splitlines()) == 1


def test_a_person_s_recording_trains_an_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("4\n2\n4\n2\n4\n2\nq\n"))
    demos = tmp_path / "human.arrow"
    assert main(["play", *LINE_WORLD, "--record", str(demos)]) == 0
    run_dir = tmp_path / "bc"
    args = ["bc", str(demos), "bc.epochs=2", "bc.eval_episodes=1", "bc.eval_envs=1",
            "log.tensorboard=false", f"log.run_dir={run_dir}"]  # fmt: skip
    assert main(args) == 0
    assert "epoch 2" in capsys.readouterr().out
    assert main(["eval", str(run_dir), "--episodes", "2"]) == 0
