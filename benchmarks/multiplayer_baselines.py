"""Win rates of the scripted players of the multi-player environments, the return of the
cooperative baseline, and the time the environments take per step: the figures stated in
the environments' docstrings. Writes its section of RESULTS.md.

Each match plays ``--games`` games from ``--seed``, the two players swapping seats every game
(the first named plays seat "0" in even games); shown as wins/draws/losses of the first
named, with the Elo difference they imply (95% interval). Step times: the median over
``--repeats`` runs of the mean time of ``act`` (all players' moves of one game) under
scripted play.

usage: python benchmarks/multiplayer_baselines.py [--games 2000] [--seed 0] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _peer import machine
from results import replace_section

from entityrl.env.multiplayer import MultiPlayerEnvironment
from entityrl.envs.coin_duel import CoinDuel
from entityrl.envs.guarded_exit import GuardedExit
from entityrl.envs.pack_hunt import PackHunt
from entityrl.envs.players import (
    ScriptedFunction,
    coin_duel_heuristic,
    coin_duel_hunter,
    guarded_exit_baseline,
    pack_hunt_baseline,
    play_game,
    uniform_random,
)
from entityrl.training.elo import elo_difference

TITLE = "Multi-player games: scripted baselines (benchmarks/multiplayer_baselines.py)"


def match(
    env: MultiPlayerEnvironment, first: ScriptedFunction, second: ScriptedFunction, games: int
) -> tuple[int, int, int]:
    """Wins, draws and losses of ``first`` against ``second`` (seats alternating)."""
    results = [0, 0, 0]
    for game in range(games):
        seat, other = ("0", "1") if game % 2 == 0 else ("1", "0")
        outcome = play_game(env, {seat: first, other: second})[seat]
        # A game's return is its outcome (+1, 0, -1) plus a zero-sum shaping below 1 in size.
        results[0 if outcome > 0.5 else 2 if outcome < -0.5 else 1] += 1
    return results[0], results[1], results[2]


def match_row(name: str, wins: int, draws: int, losses: int) -> str:
    games = wins + draws + losses
    diff, low, high = elo_difference(wins, draws, losses)
    return (
        f"| {name} | {wins}/{draws}/{losses} | {wins / games:.1%} | {draws / games:.1%} "
        f"| {diff:+.0f} [{low:+.0f}, {high:+.0f}] |"
    )


def team_return(env: MultiPlayerEnvironment, player: ScriptedFunction, games: int) -> list[float]:
    """The return of the first player in each game, every player acting by ``player``."""
    seats = dict.fromkeys(env.players(), player)
    return [play_game(env, seats)[env.players()[0]] for _ in range(games)]


def microseconds_per_step(
    env: MultiPlayerEnvironment, player: ScriptedFunction, games: int, seed: int
) -> float:
    """The mean time of one ``act`` (the players' moves excluded), in microseconds."""
    env.seed(seed)
    spent, steps = 0.0, 0
    for _ in range(games):
        latest = env.reset()
        while in_play := [p for p, obs in latest.items() if not obs.done]:
            actions = {p: player(latest[p]) for p in in_play}
            start = time.perf_counter()
            latest.update(env.act(actions))
            spent += time.perf_counter() - start
            steps += 1
    return spent / steps * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    duel = CoinDuel()
    random_player = uniform_random(duel.obs_space(), duel.action_space(), seed=args.seed)
    pairs = {
        "heuristic vs random": (coin_duel_heuristic, random_player),
        "heuristic vs heuristic": (coin_duel_heuristic, coin_duel_heuristic),
        "hunter vs heuristic": (coin_duel_hunter, coin_duel_heuristic),
        "random vs random": (random_player, random_player),
    }
    lines = [
        f"CoinDuel, default arguments, {args.games} games from seed {args.seed}, seats "
        "alternating:",
        "",
        "| match | wins/draws/losses | win | draw | Elo difference [95%] |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, (first, second) in pairs.items():
        duel.seed(args.seed)
        lines.append(match_row(name, *match(duel, first, second, args.games)))
        print(lines[-1], flush=True)

    cooperative = {
        "PackHunt": (PackHunt(), pack_hunt_baseline, "return per hunter"),
        "GuardedExit": (GuardedExit(), guarded_exit_baseline, "games escaped"),
    }
    for name, (env, baseline, measure) in cooperative.items():
        random_member = uniform_random(env.obs_space(), env.action_space(), seed=args.seed)
        lines += [
            "",
            f"{name}, default arguments, {args.games} games from seed {args.seed}:",
            "",
            f"| players | {measure} (mean +- standard error) |",
            "| --- | --- |",
        ]
        for kind, player in {"baseline": baseline, "random": random_member}.items():
            env.seed(args.seed)
            returns = team_return(env, player, args.games)
            error = statistics.stdev(returns) / len(returns) ** 0.5
            lines.append(f"| {kind} | {statistics.mean(returns):.3f} +- {error:.3f} |")
            print(lines[-1], flush=True)

    lines += ["", "| environment | microseconds per act (median of runs) |", "| --- | --- |"]
    scripted = [(duel, coin_duel_heuristic)] + [
        (env, play) for env, play, _ in cooperative.values()
    ]
    for env, player in scripted:
        runs = [microseconds_per_step(env, player, 500, args.seed) for _ in range(args.repeats)]
        lines.append(f"| {type(env).__name__} | {statistics.median(runs):.1f} |")
        print(lines[-1], flush=True)

    command = "python benchmarks/multiplayer_baselines.py " + " ".join(sys.argv[1:])
    replace_section(TITLE, f"`{command.strip()}` on {machine()}.\n\n" + "\n".join(lines))


if __name__ == "__main__":
    main()
