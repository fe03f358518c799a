"""The approximate best response (entityrl.training.best_response): on Kuhn poker, where the
exact exploitability is known, and its refusals; ``entityrl eval --exploitability
--approximate``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

pytest.importorskip("pyspiel")

from entityrl.cli.main import main
from entityrl.interop.openspiel import exploitability
from entityrl.training import load_agent, train
from entityrl.training.best_response import approximate_nash_conv
from entityrl.training.matrix_games import exploitability as matrix_exploitability

QUIET = ["log.tensorboard=false", "log.progress=false", "torch_threads=1"]
TINY = ["rollout.num_envs=8", "rollout.steps=8", "total_timesteps=64", "seed=1"]


def short_run(run_dir: Path, env: str, *overrides: str) -> Path:
    train(env, overrides=[*QUIET, *TINY, f"log.run_dir={run_dir}", *overrides])
    return run_dir


def biased_agent(run_dir: Path, bias: tuple[float, ...], game: str = "kuhn_poker") -> Path:
    """An agent of an OpenSpiel game whose every information state plays with the softmax of
    ``bias`` over the game's actions: on Kuhn poker (pass, bet), (0, 0) is uniform play and
    (2, -2) passes and folds 98% of the time."""
    short_run(run_dir, f"openspiel:{game}", "algo=selfplay")
    file = run_dir / "checkpoint.pt"
    saved = torch.load(file, weights_only=False)
    saved["model"]["heads.action.proj.weight"].zero_()
    saved["model"]["heads.action.proj.bias"].copy_(torch.tensor(bias))
    torch.save(saved, file)
    return run_dir


@pytest.mark.parametrize(
    ("bias", "exact"), [((0.0, 0.0), 0.4583), ((2.0, -2.0), 0.9762)], ids=["uniform", "passive"]
)
def test_kuhn_poker_estimate_is_close_to_and_below_the_exact_value(
    tmp_path: Path, bias: tuple[float, float], exact: float
) -> None:
    run = biased_agent(tmp_path / "agent", bias)
    assert exploitability(run, "openspiel:kuhn_poker") == pytest.approx(exact, abs=1e-4)
    lines: list[str] = []
    result = approximate_nash_conv(
        run, steps=4096, games=2000, seed=1, overrides=QUIET, report=lines.append
    )
    half = result.half
    # A learned response is at most a best response: under the exact value, up to the noise.
    assert half.mean <= exact + 3 * half.stderr
    assert half.mean == pytest.approx(exact, abs=0.1)
    assert 0 < half.stderr < 0.05
    low, high = half.interval()
    assert low < half.mean < high
    # NashConv is the seats' gains added (the agent's own values add up to the game's 0).
    assert result.constant_sum == pytest.approx(0.0, abs=1e-9)
    assert result.nash_conv.mean == pytest.approx(sum(s.gain.mean for s in result.seats))
    assert [s.player for s in result.seats] == ["player_0", "player_1"]
    assert all(s.steps >= 4096 for s in result.seats)
    assert lines == [
        f"training a best response as {p!r} against {run / 'checkpoint.pt'} for 4,096 steps"
        for p in ("player_0", "player_1")
    ]


def test_a_simultaneous_move_game_the_exact_path_refuses(tmp_path: Path) -> None:
    # Rock-paper-scissors through OpenSpiel, rock 58% of the time: paper wins 0.364 on average.
    run = biased_agent(tmp_path / "agent", (1.0, 0.0, 0.0), game="matrix_rps")
    with pytest.raises(ValueError, match="--exploitability --approximate"):
        exploitability(run, "openspiel:matrix_rps")
    strategy = torch.tensor([1.0, 0.0, 0.0]).softmax(0).numpy()
    exact = matrix_exploitability(strategy, [[0, -1, 1], [1, 0, -1], [-1, 1, 0]])
    assert exact == pytest.approx(0.3642, abs=1e-4)
    result = approximate_nash_conv(run, steps=2048, games=2000, seed=1, overrides=QUIET)
    assert result.half.mean == pytest.approx(exact, abs=0.06)
    assert result.half.mean <= exact + 3 * result.half.stderr


def test_the_command_line_estimates_and_reports_both_seats(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    run = biased_agent(tmp_path / "agent", (0.0, 0.0))
    args = ["eval", str(run), "--exploitability", "--approximate", "--br-steps", "2048",
            "--episodes", "1000", "--seed", "2", "--br-dir", str(tmp_path / "responses"),
            *(arg for setting in QUIET for arg in ("--br-set", setting))]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "approximate exploitability, a learned best response per seat (2,048 steps each)" in out
    assert out.count("training a best response as") == 2
    found = re.search(r"NashConv/2 ([\d.]+) \(95% interval ([-\d.]+) to ([\d.]+)\)", out)
    assert found, out
    half, low, high = map(float, found.groups())
    assert low < half < high and abs(half - 0.4583) < 0.15
    assert "lower bound" in out
    for player in ("player_0", "player_1"):
        assert (tmp_path / "responses" / f"response_{player}" / "checkpoint.pt").exists()
    # The responses' directory holds runs now: a second estimate there is refused, untrained.
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "expected a new directory for the responses" in err and err.count("\n") == 1


def test_games_it_cannot_estimate_are_refused_in_one_line(tmp_path: Path) -> None:
    solo = short_run(tmp_path / "solo", "MultiArmedBandit")
    with pytest.raises(ValueError, match=r"expected a two-player zero-sum game, got "
                       "MultiArmedBandit with 1 player$"):  # fmt: skip
        approximate_nash_conv(solo, steps=64, games=10)
    three = short_run(tmp_path / "three", "openspiel:kuhn_poker", "env.kwargs={players: 3}")
    with pytest.raises(ValueError, match="got openspiel:kuhn_poker with 3 players"):
        approximate_nash_conv(three, steps=64, games=10)
    # The prisoner's dilemma: what the two players win does not add up to a constant.
    dilemma = short_run(tmp_path / "dilemma", "openspiel:matrix_pd", "algo=selfplay")
    with pytest.raises(ValueError, match=r"expected a two-player zero-sum \(or constant-sum\) "
                       "game, got openspiel:matrix_pd whose two returns add up to between"):  # fmt: skip
        approximate_nash_conv(dilemma, steps=64, games=50)
    # Neither was any response trained.
    assert not list(tmp_path.glob("**/response_*"))


def test_arguments_it_cannot_use_are_refused(tmp_path: Path) -> None:
    run = biased_agent(tmp_path / "agent", (0.0, 0.0))
    with pytest.raises(ValueError, match="steps must be >= 1, got 0"):
        approximate_nash_conv(run, steps=0)
    with pytest.raises(ValueError, match="games must be >= 2"):
        approximate_nash_conv(run, steps=64, games=1)
    unsaved = load_agent(run)
    unsaved.path = None
    with pytest.raises(ValueError, match="expected a trained agent loaded from its checkpoint"):
        approximate_nash_conv(unsaved, steps=64)
    with pytest.raises(ValueError, match=r"ppo\.no_such_key"):
        approximate_nash_conv(run, steps=64, games=10, overrides=["ppo.no_such_key=1"])


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--approximate"], "--approximate estimates --exploitability: give both"),
        (["--exploitability", "--br-steps", "10"], "--br-steps set the learned best responses"),
        (["--exploitability", "--approximate", "--deterministic"], "takes no --deterministic"),
    ],
    ids=["approximate alone", "br-steps alone", "deterministic"],
)
def test_flags_without_their_mode_are_refused(
    tmp_path: Path, capsys, flags: list[str], message: str
) -> None:  # type: ignore[no-untyped-def]
    assert main(["eval", str(tmp_path / "no-such-run"), *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_an_exact_refusal_in_a_two_player_game_points_to_approximate(
    tmp_path: Path, capsys
) -> None:  # type: ignore[no-untyped-def]
    duel = short_run(tmp_path / "duel", "CoinDuel")
    assert main(["eval", str(duel), "--exploitability"]) == 2
    err = capsys.readouterr().err
    assert "CoinDuel is neither" in err and "add --approximate" in err
    assert err.count("\n") == 1
