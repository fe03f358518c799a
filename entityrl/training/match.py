"""Matches in multi-player games: a player against opponents, scored game by game.

A game is scored from one side (the player's seats against the opponents'): 1 if the best
return among its seats beats the best among the opponents', 0.5 on a tie, else 0.
:func:`play_match` plays a number of complete games and reports wins, draws and losses with
the Elo difference they imply (:func:`entityrl.training.elo.elo_difference`), and the mean
return of each side per seat the player took (the measure of a game scored by payoff, such as
a matrix game, where winning more games is not winning more); :func:`play_games` gives the
games' results one by one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

import numpy as np
import numpy.typing as npt

from entityrl.env.multiplayer_vec import MultiPlayerVecEnv
from entityrl.training.agent import load_agent
from entityrl.training.elo import elo_difference
from entityrl.training.players import (
    NetworkPlayer,
    Player,
    PlayerStates,
    RandomPlayer,
    ScriptedPlayer,
    Seating,
    episode_over,
    import_function,
    merge_actions,
)

T = TypeVar("T")


@dataclass
class GameResult:
    """One finished game from the side of the seats owned by -1: its score against the
    opponent (index into the seating's opponents) that played the other seats, the first seat
    the side played, and the mean return of the side's seats and of the opponent's."""

    opponent: int
    score: float
    seat: int
    payoff: float
    opponent_payoff: float


def score_games(
    owner: npt.NDArray[np.int64], returns: npt.NDArray[np.float64], players: int
) -> list[GameResult]:
    """Score ended games: ``owner`` and ``returns`` per row of the ended games (game-major,
    ``players`` rows each). Games without both sides are not scored."""
    results = []
    for game_owner, game_returns in zip(
        owner.reshape(-1, players), returns.reshape(-1, players), strict=True
    ):
        theirs = game_owner >= 0
        if theirs.all() or not theirs.any():
            continue
        mine_best, theirs_best = game_returns[~theirs].max(), game_returns[theirs].max()
        score = 1.0 if mine_best > theirs_best else 0.5 if mine_best == theirs_best else 0.0
        results.append(
            GameResult(
                int(game_owner[theirs][0]),
                score,
                int(np.flatnonzero(~theirs)[0]),
                float(game_returns[~theirs].mean()),
                float(game_returns[theirs].mean()),
            )
        )
    return results


@dataclass
class SeatPayoff:
    """The mean return of the player, and of its opponent, over the games in which the player
    took one seat."""

    games: int
    payoff: float
    opponent_payoff: float


@dataclass
class MatchResult:
    """Wins, draws and losses of the player over the games of a match, and its mean payoff by
    the seat it played (the player's name; empty for a result made of counts alone)."""

    wins: int
    draws: int
    losses: int
    seats: dict[str, SeatPayoff] = field(default_factory=dict)

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    @property
    def score(self) -> float:
        """Mean score per game (win 1, draw 0.5)."""
        return (self.wins + 0.5 * self.draws) / self.games

    def elo(self) -> tuple[float, float, float]:
        """The Elo difference the match implies, with its 95% interval: (diff, low, high)."""
        return elo_difference(self.wins, self.draws, self.losses)

    def summary(self) -> str:
        diff, low, high = self.elo()
        payoffs = "".join(
            f"; as {seat!r} ({p.games} games) mean return {p.payoff:+.4g}, the opponent's "
            f"{p.opponent_payoff:+.4g}"
            for seat, p in self.seats.items()
        )
        return (
            f"{self.games} games: won {self.wins / self.games:.1%}, drew "
            f"{self.draws / self.games:.1%}, lost {self.losses / self.games:.1%}; "
            f"Elo difference {diff:+.0f} (95% interval {low:+.0f} to {high:+.0f}){payoffs}"
        )


def play_match(
    player: Player,
    opponent: Player,
    env: MultiPlayerVecEnv,
    games: int,
    seats: list[int] | None = None,
    max_steps: int = 100_000,
) -> MatchResult:
    """``games`` complete games of ``player`` (one seat per game, taking ``seats`` in turn,
    every seat by default) against ``opponent`` (every other seat) in ``env``, tallied
    (:func:`play_games` plays them)."""
    results = play_games(player, opponent, env, games, seats, max_steps)
    scores = np.array([r.score for r in results])
    by_seat = {
        seat: [r for r in results if r.seat == seat] for seat in sorted({r.seat for r in results})
    }
    return MatchResult(
        int((scores == 1).sum()),
        int((scores == 0.5).sum()),
        int((scores == 0).sum()),
        {
            env.players[seat]: SeatPayoff(
                len(played),
                float(np.mean([r.payoff for r in played])),
                float(np.mean([r.opponent_payoff for r in played])),
            )
            for seat, played in by_seat.items()
        },
    )


def play_games(
    player: Player,
    opponent: Player,
    env: MultiPlayerVecEnv,
    games: int,
    seats: list[int] | None = None,
    max_steps: int = 100_000,
) -> list[GameResult]:
    """The results of ``games`` complete games of ``player`` (one seat per game, taking
    ``seats`` in turn, every seat by default) against ``opponent`` (every other seat) in
    ``env``, game by game. Each carries its state (a network's memory) of its rows from step
    to step, afresh in every game."""
    if games < 1:
        raise ValueError(f"games must be >= 1, got {games}")
    players = len(env.players)
    seats = list(range(players)) if seats is None else seats
    owner = np.zeros((env.num_games, players), dtype=np.int64)
    owner[np.arange(env.num_games), np.array(seats)[np.arange(env.num_games) % len(seats)]] = -1
    seating = Seating(owner.reshape(-1), [opponent])
    mine, theirs = seating.learner_rows, np.flatnonzero(seating.owner >= 0)
    states = PlayerStates(env.num_envs)
    obs = env.reset()
    tally = GameSlots[GameResult](env.num_games, games)
    for _ in range(max_steps):
        a = states.act(player, obs.take(mine), mine)
        b = states.act(opponent, obs.take(theirs), theirs)
        after = env.act(merge_actions([(mine, a), (theirs, b)], env.num_envs))
        states.restart(episode_over(obs, after))
        obs = after
        if obs.game_over is not None and obs.game_over.any():
            ended = np.flatnonzero(obs.game_over)
            scored = score_games(seating.owner[ended], obs.metrics["episode_return"], players)
            # Every game has both sides here, so the scores line up with the games.
            for slot, result in zip(ended[::players] // players, scored, strict=True):
                tally.add(int(slot), result)
            if tally.full():
                return tally.results()
    raise unfinished("the match", games, max_steps)


def load_opponent(
    spec: str, env: MultiPlayerVecEnv, seed: int, deterministic: bool = False
) -> Player:
    """The opponent ``spec`` names: ``random``, a scripted player ``module:function``, or a
    trained agent (a run directory or checkpoint file) for the same spaces."""
    if spec == "random":
        return RandomPlayer(env.action_space, seed)
    if ":" in spec and not Path(spec).exists():
        return ScriptedPlayer(import_function(spec), env)
    agent = load_agent(spec, deterministic=deterministic, seed=seed + 1)
    agent.check_env(env)
    return NetworkPlayer(agent.net, agent.generator, deterministic=deterministic)


def play_group(
    player: Player, env: MultiPlayerVecEnv, games: int, max_steps: int = 100_000
) -> npt.NDArray[np.float64]:
    """The return of each game's group (that of its first player: the sum of the group's
    rewards, those paid after players left included) over ``games`` complete games of a
    cooperative game, ``player`` in every seat."""
    if games < 1:
        raise ValueError(f"games must be >= 1, got {games}")
    first = np.arange(0, env.num_envs, len(env.players))
    rows = np.arange(env.num_envs)
    states = PlayerStates(env.num_envs)
    obs = env.reset()
    running = np.zeros(env.num_games)
    tally = GameSlots[float](env.num_games, games)
    for _ in range(max_steps):
        after = env.act(states.act(player, obs, rows))
        states.restart(episode_over(obs, after))
        obs = after
        assert obs.group_reward is not None, "multi-player batches carry group rewards"
        running += obs.group_reward[first]
        if obs.game_over is not None and obs.game_over.any():
            for slot in np.flatnonzero(obs.game_over[first]).tolist():
                tally.add(slot, float(running[slot]))
                running[slot] = 0.0
            if tally.full():
                return np.array(tally.results())
    raise unfinished("the group", games, max_steps)


class GameSlots(Generic[T]):
    """The results of ``games`` complete games played in ``slots`` parallel game slots.

    Short games end first, so the first ``games`` games to end over-represent them; instead
    every slot used contributes its first games, whatever their lengths (each slot's games
    follow one another, so its first ``k`` are a fair sample)."""

    def __init__(self, slots: int, games: int) -> None:
        self.per_game = -(-games // slots)  # games taken from each slot used
        self.slots = -(-games // self.per_game)  # slots used
        self.games = games
        self.results_by_slot: list[list[T]] = [[] for _ in range(slots)]

    def add(self, slot: int, result: T) -> None:
        self.results_by_slot[slot].append(result)

    def full(self) -> bool:
        return all(len(r) >= self.per_game for r in self.results_by_slot[: self.slots])

    def results(self) -> list[T]:
        taken = [r[: self.per_game] for r in self.results_by_slot[: self.slots]]
        return [result for slot in taken for result in slot][: self.games]


def unfinished(what: str, games: int, max_steps: int) -> ValueError:
    return ValueError(
        f"{what} did not finish {games} games in {max_steps:,} steps: under these players the "
        "game may never end"
    )
