"""``entityrl play --replay FILE``: the episodes played, in the replay viewer's format."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from entityrl.cli.main import main
from entityrl.export.replay import read_episodes


def test_the_episodes_played_are_written_for_the_replay_viewer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    replay = tmp_path / "out" / "episodes.jsonl"
    args = ["CherryPick", "--random-agent", "--steps", "60", "--delay", "0", "--seed", "0"]
    assert main(["play", *args, "--replay", str(replay)]) == 0
    out = capsys.readouterr().out
    ended = re.search(r"60 steps, (\d+) episodes? ended, mean return (-?[\d.]+)", out)
    assert ended is not None, out
    assert f"wrote {ended.group(1)} complete episodes for the replay viewer into {replay}" in out

    header, steps = read_episodes(replay)
    assert header["env"] == {"id": "CherryPick", "kwargs": {}}
    episodes = sorted({s["episode"] for s in steps})
    assert episodes == list(range(int(ended.group(1)))) and episodes
    # Each episode's last step carries its return: their mean is the one play reports.
    last = {s["episode"]: s["return"] for s in steps}
    mean = sum(last.values()) / len(last)
    assert mean == pytest.approx(float(ended.group(2)), rel=1e-3, abs=0.01)


def test_an_unwritable_replay_file_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["CherryPick", "--random-agent", "--steps", "2", "--delay", "0"]
    assert main(["play", *args, "--replay", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("entityrl play: error: --replay: cannot write") and err.count("\n") == 1
