"""OpenSpiel games as multi-player games, and OpenSpiel's exact exploitability of entityrl
policies."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pyspiel")

import pyspiel
import torch
from open_spiel.python import policy as openspiel_policy
from open_spiel.python.algorithms import cfr
from open_spiel.python.algorithms import exploitability as openspiel_exploitability

from entityrl.algorithms.common.optimizer import OptimConfig, adam
from entityrl.algorithms.self_play.meta_game import saved_mixture
from entityrl.cli.main import main
from entityrl.env import Batcher, GlobalCategoricalAction, RandomPolicy
from entityrl.envs import make_vec
from entityrl.interop import openspiel
from entityrl.interop.openspiel import (
    GameTooLargeError,
    OpenSpielGame,
    UnsupportedGameError,
    exploitability,
    mixture_exploitability,
    policy_table,
)
from entityrl.nn.rogue_net import RogueNet, RogueNetConfig
from entityrl.training import load_agent, train
from entityrl.training.checkpoint import load_checkpoint


def net_for(game: str, seed: int = 0) -> RogueNet:
    env = OpenSpielGame(game)
    torch.manual_seed(seed)
    return RogueNet(env.obs_space(), env.action_space(), RogueNetConfig(d_model=16, n_layer=1))


def play_randomly(env: OpenSpielGame, seed: int) -> list[tuple[object, dict]]:
    """One game with random legal moves: (OpenSpiel state before the move, observations)."""
    rng = np.random.default_rng(seed)
    latest = env.reset()
    steps = []
    while not all(obs.done for obs in latest.values()):
        steps.append((env.state.clone(), latest))
        actions = {}
        for name, obs in latest.items():
            if "action" in obs.actions:
                choice = int(rng.choice(np.flatnonzero(obs.actions["action"].mask)))
                actions[name] = {"action": GlobalCategoricalAction(choice, str(choice))}
            else:
                actions[name] = {}
        latest = env.act(actions)
    steps.append((env.state.clone(), latest))
    return steps


@pytest.mark.parametrize(
    "game", ["kuhn_poker", "leduc_poker", "tic_tac_toe", "matrix_rps", "goofspiel"]
)
def test_games_pass_the_multiplayer_validator(game: str) -> None:
    env = make_vec(f"openspiel:{game}", 3, seed=0, validate=True)
    policy = RandomPolicy(env.action_space, seed=0)
    obs, ended = env.reset(), 0
    for _ in range(60):
        obs = env.act(policy.act(obs))
        ended += int(obs.done.sum())
    env.close()
    assert ended > 0


@pytest.mark.parametrize("game", ["kuhn_poker", "leduc_poker", "tic_tac_toe"])
def test_the_mover_masks_exactly_the_legal_actions_and_returns_add_up(game: str) -> None:
    env = OpenSpielGame(game)
    for seed in range(5):
        env.seed(seed)
        totals = np.zeros(2)
        steps = play_randomly(env, seed)
        for state, observations in steps:
            assert not state.is_chance_node()  # chance is resolved inside the environment
            for p, name in enumerate(env.players()):
                obs = observations[name]
                totals[p] += obs.reward
                if not state.is_terminal() and p == state.current_player():
                    np.testing.assert_array_equal(
                        obs.actions["action"].mask, np.array(state.legal_actions_mask(p), bool)
                    )
                else:
                    assert obs.actions == {}
                assert obs.done == state.is_terminal()
        final = steps[-1][0]
        assert final.is_terminal()
        np.testing.assert_allclose(totals, final.returns())


def test_a_player_observes_its_own_information_state() -> None:
    env = OpenSpielGame("kuhn_poker")
    env.seed(3)
    observations = env.reset()
    for p, name in enumerate(env.players()):
        features = observations[name].global_features
        np.testing.assert_array_equal(features[:11], env.state.information_state_tensor(p))
        np.testing.assert_array_equal(features[11:], np.eye(2)[p])
    assert env.obs_space().global_features[0] == "info[0]"
    assert OpenSpielGame("tic_tac_toe").obs_space().global_features[0] == "obs[0]"


def test_chance_outcomes_follow_the_seeded_generator() -> None:
    env = OpenSpielGame("kuhn_poker")
    deals = []
    for seed in range(600):
        env.seed(seed)
        env.reset()
        deals.append(tuple(env.state.history()))
    env.seed(7)
    env.reset()
    assert tuple(env.state.history()) == deals[7]
    # Six deals of three cards to two players, each with probability 1/6.
    counts = np.unique(np.array(deals), axis=0, return_counts=True)[1]
    assert len(counts) == 6
    assert counts.min() > 70 and counts.max() < 130


def test_simultaneous_moves_are_applied_together() -> None:
    env = OpenSpielGame("matrix_rps")
    env.reset()
    rock, paper = (GlobalCategoricalAction(i, str(i)) for i in (0, 1))
    result = env.act({"player_0": {"action": rock}, "player_1": {"action": paper}})
    assert [result[p].reward for p in env.players()] == [-1.0, 1.0]
    assert all(obs.done for obs in result.values())


@pytest.mark.parametrize(
    ("game", "missing"),
    [
        ("mfg_crowd_modelling", "expected turn-based or simultaneous moves, got MEAN_FIELD"),
        ("negotiation", "chance outcomes are sampled by OpenSpiel, not listed"),
        ("morpion_solitaire", "provides neither information_state_tensor nor observation_tensor"),
    ],
)
def test_games_that_cannot_be_mapped_are_refused_in_one_line(game: str, missing: str) -> None:
    with pytest.raises(UnsupportedGameError, match=missing) as caught:
        OpenSpielGame(game)
    assert "\n" not in str(caught.value)


def test_unknown_games_and_parameters_are_named() -> None:
    with pytest.raises(KeyError, match=r"no game 'kuhn_pokr'\. Did you mean kuhn_poker"):
        make_vec("openspiel:kuhn_pokr", 1)
    with pytest.raises(UnsupportedGameError, match="refused the parameters"):
        OpenSpielGame("kuhn_poker", players=1)


def test_uniform_policy_has_openspiel_s_exploitability() -> None:
    game = pyspiel.load_game("kuhn_poker")
    net = net_for("kuhn_poker")
    with torch.no_grad():
        for param in net.heads.parameters():
            param.zero_()  # every logit 0: uniform over the legal actions
    expected = openspiel_exploitability.exploitability(
        game, openspiel_policy.UniformRandomPolicy(game)
    )
    assert exploitability(net, "openspiel:kuhn_poker") == pytest.approx(expected, abs=1e-9)
    assert expected == pytest.approx(0.4583, abs=1e-4)


def test_a_policy_fitted_to_an_equilibrium_is_not_exploitable() -> None:
    game = pyspiel.load_game("kuhn_poker")
    solver = cfr.CFRPlusSolver(game)
    for _ in range(200):
        solver.evaluate_and_update_policy()
    equilibrium = solver.average_policy()
    assert openspiel_exploitability.exploitability(game, equilibrium) < 0.002
    # Fit the network's probabilities at every information state to the equilibrium's.
    net, env = net_for("kuhn_poker"), OpenSpielGame(game)
    states = policy_table(net, game).states
    obs = Batcher(env.obs_space(), env.action_space()).batch(
        [env.observe(state, state.current_player()) for state in states]
    )
    target = torch.tensor(
        np.array([[equilibrium.action_probabilities(s)[a] for a in (0, 1)] for s in states]),
        dtype=torch.float32,
    )
    optimizer = adam(net, OptimConfig(lr=0.01))
    for _ in range(300):
        logits = net.choice_scores(obs)["action"].scores
        loss = -(target * logits.log_softmax(-1)).sum(-1).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step(max_grad_norm=10.0)
    assert exploitability(net, game) < 0.01
    assert exploitability(net_for("kuhn_poker"), game) > 0.4  # the untrained one is


def test_a_mixture_of_policies_is_scored_as_one_drawn_per_game() -> None:
    game = pyspiel.load_game("kuhn_poker")
    a, b = net_for("kuhn_poker", seed=1), net_for("kuhn_poker", seed=2)
    with torch.no_grad():  # a passes (action 0) nearly always, b bets (action 1)
        for net, preferred in ((a, 0), (b, 1)):
            head = net.heads["action"].proj
            head.weight.zero_()
            head.bias.copy_(torch.tensor([4.0, 0.0] if preferred == 0 else [0.0, 4.0]))
    alone = exploitability(a, game), exploitability(b, game)
    assert mixture_exploitability([a, b], [1, 0], game) == pytest.approx(alone[0], abs=1e-9)
    assert mixture_exploitability([a, b], [0, 3], game) == pytest.approx(alone[1], abs=1e-9)
    # A best response gains against a mixture at most the mixture of its gains against each.
    mixed = mixture_exploitability([a, b], [0.5, 0.5], game)
    assert mixed < 0.5 * (alone[0] + alone[1]) - 0.01
    with pytest.raises(ValueError, match=r"one non-negative weight per policy .* got 1 weights"):
        mixture_exploitability([a, b], [1.0], game)


def test_exploitability_refuses_what_it_cannot_compute(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UnsupportedGameError, match="two-player zero-sum game, got 3 players"):
        exploitability(net_for("kuhn_poker"), "kuhn_poker", players=3)
    with pytest.raises(UnsupportedGameError, match="turn-based game, got simultaneous") as caught:
        exploitability(net_for("matrix_rps"), "matrix_rps")
    assert "--exploitability --approximate" in str(caught.value)
    with pytest.raises(ValueError, match="not trained on openspiel:leduc_poker"):
        exploitability(net_for("kuhn_poker"), "leduc_poker")
    monkeypatch.setattr(openspiel, "MAX_HISTORIES", 1000)
    with pytest.raises(GameTooLargeError, match="more than 1,000 histories") as caught:
        exploitability(net_for("leduc_poker"), "leduc_poker")
    message = str(caught.value)
    assert "--exploitability --approximate" in message and "\n" not in message


def test_self_play_trains_on_kuhn_poker_from_its_registry_name(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    train(
        "openspiel:kuhn_poker",
        overrides=[f"log.run_dir={tmp_path}", "total_timesteps=4096", "seed=1",
                   "torch_threads=1", "log.tensorboard=false", "log.progress=false"],
    )  # fmt: skip
    # Uniform play is exploitable by 0.458; 4,096 steps of self-play already do better.
    value = exploitability(tmp_path, "openspiel:kuhn_poker")
    assert value < 0.35
    # The command line reports the same figure.
    capsys.readouterr()
    assert main(["eval", str(tmp_path), "--exploitability"]) == 0
    line = capsys.readouterr().out
    assert f"exploitability (NashConv/2, OpenSpiel's exact best responses) {value:.4f}" in line


def test_eval_scores_the_pool_s_nash_mixture_of_a_nash_run(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    train(
        "openspiel:kuhn_poker",
        overrides=[f"log.run_dir={tmp_path}", "total_timesteps=4096", "seed=1",
                   "torch_threads=1", "log.tensorboard=false", "log.progress=false",
                   "selfplay.opponent_mix=nash", "selfplay.play_latest=0",
                   "selfplay.snapshot_every=1024", "selfplay.meta_games=64"],
    )  # fmt: skip
    saved = load_checkpoint(tmp_path)
    nets, weights = saved_mixture(load_agent(tmp_path).net, saved)
    pool = saved["selfplay"][0]["pool"]
    assert len(pool["snapshots"]) >= 3
    # Only the snapshots weighted below 1e-4 are left out.
    assert sum(weights) == pytest.approx(1.0, abs=1e-4 * len(pool["snapshots"]))
    value = mixture_exploitability(nets, weights, "kuhn_poker")
    capsys.readouterr()
    assert main(["eval", str(tmp_path), "--exploitability"]) == 0
    out = capsys.readouterr().out
    assert f"the pool's Nash mixture ({len(nets)} snapshots, one drawn per game): " in out
    assert f"exploitability {value:.4f}" in out.splitlines()[-1]
