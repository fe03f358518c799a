"""Self-play's pool with a Nash opponent mixture (selfplay.opponent_mix=nash): the meta-game
solver, the pool's meta-game and draws, the games that fill it, refusals, resume, and the
mixture's NashConv."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from env.player_envs import Bigger, Dropout
from stop_after import StopAfter

from entityrl.algorithms.self_play.meta_game import saved_mixture
from entityrl.algorithms.self_play.meta_nash import duality_gap, zero_sum_nash
from entityrl.algorithms.self_play.pool import OpponentPool, SelfPlayConfig
from entityrl.cli.main import main
from entityrl.env.multiplayer_vec import PlayerVecEnv
from entityrl.training import Trainer, load_agent, load_config
from entityrl.training.agent import make_eval_env
from entityrl.training.checkpoint import load_checkpoint
from entityrl.training.config import ConfigError
from entityrl.training.matrix_games import matrix_game_nash_conv, mixture_nash_conv

QUIET = ["log.tensorboard=false", "log.progress=false", "torch_threads=1"]
NASH = [
    "algo=selfplay", "rollout.num_envs=32", "rollout.steps=8", "optim.bs=128",
    "selfplay.snapshot_every=512", "selfplay.swap_every=512", "selfplay.opponent_mix=nash",
    "selfplay.play_latest=0", "selfplay.meta_games=64", *QUIET,
]  # fmt: skip

RPS = [[0, -1, 1], [1, 0, -1], [-1, 1, 0]]
# Rock-paper-scissors where winning with scissors pays 2: (1/4, 1/2, 1/4) for both players.
SKEWED_RPS = [[0, -1, 2], [1, 0, -1], [-2, 1, 0]]
RPS_DOMINATED = [[0, -1, 1, 1], [1, 0, -1, 1], [-1, 1, 0, 1], [-1, -1, -1, 0]]


def config(run_dir: Path, *extra: str):  # type: ignore[no-untyped-def]
    return load_config(None, [*NASH, f"log.run_dir={run_dir}", *extra], check_env=False)


@pytest.mark.parametrize(
    ("payoff", "row", "column", "value"),
    [
        (RPS, [1 / 3] * 3, [1 / 3] * 3, 0.0),
        (SKEWED_RPS, [0.25, 0.5, 0.25], [0.25, 0.5, 0.25], 0.0),
        # A fourth strategy that loses to every other one (and ties itself) is never played.
        (RPS_DOMINATED, [1 / 3] * 3 + [0], [1 / 3] * 3 + [0], 0.0),
        # Not symmetric: the row player mixes (3/7, 4/7), the column player (2/7, 5/7).
        ([[3, -1], [-2, 1]], [3 / 7, 4 / 7], [2 / 7, 5 / 7], 1 / 7),
        ([[2, -1], [-1, 1]], [0.4, 0.6], [0.4, 0.6], 0.2),
        # More rows than columns: the third row is dominated, the game is the 2x2 above.
        ([[2, -1], [-1, 1], [-3, 0]], [0.4, 0.6, 0.0], [0.4, 0.6], 0.2),
    ],
    ids=["rps", "skewed rps", "dominated", "asymmetric", "2x2", "3x2"],
)
def test_the_meta_solver_finds_known_equilibria(payoff, row, column, value) -> None:
    solved = zero_sum_nash(payoff)
    assert solved.row == pytest.approx(row, abs=1e-3)
    assert solved.column == pytest.approx(column, abs=1e-3)
    assert solved.value == pytest.approx(value, abs=1e-3)
    scale = np.abs(np.asarray(payoff)).max()
    assert solved.gap <= 1e-6 * scale
    assert duality_gap(np.asarray(payoff, float), solved.row, solved.column) == solved.gap


def test_the_meta_solver_reaches_its_tolerance_on_a_larger_random_game() -> None:
    rng = np.random.default_rng(0)
    payoff = rng.normal(size=(40, 40))
    payoff -= payoff.T  # a symmetric zero-sum game, as a pool's
    solved = zero_sum_nash(payoff, tolerance=1e-6)
    assert solved.gap <= 1e-6 * np.abs(payoff).max()
    # Symmetric: the value is 0 and no column does better than 0 against the row's mixture.
    assert solved.value == pytest.approx(0.0, abs=1e-5)
    assert (solved.row @ payoff).min() >= -1e-5
    # Stopped early, it says how far it got.
    rough = zero_sum_nash(payoff, tolerance=1e-9, max_iterations=50)
    assert rough.iterations == 50 and rough.gap > 1e-9 * np.abs(payoff).max()


def test_the_meta_solver_refuses_what_is_no_matrix_game() -> None:
    with pytest.raises(ValueError, match=r"finite matrix .* got shape \(3,\)"):
        zero_sum_nash([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="tolerance must be > 0"):
        zero_sum_nash(RPS, tolerance=0)


def params(value: float) -> dict[str, torch.Tensor]:
    return {"w": torch.tensor([value])}


def test_the_pool_draws_opponents_with_the_meta_games_nash_frequencies() -> None:
    pool = OpponentPool(SelfPlayConfig(opponent_mix="nash", play_latest=0.0))
    pool.add(params(0), [])
    assert pool.mixture.tolist() == [1.0]
    pool.add(params(1), [1.0])  # snapshot 1 against 0: its row of SKEWED_RPS
    pool.add(params(2), [-2.0, 1.0])
    assert pool.payoffs.tolist() == SKEWED_RPS
    assert pool.mixture == pytest.approx([0.25, 0.5, 0.25], abs=1e-3)
    rng = np.random.default_rng(0)
    draws = np.bincount([pool.choose(rng) for _ in range(20_000)], minlength=3) / 20_000
    assert draws == pytest.approx([0.25, 0.5, 0.25], abs=0.015)
    # Uniform draws are ML-Agents' (the latest with probability play_latest).
    uniform = OpponentPool(SelfPlayConfig(play_latest=0.0))
    for i in range(3):
        uniform.add(params(i))
    draws = np.bincount([uniform.choose(rng) for _ in range(20_000)], minlength=3) / 20_000
    assert draws == pytest.approx([1 / 3] * 3, abs=0.015)


def test_the_meta_game_keeps_the_snapshots_of_the_window() -> None:
    pool = OpponentPool(SelfPlayConfig(opponent_mix="nash", play_latest=0.0, window=3))
    pool.add(params(0), [])
    pool.add(params(1), [1.0])
    pool.add(params(2), [-2.0, 1.0])
    assert pool.staying == 1  # the next one pushes snapshot 0 out: it plays 1 and 2 only
    with pytest.raises(ValueError, match="margins against the 2 snapshots that stay, got 3"):
        pool.add(params(3), [0.0, 0.0, 0.0])
    pool.add(params(3), [0.5, -0.5])
    assert [s["w"].item() for s in pool.snapshots] == [1, 2, 3]
    assert pool.payoffs.tolist() == [[0, -1, -0.5], [1, 0, 0.5], [0.5, -0.5, 0]]
    # Snapshot 2 beats both others: the whole mixture.
    assert pool.mixture == pytest.approx([0, 1, 0], abs=1e-3)
    restored = OpponentPool(pool.config)
    restored.load_state_dict(pool.state_dict())
    assert restored.payoffs.tolist() == pool.payoffs.tolist()
    assert restored.mixture.tolist() == pool.mixture.tolist()


def test_self_play_against_the_nash_mixture_learns_the_dominant_pick(tmp_path: Path) -> None:
    result = Trainer(config(tmp_path / "run", "total_timesteps=4096"), Bigger).run()
    assert result.steps == 4096  # the meta-game's games are not the run's steps
    agent = load_agent(tmp_path / "run", deterministic=True)
    assert (agent.act(PlayerVecEnv(Bigger, num_games=16, seed=1).reset())["pick"].data == 2).all()
    last = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[-1])
    pool = load_checkpoint(tmp_path / "run")["selfplay"][0]["pool"]
    snapshots = len(pool["snapshots"])
    # Every new snapshot played 64 games (one step each) against each one before it.
    assert last["selfplay/meta_steps"] == 64 * snapshots * (snapshots - 1) / 2
    payoffs = np.array(pool["payoffs"])
    assert payoffs.shape == (snapshots, snapshots)
    assert np.allclose(payoffs, -payoffs.T)
    # The later snapshots pick 2 and beat the first (the starting policy, uniform picks).
    assert payoffs[-1, 0] > 0.3
    assert pool["mixture"][0] < 0.01
    assert last["selfplay/meta_gap"] <= 1e-6 * np.abs(payoffs).max()


def test_a_resumed_nash_mixture_run_continues_exactly(tmp_path: Path) -> None:
    extra = ["total_timesteps=2048", "selfplay.snapshot_every=256", "selfplay.swap_every=256"]
    Trainer(config(tmp_path / "whole", *extra), Bigger).run()
    Trainer(config(tmp_path / "parts", *extra), Bigger, callbacks=[StopAfter(4)]).run()
    Trainer(config(tmp_path / "parts", *extra), Bigger, resume=tmp_path / "parts").run()
    a, b = load_checkpoint(tmp_path / "whole"), load_checkpoint(tmp_path / "parts")
    pa, pb = a["selfplay"][0], b["selfplay"][0]
    assert len(pa["pool"]["payoffs"]) == 8
    for key in ("payoffs", "mixture", "ratings", "current"):
        assert pa["pool"][key] == pb["pool"][key], key
    assert pa["meta_steps"] == pb["meta_steps"] > 0
    for name, value in a["model"].items():
        assert value.allclose(b["model"][name], atol=1e-6), name


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["selfplay.play_latest=0.5"], "set selfplay.play_latest=0, got 0.5"),
        (["selfplay.mode=magnet"], "needs selfplay.mode=pool, got 'magnet'"),
        (["selfplay.learner_players=[0]"], r"must be empty, got '' and \['0'\]"),
        (["selfplay.opponent=random"], "must be empty, got 'random' and"),
        (["selfplay.opponent_mix=elo"], r"one of \['uniform', 'nash'\], got 'elo'"),
        (["selfplay.meta_games=1"], "meta_games must be >= 2, got 1"),
    ],
    ids=["play latest", "magnet", "learner players", "opponent", "mix", "games"],
)
def test_settings_the_nash_mixture_cannot_run_are_named(tmp_path: Path, extra, message) -> None:
    with pytest.raises((ConfigError, ValueError), match=message):
        Trainer(config(tmp_path, *extra), Bigger)


def test_the_nash_mixture_refuses_games_of_more_than_two_players(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"two-player meta-game; .* has 3 players"):
        Trainer(config(tmp_path), Dropout)


def test_eval_scores_the_pool_s_nash_mixture_of_a_matrix_game(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    overrides = ["total_timesteps=8192", "env.kwargs={game: 0}", "selfplay.snapshot_every=1024",
                 "selfplay.mode=pool"]  # fmt: skip
    Trainer(load_config("MatrixGame", [*NASH, f"log.run_dir={tmp_path}", *overrides])).run()
    agent = load_agent(tmp_path)
    nets, weights = saved_mixture(agent.net, load_checkpoint(tmp_path))
    assert len(nets) >= 2
    with make_eval_env(agent) as env:
        mixed = mixture_nash_conv(nets, weights, env, "MatrixGame")
        alone = matrix_game_nash_conv(agent.net, env, "MatrixGame")
        assert mixture_nash_conv([agent.net], [2.0], env, "MatrixGame") == alone
        with pytest.raises(ValueError, match=r"one non-negative weight per policy .* got \[-1.0\]"):
            mixture_nash_conv([agent.net], [-1.0], env, "MatrixGame")
    capsys.readouterr()
    assert main(["eval", str(tmp_path), "--exploitability"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith(f"the pool's Nash mixture ({len(nets)} snapshots, one drawn per game)")
    assert f"NashConv {mixed.total:.4f}" in last
