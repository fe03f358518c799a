"""Multi-player games: self-play in RockPaperScissorsDuel and CoinDuel, MA-POCA against
independent PPO in PackHunt and GuardedExit, and the multi-player rollout's throughput.

- ``rps``: per seed, self-play with the shipped config, then the exploitability of the learned
  policy (exact: the best response's expected payoff against its throw probabilities). Two
  controls: the same entropy weight against a fixed always-rock player, and self-play with
  the default entropy weight (0.01).
- ``duel``: per seed, CoinDuel by self-play with the shipped config; the agent's win, draw and
  loss rates against a random player and against the scripted heuristic, and its Elo over
  training (plot: docs/images/coin_duel_elo.png).
- ``coop``: per seed, a cooperative game (``--game``: PackHunt or GuardedExit) with algo=poca
  and with algo=ppo (independent learners sharing one policy), the same steps; the mean group
  return of the last 10% of training iterations and of 400 evaluation games.
- ``throughput``: samples per second of the multi-player rollout (the learner in every seat),
  2 and 4 players per game.

usage: python benchmarks/multiplayer.py {rps,duel,coop,throughput} [--seeds 1 2 3] [--steps N]
       [--game GAME] [--runs DIR] [--write]
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch

sys.path.insert(0, str(Path(__file__).parent))
from _peer import machine
from results import replace_section

from entityrl.envs import make_vec
from entityrl.envs.rps_duel import PAYOFF
from entityrl.training import load_agent, load_config, train
from entityrl.training.match import MatchResult, load_opponent, play_group, play_match
from entityrl.training.matrix_games import choice_probabilities, exploitability
from entityrl.training.players import NetworkPlayer

QUIET = ["log.tensorboard=false", "log.progress=false"]
EVAL_SEED = 12345
GAMES = 400


def throw_probabilities(run_dir: str) -> npt.NDArray[np.float64]:
    """The probabilities of rock, paper and scissors of a trained agent."""
    obs = make_vec("RockPaperScissorsDuel", 1, seed=0).reset().take(np.array([0]))
    return choice_probabilities(load_agent(run_dir).net, obs, "throw")


def rps(seeds: list[int], threads: int, tmp: str, steps: int | None) -> str:
    variants = {
        "self-play (shipped config)": [],
        "fixed always-rock opponent": ["selfplay.opponent=entityrl.envs.rps_duel:always_rock"],
        "self-play, ppo.ent_coef=0.01": ["ppo.ent_coef=0.01"],
    }
    rows = []
    for name, extra in variants.items():
        for seed in seeds:
            run_dir = f"{tmp}/rps-{len(rows)}"
            started = time.time()
            train(
                "RockPaperScissorsDuel",
                overrides=[f"seed={seed}", f"log.run_dir={run_dir}", f"torch_threads={threads}",
                           *QUIET, *extra],
            )  # fmt: skip
            p = throw_probabilities(run_dir)
            rows.append((name, seed, p, exploitability(p, PAYOFF), time.time() - started))
            print(rows[-1], flush=True)
    config = load_config("RockPaperScissorsDuel")
    table = [
        f"| {name} | {seed} | {p[0]:.3f} / {p[1]:.3f} / {p[2]:.3f} | {e:.4f} | {s:.0f} |"
        for name, seed, p, e, s in rows
    ]
    medians = {
        name: statistics.median(e for n, _, _, e, _ in rows if n == name) for name in variants
    }
    return "\n".join(
        [
            f"RockPaperScissorsDuel, {config.total_timesteps:,} steps per run, shipped config "
            f"(ppo.ent_coef={config.ppo.ent_coef}, selfplay.snapshot_every="
            f"{config.selfplay.snapshot_every}, swap_every={config.selfplay.swap_every}). "
            "Exploitability: the expected payoff of the best response to the learned throw "
            "probabilities (0 at the equilibrium, 1 for a pure strategy; goal <= 0.05).",
            "",
            "| run | seed | rock / paper / scissors | exploitability | wall time (s) |",
            "|---|---|---|---|---|",
            *table,
            "",
            "Median exploitability: "
            + "; ".join(f"{name} {value:.4f}" for name, value in medians.items())
            + ".",
        ]
    )


def match_against(run_dir: str, opponent: str, games: int) -> MatchResult:
    """The trained agent of ``run_dir`` (sampled actions) against ``opponent`` in CoinDuel,
    seats alternating."""
    agent = load_agent(run_dir, seed=0)
    env = make_vec("CoinDuel", 50, seed=EVAL_SEED)
    player = NetworkPlayer(agent.net, agent.generator)
    return play_match(player, load_opponent(opponent, env, EVAL_SEED), env, games)


def elo_curve(run_dir: str) -> tuple[list[int], list[float]]:
    """``selfplay/elo`` over training, from the run's metrics.jsonl."""
    steps, elo = [], []
    for line in Path(run_dir, "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        if "selfplay/elo" in record:
            steps.append(record["step"])
            elo.append(record["selfplay/elo"])
    return steps, elo


def plot_elo(curves: dict[int, tuple[list[int], list[float]]], path: Path) -> None:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6, 3.5))
    axes = figure.subplots()
    for seed, (steps, elo) in curves.items():
        axes.plot(steps, elo, label=f"seed {seed}")
    axes.set_xlabel("environment steps (learner's seats)")
    axes.set_ylabel("learner's Elo (selfplay/elo)")
    axes.set_title("CoinDuel self-play: the learner against its pool of snapshots")
    axes.legend()
    figure.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    figure.savefig(tmp, dpi=100)
    tmp.replace(path)


