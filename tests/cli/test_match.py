"""``entityrl eval --opponent``: matches in multi-player games, and their argument errors."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from entityrl.cli.main import main
from entityrl.envs import make_vec
from entityrl.envs.rps_duel import PAYOFF
from entityrl.training import Trainer, load_agent, load_config
from entityrl.training.matrix_games import choice_probabilities, exploitability

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
    out = capsys.readouterr().out
    assert "always_rock: 20 games" in out
    # Only seat "1" is played, and always-rock's return is the agent's, negated.
    payoffs = re.search(
        r"as '1' \(20 games\) mean return ([-+.\d]+), the opponent's ([-+.\d]+)", out
    )
    assert payoffs and float(payoffs[1]) == -float(payoffs[2]) and "as '0'" not in out


def test_exploitability_is_the_nash_conv_of_the_agents_strategy(duel_run: Path, capsys) -> None:
    assert main(["eval", str(duel_run), "--exploitability"]) == 0
    out = capsys.readouterr().out
    found = re.search(r"NashConv ([\d.]+) .*NashConv/2 ([\d.]+)", out)
    assert found, out
    obs = make_vec("RockPaperScissorsDuel", 1, seed=0).reset().take(np.array([0]))
    strategy = choice_probabilities(load_agent(duel_run).net, obs, "throw")
    assert float(found[2]) == pytest.approx(exploitability(strategy, PAYOFF), abs=1e-4)
    assert float(found[1]) == pytest.approx(2 * float(found[2]), abs=2e-4)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--opponent", "nosuch:player"], "cannot import the scripted player 'nosuch:player'"),
        (["--opponent", "random", "--seat", "9"], "--seat: unknown players ['9']"),
        (["--seat", "0"], "--seat needs --opponent"),
        (["--opponent", "/no/such/run"], "/no/such/run"),
        (
            ["--exploitability", "--opponent", "random"],
            "--exploitability is computed from the agent's strategies, without playing: it "
            "takes no --opponent",
        ),
    ],
    ids=["bad scripted player", "unknown seat", "seat alone", "missing run", "exploitability"],
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


def test_exploitability_of_a_game_it_cannot_solve_is_one_line(solo_run: Path, capsys) -> None:
    assert main(["eval", str(solo_run), "--exploitability"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "computed exactly only for two-player matrix games" in err
    assert "MultiArmedBandit is neither" in err
