"""Every multi-player example game keeps the contract of MultiPlayerEnvironment under random
and scripted play (checked here and by ValidatingMultiPlayer), plays in a vectorized batch,
and refuses joint moves that break it."""

from __future__ import annotations

import numpy as np
import pytest

from entityrl.env import RandomPolicy
from entityrl.env.multiplayer import MultiPlayerEnvironment
from entityrl.env.multiplayer_validator import ValidatingMultiPlayer
from entityrl.envs import lookup, make, make_vec, names
from entityrl.envs.players import (
    ScriptedFunction,
    coin_duel_heuristic,
    guarded_exit_baseline,
    pack_hunt_baseline,
    uniform_random,
)

MULTIPLAYER = [n for n in names() if issubclass(lookup(n), MultiPlayerEnvironment)]
SCRIPTED: dict[str, ScriptedFunction] = {
    "CoinDuel": coin_duel_heuristic,
    "PackHunt": pack_hunt_baseline,
    "GuardedExit": guarded_exit_baseline,
}
MAX_GAME_STEPS = {
    "MatrixGame": 1,
    "RockPaperScissorsDuel": 1,
    "CoinDuel": 30,
    "PackHunt": 50,
    "GuardedExit": 30,
    "Lanes": 20,
}


def test_the_six_games_are_registered() -> None:
    assert sorted(MULTIPLAYER) == [
        "CoinDuel", "GuardedExit", "Lanes", "MatrixGame", "PackHunt", "RockPaperScissorsDuel",
    ]  # fmt: skip


def play_checked(env: MultiPlayerEnvironment, seats: dict[str, ScriptedFunction]) -> int:
    """Play one game, checking the contract at every step; the number of steps."""
    players = list(env.players())
    latest = env.reset()
    assert list(latest) == players, "reset gives every player an observation"
    assert not any(obs.done for obs in latest.values())
    in_play = set(players)
    steps = 0
    while in_play:
        latest = env.act({p: seats[p](latest[p]) for p in sorted(in_play)})
        steps += 1
        assert set(latest) == in_play, "act answers exactly the players in play"
        in_play = {p for p, obs in latest.items() if not obs.done}
    return steps


@pytest.mark.parametrize("name", MULTIPLAYER)
@pytest.mark.parametrize("scripted", [False, True])
def test_games_keep_the_contract_and_end_in_time(name: str, scripted: bool) -> None:
    game = make(name)
    assert isinstance(game, MultiPlayerEnvironment)
    env = ValidatingMultiPlayer(game)  # observations, actions and groups against the contract
    env.seed(0)
    if scripted and name in SCRIPTED:
        seats = dict.fromkeys(env.players(), SCRIPTED[name])
    else:
        seats = {
            p: uniform_random(env.obs_space(), env.action_space(), seed=i)
            for i, p in enumerate(env.players())
        }
    for _ in range(20):
        assert 1 <= play_checked(env, seats) <= MAX_GAME_STEPS[name]


@pytest.mark.parametrize("name", MULTIPLAYER)
def test_games_play_in_a_validated_batch(name: str) -> None:
    with make_vec(name, 3, seed=0, validate=True) as env:
        policy = RandomPolicy(env.action_space, seed=0)
        obs = env.reset()
        ended = 0
        for _ in range(120):
            obs = env.act(policy.act(obs))
            assert np.isfinite(obs.reward).all()
            ended += int(obs.done.sum())
    assert ended >= 3 * len(make(name).players())


@pytest.mark.parametrize("name", MULTIPLAYER)
def test_act_refuses_players_not_in_play_and_missing_ones(name: str) -> None:
    env = make(name)
    env.seed(1)
    first = env.reset()
    random = uniform_random(env.obs_space(), env.action_space(), seed=0)
    moves = {p: random(obs) for p, obs in first.items()}
    players = list(env.players())
    with pytest.raises(ValueError, match=rf"{name}\.act: .*not in play: \['stranger'\]"):
        env.act({**moves, "stranger": moves[players[0]]})
    with pytest.raises(ValueError, match=rf"missing: \['{players[-1]}'\]"):
        env.act({p: m for p, m in moves.items() if p != players[-1]})


@pytest.mark.parametrize("name", MULTIPLAYER)
def test_act_after_the_game_ended_asks_for_reset(name: str) -> None:
    env = make(name)
    env.seed(2)
    random = uniform_random(env.obs_space(), env.action_space(), seed=0)
    latest = env.reset()
    while in_play := [p for p, obs in latest.items() if not obs.done]:
        latest = env.act({p: random(latest[p]) for p in in_play})
    with pytest.raises(ValueError, match=rf"{name}\.act: the game is over .*call reset\(\)"):
        env.act({p: random(obs) for p, obs in latest.items()})


@pytest.mark.parametrize("name", MULTIPLAYER)
def test_a_seed_fixes_the_games(name: str) -> None:
    def renders(seed: int) -> list[str]:
        env = make(name)
        env.seed(seed)
        random = uniform_random(env.obs_space(), env.action_space(), seed=seed)
        pictures = []
        for _ in range(5):
            latest = env.reset()
            while in_play := [p for p, obs in latest.items() if not obs.done]:
                latest = env.act({p: random(latest[p]) for p in in_play})
                pictures.append(env.render())
        return pictures

    assert renders(3) == renders(3)
    assert renders(3) != renders(4)