def training_seconds(run_dir: str) -> float:
    """From the run's log: the time from its first iteration's end to its last's."""
    lines = Path(run_dir, "metrics.jsonl").read_text().splitlines()
    return float(json.loads(lines[-1])["time"] - json.loads(lines[0])["time"])


def finished(run_dir: str, budget: int) -> bool:
    """Whether ``run_dir`` holds a run that trained ``budget`` steps."""
    log = Path(run_dir, "metrics.jsonl")
    if not log.exists() or not Path(run_dir, "checkpoint.pt").exists():
        return False
    lines = log.read_text().splitlines()
    return bool(lines) and json.loads(lines[-1])["step"] >= budget


def duel(seeds: list[int], threads: int, tmp: str, steps: int | None) -> str:
    config = load_config("CoinDuel")
    budget = steps or config.total_timesteps
    rows, curves = [], {}
    for seed in seeds:
        run_dir = f"{tmp}/duel-{seed}"
        if not finished(run_dir, budget):  # kept runs (--runs) are not trained again
            train("CoinDuel", overrides=[f"seed={seed}", f"log.run_dir={run_dir}",
                                         f"total_timesteps={budget}", f"torch_threads={threads}",
                                         *QUIET])  # fmt: skip
        seconds = training_seconds(run_dir)
        random = match_against(run_dir, "random", GAMES)
        heuristic = match_against(run_dir, "entityrl.envs.players:coin_duel_heuristic", GAMES)
        curves[seed] = elo_curve(run_dir)
        rows.append((seed, random, heuristic, curves[seed][1][-1], seconds))
        print(seed, random.summary(), heuristic.summary(), flush=True)
    plot_elo(curves, Path(__file__).parents[1] / "docs" / "images" / "coin_duel_elo.png")
    table = [
        f"| {seed} | {r.wins}/{r.draws}/{r.losses} ({r.score:.1%}) | "
        f"{h.wins}/{h.draws}/{h.losses} ({h.wins / h.games:.1%} won) | {h.elo()[0]:+.0f} | "
        f"{elo:.0f} | {s:.0f} |"
        for seed, r, h, elo, s in rows
    ]
    return "\n".join(
        [
            f"CoinDuel by self-play with the shipped config, {budget:,} steps of the learner's "
            f"seats per seed. Each agent (sampled actions) then plays {GAMES} games against a "
            "uniformly random player and against the scripted heuristic (walk to the nearest "
            "coin, never zap; it beats random 98%), seats alternating. Goals: >= 95% won "
            "against random, >= 70% against the heuristic.",
            "",
            "| seed | vs random: W/D/L (score) | vs heuristic: W/D/L | Elo vs heuristic | "
            "final selfplay/elo | training time (s) |",
            "|---|---|---|---|---|---|",
            *table,
            "",
            "The learner's Elo over training: docs/images/coin_duel_elo.png.",
        ]
    )


COOP_GAMES = {
    "PackHunt": (
        "PackHunt (3 hunters that see 2 cells around them, 3 prey, 6 hazards that eliminate a "
        "hunter; a prey is captured by 2 hunters next to it at once). The group's return is "
        "the number of prey captured per game (each capture pays every hunter 1, eliminated "
        "ones included). Scripted baseline: 1.23; random hunters: 0.16."
    ),
    "GuardedExit": (
        "GuardedExit (3 explorers that see 2 cells around them; one must walk into the guard, "
        "which eliminates it and drops the key, for another to take the key to the exit). The "
        "group's return is 1 for a game escaped (paid to every explorer, the one given up "
        "included). Scripted baseline: 0.86; random explorers: 0.03."
    ),
}


