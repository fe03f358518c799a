"""Every multi-player example game keeps the contract of MultiPlayerEnvironment under random
and scripted play, and refuses joint moves that break it."""

from __future__ import annotations

import pytest

from entityrl.env import validate_observation
from entityrl.env.multiplayer import MultiPlayerEnvironment
from entityrl.envs import lookup, make, names
from entityrl.envs.players import (
    RandomPlayer,
    ScriptedPlayer,
    coin_duel_heuristic,
    pack_hunt_baseline,
)

MULTIPLAYER = [n for n in names() if issubclass(lookup(n), MultiPlayerEnvironment)]
SCRIPTED: dict[str, ScriptedPlayer] = {
    "CoinDuel": coin_duel_heuristic,
    "PackHunt": pack_hunt_baseline,
}
MAX_GAME_STEPS = {"RockPaperScissorsDuel": 1, "CoinDuel": 30, "PackHunt": 50}


def test_the_three_games_are_registered() -> None:
    assert sorted(MULTIPLAYER) == ["CoinDuel", "PackHunt", "RockPaperScissorsDuel"]


def play_checked(env: MultiPlayerEnvironment, seats: dict[str, ScriptedPlayer]) -> int:
    """Play one game, checking the contract at every step; the number of steps."""
    name = type(env).__name__
    players = list(env.players())
    latest = env.reset()
    assert list(latest) == players, "reset gives every player an observation"
    assert not any(obs.done for obs in latest.values())
    in_play = set(players)
    steps = 0
    while in_play:
        for obs in latest.values():
            validate_observation(obs, env.obs_space(), env.action_space(), name)
        latest = env.act({p: seats[p](latest[p]) for p in sorted(in_play)})
        steps += 1
        assert set(latest) == in_play, "act answers exactly the players in play"
        in_play = {p for p, obs in latest.items() if not obs.done}
        assert set(env.group_reward()) <= set(env.groups().values())
    for obs in latest.values():
        validate_observation(obs, env.obs_space(), env.action_space(), name)
    return steps


@pytest.mark.parametrize("name", MULTIPLAYER)
@pytest.mark.parametrize("scripted", [False, True])
def test_games_keep_the_contract_and_end_in_time(name: str, scripted: bool) -> None:
    env = make(name)
    assert isinstance(env, MultiPlayerEnvironment)
    env.seed(0)
    if scripted and name in SCRIPTED:
        seats = dict.fromkeys(env.players(), SCRIPTED[name])
    else:
        seats = {
            p: RandomPlayer(env.obs_space(), env.action_space(), seed=i)
            for i, p in enumerate(env.players())
        }
    for _ in range(20):
        assert 1 <= play_checked(env, seats) <= MAX_GAME_STEPS[name]


@pytest.mark.parametrize("name", MULTIPLAYER)
def test_act_refuses_players_not_in_play_and_missing_ones(name: str) -> None:
    env = make(name)
    env.seed(1)
    first = env.reset()
    random = RandomPlayer(env.obs_space(), env.action_space(), seed=0)
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
    random = RandomPlayer(env.obs_space(), env.action_space(), seed=0)
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
        random = RandomPlayer(env.obs_space(), env.action_space(), seed=seed)
        pictures = []
        for _ in range(5):
            latest = env.reset()
            while in_play := [p for p, obs in latest.items() if not obs.done]:
                latest = env.act({p: random(latest[p]) for p in in_play})
                pictures.append(env.render())
        return pictures

    assert renders(3) == renders(3)
    assert renders(3) != renders(4)
