"""Win rates of the scripted players of the multi-player environments, and the return of the
cooperative baseline: the figures stated in the environments' docstrings.

Each match plays ``--games`` games from ``--seed``, the two players swapping seats every game
(the first named plays seat "0" in even games); printed as wins/draws/losses of the first
named, with the Elo difference they imply (95% interval).

usage: python benchmarks/multiplayer_baselines.py [--games 2000] [--seed 0]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from entityrl.env.multiplayer import MultiPlayerEnvironment
from entityrl.envs.coin_duel import CoinDuel
from entityrl.envs.pack_hunt import PackHunt
from entityrl.envs.players import (
    RandomPlayer,
    ScriptedPlayer,
    coin_duel_heuristic,
    coin_duel_hunter,
    pack_hunt_baseline,
    play_game,
)
from entityrl.training.elo import elo_difference


def match(
    env: MultiPlayerEnvironment, first: ScriptedPlayer, second: ScriptedPlayer, games: int
) -> tuple[int, int, int]:
    """Wins, draws and losses of ``first`` against ``second`` (seats alternating)."""
    results = [0, 0, 0]
    for game in range(games):
        seat = ("0", "1")[game % 2]
        other = ("1", "0")[game % 2]
        outcome = play_game(env, {seat: first, other: second})[seat]
        # A game's return is its outcome (+1, 0, -1) plus a zero-sum shaping below 1 in size.
        results[0 if outcome > 0.5 else 2 if outcome < -0.5 else 1] += 1
    return results[0], results[1], results[2]


def report(name: str, wins: int, draws: int, losses: int) -> None:
    games = wins + draws + losses
    diff, low, high = elo_difference(wins, draws, losses)
    print(
        f"{name:<34} {wins:>5}/{draws:>5}/{losses:>5}  win {wins / games:6.1%}  "
        f"draw {draws / games:6.1%}  Elo {diff:+7.0f} [{low:+.0f}, {high:+.0f}]"
    )


def team_return(env: MultiPlayerEnvironment, player: ScriptedPlayer, games: int) -> list[float]:
    """The return of the first player in each game, every player acting by ``player``."""
    seats = dict.fromkeys(env.players(), player)
    return [play_game(env, seats)[env.players()[0]] for _ in range(games)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    print(f"CoinDuel (defaults), {args.games} games, seed {args.seed}: wins/draws/losses")
    env = CoinDuel()
    random_player = RandomPlayer(env.obs_space(), env.action_space(), seed=args.seed)
    pairs = {
        "heuristic vs random": (coin_duel_heuristic, random_player),
        "heuristic vs heuristic": (coin_duel_heuristic, coin_duel_heuristic),
        "hunter vs heuristic": (coin_duel_hunter, coin_duel_heuristic),
        "random vs random": (random_player, random_player),
    }
    for name, (first, second) in pairs.items():
        env.seed(args.seed)
        report(name, *match(env, first, second, args.games))

    print(f"\nPackHunt (defaults), {args.games} games, seed {args.seed}: return per hunter")
    hunt = PackHunt()
    random_hunter = RandomPlayer(hunt.obs_space(), hunt.action_space(), seed=args.seed)
    for name, player in {"baseline": pack_hunt_baseline, "random": random_hunter}.items():
        hunt.seed(args.seed)
        returns = team_return(hunt, player, args.games)
        print(
            f"{name:<34} mean {statistics.mean(returns):.3f} +- {statistics.stdev(returns) / len(returns) ** 0.5:.3f}"
        )


if __name__ == "__main__":
    main()
