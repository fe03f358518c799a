"""Multi-player training: seats, opponents, self-play with its pool and Elo, resume."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from env.player_envs import Bigger, Dropout, pick_zero
from stop_after import StopAfter

from entityrl.algorithms.self_play.magnet import Magnet
from entityrl.env import CategoricalAction, Observation
from entityrl.env.multiplayer_vec import PlayerVecEnv
from entityrl.envs import make_vec
from entityrl.envs.rps_duel import PAYOFF
from entityrl.nn.rogue_net import RogueNet, RogueNetConfig
from entityrl.training import Trainer, load_agent, load_config
from entityrl.training.agent import make_eval_env
from entityrl.training.checkpoint import load_checkpoint
from entityrl.training.config import ConfigError
from entityrl.training.match import play_match
from entityrl.training.matrix_games import (
    choice_probabilities,
    exploitability,
    matrix_game_nash_conv,
)
from entityrl.training.player_sampler import PlayerSampler
from entityrl.training.players import RandomPlayer, ScriptedPlayer, Seating, import_function

QUIET = ["log.tensorboard=false", "log.progress=false", "torch_threads=1"]
SELFPLAY = [
    "algo=selfplay", "rollout.num_envs=32", "rollout.steps=8", "optim.bs=128",
    "selfplay.snapshot_every=512", "selfplay.swap_every=512", *QUIET,
]  # fmt: skip


def config(run_dir: Path, *extra: str):  # type: ignore[no-untyped-def]
    return load_config(None, [*SELFPLAY, f"log.run_dir={run_dir}", *extra], check_env=False)


def network(env: PlayerVecEnv) -> RogueNet:
    torch.manual_seed(0)
    return RogueNet(env.obs_space, env.action_space, RogueNetConfig(d_model=16, n_layer=1))


def test_the_rollout_holds_the_learners_seats_and_games_are_scored_for_it() -> None:
    env = PlayerVecEnv(Bigger, num_games=8, seed=0)
    opponent = ScriptedPlayer(pick_zero, env)
    owner = np.array([-1, 0] * 4 + [0, -1] * 4)
    sampler = PlayerSampler(env, network(env), steps=3, seat=lambda: Seating(owner, [opponent]))
    rollout = sampler.collect()
    assert rollout.rewards.shape == (3, 8) and rollout.num_rows == 24
    # Against a player that always picks 0 the learner never loses: it wins unless it picks 0.
    picks = rollout.actions["pick"].data[:, 0].reshape(3, 8)
    np.testing.assert_array_equal(rollout.rewards, (picks > 0).astype(np.float32))
    results = sampler.take_results()
    assert len(results) == 24 and sampler.take_results() == []
    assert [r.score for r in results] == [1.0 if p > 0 else 0.5 for p in picks.reshape(-1)]


def test_independent_learners_skip_the_rows_of_players_that_left() -> None:
    env = PlayerVecEnv(Dropout, num_games=4, seed=0)
    sampler = PlayerSampler(env, network(env), steps=6, seat=None)
    rollout = sampler.collect()
    assert rollout.active is not None and rollout.active.shape == (6, 12)
    assert not rollout.active.all()
    # A row whose player left has no actors until its game restarts.
    acted = rollout.actions["choice"].lengths.reshape(6, 12) > 0
    np.testing.assert_array_equal(acted, rollout.active)
    rows = rollout.shuffled_rows(np.random.default_rng(0), 1)
    assert sorted(rows.tolist()) == np.flatnonzero(rollout.active.reshape(-1)).tolist()


def test_a_random_opponent_plays_legal_moves() -> None:
    env = PlayerVecEnv(Dropout, num_games=2, seed=0)
    player = RandomPlayer(env.action_space, seed=0)
    seating = Seating(np.array([-1, 0, 0, -1, 0, 0]), [player])
    sampler = PlayerSampler(env, network(env), steps=4, seat=lambda: seating)
    rollout = sampler.collect()
    assert rollout.rewards.shape == (4, 2)


def test_self_play_learns_the_dominant_pick_and_its_elo_rises(tmp_path: Path) -> None:
    result = Trainer(config(tmp_path / "run", "total_timesteps=8192"), Bigger).run()
    env = PlayerVecEnv(Bigger, num_games=64, seed=1)
    agent = load_agent(tmp_path / "run", deterministic=True)
    picks = agent.act(env.reset())["pick"]
    assert (picks.data == 2).all()
    trained = load_checkpoint(tmp_path / "run")
    log = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert '"selfplay/elo"' in log[-1]
    assert trained["selfplay"][0]["pool"]["learner_elo"] > 1300
    assert result.steps == 8192


def test_a_resumed_self_play_run_continues_exactly(tmp_path: Path) -> None:
    extra = ["total_timesteps=2048", "selfplay.snapshot_every=256", "selfplay.swap_every=256"]
    Trainer(config(tmp_path / "whole", *extra), Bigger).run()
    Trainer(config(tmp_path / "parts", *extra), Bigger, callbacks=[StopAfter(4)]).run()
    Trainer(config(tmp_path / "parts", *extra), Bigger, resume=tmp_path / "parts").run()
    a, b = load_checkpoint(tmp_path / "whole"), load_checkpoint(tmp_path / "parts")
    assert a["selfplay"][0]["pool"]["ratings"] == b["selfplay"][0]["pool"]["ratings"]
    for name, value in a["model"].items():
        assert value.allclose(b["model"][name], atol=1e-6), name


def test_self_play_on_a_one_player_environment_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="algo=selfplay needs a multi-player environment"):
        Trainer(load_config("CherryPick", [*SELFPLAY, f"log.run_dir={tmp_path}"]))


def test_unknown_learner_players_are_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown players \['x'\].*\['0', '1'\]"):
        Trainer(config(tmp_path, "selfplay.learner_players=[x]"), Bigger)


def rps_strategy(run_dir: Path) -> np.ndarray:
    obs = make_vec("RockPaperScissorsDuel", 1, seed=0).reset().take(np.array([0]))
    return choice_probabilities(load_agent(run_dir).net, obs, "throw")


@pytest.mark.parametrize(
    ("extra", "exploitable"),
    [([], False), (["selfplay.opponent=entityrl.envs.rps_duel:always_rock"], True)],
    ids=["self-play", "fixed opponent"],
)
def test_rock_paper_scissors_self_play_ends_near_the_equilibrium(
    tmp_path: Path, extra: list[str], exploitable: bool
) -> None:
    # The same entropy weight against a fixed always-rock player leans to paper: the
    # equilibrium comes from playing itself, not from the entropy alone.
    config = load_config(
        "RockPaperScissorsDuel",
        [*QUIET, "total_timesteps=16384", f"log.run_dir={tmp_path}", *extra],
    )
    Trainer(config).run()
    strategy = rps_strategy(tmp_path)
    if exploitable:
        assert strategy[1] > 0.5 and exploitability(strategy, PAYOFF) > 0.3
    else:
        assert exploitability(strategy, PAYOFF) <= 0.05


@pytest.mark.parametrize(
    ("game", "function"),
    [
        ("CoinDuel", "coin_duel_heuristic"),
        ("CoinDuel", "coin_duel_hunter"),
        ("PackHunt", "pack_hunt_baseline"),
        ("GuardedExit", "guarded_exit_baseline"),
    ],
)
def test_scripted_players_make_legal_moves_in_batched_games(game: str, function: str) -> None:
    # Every move passes the batch's mask checks (a stunned CoinDuel player may only stay).
    env = make_vec(game, 8, seed=0)
    scripted = ScriptedPlayer(import_function(f"entityrl.envs.players:{function}"), env)
    result = play_match(scripted, RandomPlayer(env.action_space, seed=0), env, games=24)
    assert result.games == 24


def matrix_nash_conv(run_dir: Path) -> float:
    agent = load_agent(run_dir)
    with make_eval_env(agent) as env:
        return matrix_game_nash_conv(agent.net, env, "MatrixGame").total


SMALL = ["net.d_model=16", "net.n_layer=1", "rollout.num_envs=64", "rollout.steps=8",
         "optim.bs=256"]  # fmt: skip
MAGNET = ["selfplay.mode=magnet", "ppo.ent_coef=0", "ppo.norm_adv=false", *SMALL]


@pytest.mark.parametrize(
    ("extra", "converges"),
    [(MAGNET, True), (["selfplay.mode=pool", *SMALL], False)],
    ids=["magnet", "pool"],
)
def test_magnetic_self_play_finds_a_skewed_mixed_equilibrium_of_both_seats(
    tmp_path: Path, extra: list[str], converges: bool
) -> None:
    # Equilibrium: both seats play (0.4, 0.6) (NashConv 0; uniform play: 0.5). The pool
    # chases best responses to snapshots and ends near a pure strategy (about 1.1); the
    # magnet's policy ends near the equilibrium (about 0.08).
    payoff = "env.kwargs={payoff: [[2.0, -1.0], [-1.0, 1.0]]}"
    overrides = [payoff, "total_timesteps=40000", f"log.run_dir={tmp_path}", *extra]
    Trainer(config(tmp_path, "env.id=MatrixGame", *overrides)).run()
    if converges:
        assert matrix_nash_conv(tmp_path) <= 0.1
    else:
        assert matrix_nash_conv(tmp_path) > 0.3


def test_each_seat_of_a_game_with_unequal_choices_learns_its_own_strategy(tmp_path: Path) -> None:
    # The row player's third choice dominates; the column player has two choices.
    payoff = "env.kwargs={payoff: [[0.0, 0.0], [1.0, -1.0], [1.0, 1.0]]}"
    overrides = [payoff, "total_timesteps=16384", f"log.run_dir={tmp_path}", *MAGNET]
    Trainer(config(tmp_path, "env.id=MatrixGame", *overrides)).run()
    agent = load_agent(tmp_path)
    obs = make_vec("MatrixGame", 1, seed=0, payoff=[[0, 0], [1, -1], [1, 1]]).reset()
    column = choice_probabilities(agent.net, obs.take(np.array([1])), "choice")
    assert column[2] == pytest.approx(0.0, abs=1e-6)  # masked
    assert choice_probabilities(agent.net, obs.take(np.array([0])), "choice")[2] > 0.9


def test_a_resumed_magnetic_self_play_run_continues_exactly(tmp_path: Path) -> None:
    extra = ["total_timesteps=2048", "selfplay.mode=magnet"]
    Trainer(config(tmp_path / "whole", *extra), Bigger).run()
    Trainer(config(tmp_path / "parts", *extra), Bigger, callbacks=[StopAfter(4)]).run()
    Trainer(config(tmp_path / "parts", *extra), Bigger, resume=tmp_path / "parts").run()
    a, b = load_checkpoint(tmp_path / "whole"), load_checkpoint(tmp_path / "parts")
    for name, value in a["model"].items():
        assert value.allclose(b["model"][name], atol=1e-6), name
    assert a["owned"][0]["magnet"].keys() == a["model"].keys()
    for name, value in a["owned"][0]["magnet"].items():
        assert value.allclose(b["owned"][0]["magnet"][name], atol=1e-6), name


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["selfplay.learner_players=[0]"], "must be empty, got '' and \\['0'\\]"),
        (["net.memory=true"], "cannot train net.memory"),
        (
            ["selfplay.magnet_rate=0"],
            r"magnet_rate must be in \(0, 1\) \(at 1 the magnet is the policy and pulls nowhere\), "
            "got 0",
        ),
        (
            ["selfplay.mode=league"],
            r"mode must be one of \['pool', 'magnet', 'nfsp'\], got 'league'",
        ),
    ],
    ids=["learner players", "memory", "rate", "mode"],
)
def test_magnet_settings_it_cannot_run_are_named(tmp_path: Path, extra, message) -> None:
    with pytest.raises((ConfigError, ValueError), match=message):
        Trainer(config(tmp_path, "selfplay.mode=magnet", *extra), Bigger)


def first_choice(obs: Observation) -> dict[str, CategoricalAction]:
    return {"choice": CategoricalAction([("Player", 0)], np.array([0]))}


def test_a_match_reports_the_mean_return_of_each_side_per_seat() -> None:
    # Both always pick their first choice: the row player wins 0.5 every game.
    env = make_vec("MatrixGame", 4, seed=0, payoff=[[0.5, 1.0], [-1.0, 0.0]])
    player = ScriptedPlayer(first_choice, env)
    opponent = ScriptedPlayer(first_choice, env)
    result = play_match(player, opponent, env, games=8)
    assert result.wins + result.losses == 8 and set(result.seats) == {"row", "column"}
    assert (result.seats["row"].games, result.seats["column"].games) == (4, 4)
    assert (result.seats["row"].payoff, result.seats["row"].opponent_payoff) == (0.5, -0.5)
    assert (result.seats["column"].payoff, result.seats["column"].opponent_payoff) == (-0.5, 0.5)
    assert "as 'row' (4 games) mean return +0.5, the opponent's -0.5" in result.summary()
    only_column = play_match(player, opponent, env, games=4, seats=[1])
    assert list(only_column.seats) == ["column"] and only_column.losses == 4


def test_the_magnet_penalizes_only_leaving_it_and_follows_a_fraction_of_the_way() -> None:
    env = make_vec("MatrixGame", 64, seed=0, game=1)
    net = network(env)  # type: ignore[arg-type]
    magnet = Magnet(net, coef=0.5, rate=0.25)
    penalty = magnet.penalty(PlayerSampler(env, net, steps=2).collect())  # type: ignore[arg-type]
    assert penalty.shape == (2, 128)
    np.testing.assert_allclose(penalty, 0.0, atol=1e-5)  # the magnet is the policy
    before = [p.detach().clone() for p in magnet.net.parameters()]
    with torch.no_grad():
        net.heads["choice"].proj.bias.add_(torch.tensor([4.0, 0.0, 0.0]))
    # The policy now nearly always picks 0: the penalty is coef * KL(policy || magnet) on
    # average, far above 0.
    penalty = magnet.penalty(PlayerSampler(env, net, steps=2).collect())  # type: ignore[arg-type]
    assert penalty.mean() > 0.5 * 0.5
    magnet.follow(net)
    for (name, old), new in zip(
        zip([n for n, _ in net.named_parameters()], before, strict=True),
        magnet.net.parameters(),
        strict=True,
    ):
        shift = 0.25 * torch.tensor([4.0, 0.0, 0.0]) if name == "heads.choice.proj.bias" else 0
        torch.testing.assert_close(new, old + shift)
