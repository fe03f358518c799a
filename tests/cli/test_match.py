"""``entityrl eval --opponent``: matches in multi-player games, and their argument errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from entityrl.cli.main import main
from entityrl.training import Trainer, load_config

QUIET = ["log.tensorboard=false", "log.progress=false", "torch_threads=1"]


@pytest.fixture(scope="module")
def duel_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("rps")
    config = load_config(
        "RockPaperScissorsDuel", [*QUIET, "total_timesteps=1024", f"log.run_dir={run_dir}"]
    )
    Trainer(config).run()
    return run_dir


@pytest.fixture(scope="module")
def solo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("bandit")
    config = load_config(
        "MultiArmedBandit", [*QUIET, "total_timesteps=256", f"log.run_dir={run_dir}"]
    )
    Trainer(config).run()
    return run_dir


def test_a_match_reports_rates_and_the_elo_difference(duel_run: Path, capsys) -> None:
    code = main(["eval", str(duel_run), "--opponent", "random", "--episodes", "60"])
    out, err = capsys.readouterr()
    assert code == 0, err
    match = re.search(
        r"against random: 60 games: won ([\d.]+)%, drew ([\d.]+)%, lost ([\d.]+)%", out
    )
    assert match and sum(float(g) for g in match.groups()) == pytest.approx(100.0, abs=0.2)
    assert "Elo difference" in out and "95% interval" in out


def test_a_scripted_opponent_and_a_seat(duel_run: Path, capsys) -> None:
    args = ["eval", str(duel_run), "--opponent", "entityrl.envs.rps_duel:always_rock",
            "--seat", "1", "--episodes", "20", "--deterministic"]  # fmt: skip
    assert main(args) == 0
    assert "always_rock: 20 games" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--opponent", "nosuch:player"], "cannot import the scripted player 'nosuch:player'"),
        (["--opponent", "random", "--seat", "9"], "--seat: unknown players ['9']"),
        (["--seat", "0"], "--seat needs --opponent"),
        (["--opponent", "/no/such/run"], "/no/such/run"),
    ],
    ids=["bad scripted player", "unknown seat", "seat alone", "missing run"],
)
def test_bad_match_arguments_are_one_clear_line(duel_run: Path, capsys, extra, message) -> None:
    code = main(["eval", str(duel_run), "--episodes", "4", *extra])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.startswith("entityrl eval: error: ") and message in err
    assert err.count("\n") == 1


def test_an_opponent_in_a_one_player_environment_is_refused(solo_run: Path, capsys) -> None:
    code = main(["eval", str(solo_run), "--opponent", "random", "--episodes", "4"])
    assert code == 2
    assert "--opponent and --seat need a multi-player game" in capsys.readouterr().err
