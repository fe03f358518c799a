"""``entityrl survival check | metrics | pic``."""

from __future__ import annotations

from pathlib import Path

import pytest

from entityrl.cli.main import main


def test_check_summarizes_a_valid_world(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["survival", "check", "FourSeason"]) == 0
    out = capsys.readouterr().out
    assert "FourSeason: valid" in out and "wolf" in out and "craft a coat (synthesize:coat)" in out


def test_check_reports_the_broken_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "world.yaml"
    path.write_text("name: W\nterrain: {plain: {spawns: {unicorn: 0.1}}}\n")
    assert main(["survival", "check", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        "entityrl survival: error: world.yaml: field terrain.plain.spawns: unknown creature "
        "'unicorn'"
    )


def test_metrics_prints_a_table_of_tasks(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "survival",
            "metrics",
            "DayAndNight",
            "--episodes",
            "32",
            "--max-steps",
            "60",
            "--actions",
            "simple",
            "--task",
            "collect wood",
            "--task",
            "drink water",
        ]
    )
    assert code == 0
    lines = capsys.readouterr().out.splitlines()
    assert "32 episodes of at most 60 steps" in lines[0] and "threshold th = 0.9" in lines[0]
    assert lines[1].split()[:6] == ["task", "event", "done", "TTMN", "mean", "TTMX"]
    assert lines[3].startswith("collect wood") and lines[4].startswith("drink water")
    assert "goal levels in paper order" in lines[0]
    assert lines[6].startswith("the paper's estimates (Eqs. 8-10; p* = 1/9)")
    assert lines[7].split()[:3] == ["task", "g(T)", "e(T)"]
    assert lines[9].split()[:3] == ["collect", "wood", "1"]
    assert len(lines) == 11


def test_metrics_names_an_unknown_task(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["survival", "metrics", "DayAndNight", "--task", "fly", "--episodes", "2"]) == 2
    assert "unknown task 'fly'" in capsys.readouterr().err


def test_pic_prints_the_capacity_of_each_reward_mode(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "survival",
            "pic",
            "DayAndNight",
            "--policies",
            "4",
            "--episodes",
            "4",
            "--max-steps",
            "300",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "4 random linear policies" in out
    for mode in ("dense", "sparse", "very_sparse"):
        assert any(line.startswith(mode) for line in out.splitlines())


def test_pic_refuses_fewer_bins_than_episodes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["survival", "pic", "DayAndNight", "--bins", "16", "--episodes", "32"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "entityrl survival: error: bins must exceed the episodes per policy (the paper's B > M), got B = 16, M = 32"
    )


def test_bad_option_values_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["survival", "metrics", "DayAndNight", "--threshold", "1.5"])
    assert "expected a number in (0, 1], got 1.5" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["0", "three"])
def test_counts_are_whole_numbers_of_at_least_one(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["survival", "metrics", "DayAndNight", "--episodes", value])
    assert exit_info.value.code == 2
    assert f"argument --episodes: expected a whole number >= 1, got '{value}'" in (
        capsys.readouterr().err
    )