def coop(seeds: list[int], threads: int, tmp: str, steps: int | None, game: str) -> str:
    config = load_config(game)
    budget = steps or config.total_timesteps
    rows = []
    for seed in seeds:
        for algo in ("poca", "ppo"):
            run_dir = f"{tmp}/coop-{game}-{algo}-{seed}"
            if not finished(run_dir, budget):  # kept runs (--runs) are not trained again
                train(game, overrides=[f"algo={algo}", f"seed={seed}", f"log.run_dir={run_dir}",
                                       f"total_timesteps={budget}", f"torch_threads={threads}",
                                       *QUIET])  # fmt: skip
            seconds = training_seconds(run_dir)
            late = late_metric(run_dir, "episode/group_return")
            agent = load_agent(run_dir, seed=0)
            env = make_vec(game, 20, seed=EVAL_SEED)
            returns = play_group(NetworkPlayer(agent.net, agent.generator), env, GAMES)
            rows.append((seed, algo, late, float(returns.mean()), seconds))
            print(rows[-1], flush=True)
    medians = {
        algo: statistics.median(r[3] for r in rows if r[1] == algo) for algo in ("poca", "ppo")
    }
    return "\n".join(
        [
            f"{COOP_GAMES[game]} {budget:,} steps per run (all players' rows), the shipped "
            "config but `algo`: poca (centralized critic and counterfactual baselines) or ppo "
            "(independent learners sharing one policy). Group return: the mean over the "
            f"games of the last 10% of training iterations, and over {GAMES} evaluation games "
            "(sampled actions; exact, from the group rewards).",
            "",
            "| seed | algo | group return, end of training | group return, evaluation | "
            "training time (s) |",
            "|---|---|---|---|---|",
            *(
                f"| {seed} | {algo} | {late:.2f} | {value:.2f} | {s:.0f} |"
                for seed, algo, late, value, s in rows
            ),
            "",
            f"Median evaluation group return: poca {medians['poca']:.2f}, ppo "
            f"{medians['ppo']:.2f}.",
        ]
    )


def late_metric(run_dir: str, key: str) -> float:
    """Mean ``key`` of the last 10% of the run's logged iterations that report it."""
    values = [
        json.loads(line).get(key)
        for line in Path(run_dir, "metrics.jsonl").read_text().splitlines()
    ]
    values = [v for v in values if v is not None]
    return float(np.mean(values[-max(1, len(values) // 10) :]))


def throughput(seeds: list[int], threads: int, tmp: str, steps: int | None) -> str:
    rows = []
    for hunters in (2, 4):
        for algo in ("ppo", "poca"):
            sps = []
            for seed in seeds:
                run_dir = f"{tmp}/sps-{hunters}-{algo}-{seed}"
                train("PackHunt", overrides=[f"algo={algo}", f"seed={seed}",
                                             f"env.kwargs.num_hunters={hunters}",
                                             f"log.run_dir={run_dir}",
                                             f"total_timesteps={steps or 32768}",
                                             f"torch_threads={threads}", *QUIET])  # fmt: skip
                records = [
                    json.loads(line)
                    for line in Path(run_dir, "metrics.jsonl").read_text().splitlines()
                ]
                sps.append(statistics.median(r["perf/sps"] for r in records[1:]))
            rows.append((hunters, algo, statistics.median(sps)))
            print(rows[-1], flush=True)
    config = load_config("PackHunt")
    return "\n".join(
        [
            f"Training samples per second (median over iterations, then over {len(seeds)} "
            f"runs) of PackHunt with 2 and 4 hunters per game: {config.rollout.num_envs} games, "
            f"{config.rollout.steps} steps per rollout, a sample is one hunter's step; every "
            "hunter is played by the learner.",
            "",
            "| players per game | algo | samples/s |",
            "|---|---|---|",
            *(f"| {h} | {algo} | {v:,.0f} |" for h, algo, v in rows),
        ]
    )


COMMANDS = {"coop": coop, "duel": duel, "rps": rps, "throughput": throughput}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=sorted(COMMANDS))
    parser.add_argument("--seeds", nargs="*", type=int, default=[1, 2, 3])
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--steps", type=int, default=None, help="steps per run (default: config's)")
    parser.add_argument("--runs", type=Path, help="keep the runs in this directory")
    parser.add_argument(
        "--game", choices=sorted(COOP_GAMES), default="PackHunt", help="the game of coop"
    )
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    command = COMMANDS[args.command]
    name = args.command
    if args.command == "coop":
        command = functools.partial(coop, game=args.game)
        # PackHunt keeps the section's first name.
        name += "" if args.game == "PackHunt" else f" {args.game}"
    if args.runs is not None:
        args.runs.mkdir(parents=True, exist_ok=True)
        body = command(args.seeds, args.threads, str(args.runs), args.steps)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            body = command(args.seeds, args.threads, tmp, args.steps)
    seeds = " ".join(map(str, args.seeds))
    body = "\n".join(
        [
            f"Command: `python benchmarks/multiplayer.py {args.command} --seeds {seeds} "
            f"--threads {args.threads}"
            + (f" --steps {args.steps}" if args.steps else "")
            + (f" --game {args.game}" if args.command == "coop" else "")
            + " --write`",
            "",
            f"Machine: {machine()}; torch threads {args.threads}.",
            "",
            body,
        ]
    )
    print(body)
    if args.write:
        replace_section(f"Multi-player: {name} (benchmarks/multiplayer.py)", body)


if __name__ == "__main__":
    main()
