"""Robustness suite: entityrl's library defaults beside Stable-Baselines3 PPO's defaults.

Each task is trained as a new user of either library would on a task nobody tuned: entityrl
with no config file at all (``load_config`` would pick up a shipped per-task config for a name
that has one, e.g. ``gymnasium:CartPole-v1``; the suite sets only ``env.id``, the seed and the
step budget), SB3 with ``PPO("MlpPolicy", env)`` on one environment (benchmarks/sb3_ppo.py
``--defaults``). Both train for the same environment steps; the final agents then play
``EPISODES`` fresh episodes with sampled actions. A task's score is normalized: 0 is the mean
return of uniformly random legal actions (measured here, same episodes), 1 the task's stated
reference return. Over tasks x seeds the table gives the interquartile mean (IQM) of the
normalized scores with a 95% stratified bootstrap interval (seeds resampled within each task).

Every (task, trainer, seed, budget) result is kept in a JSON cache (written atomically after
each run), so the suite can be stopped at any time and resumed, by anyone, with the same
command; ``--label NAME KEY=VALUE ...`` screens a candidate change of entityrl's defaults as
its own trainer (``entityrl[NAME]``).

Two tasks are PettingZoo games, trained as a user of either library would train them:

- ``pettingzoo:classic/connect_four-v3``, a two-player zero-sum board game: entityrl trains it
  by self-play (``algo=selfplay``, the one setting docs/multiplayer.md says a competitive game
  needs; its pool against snapshots otherwise at the defaults), SB3 with sb3-contrib's
  ``MaskablePPO`` defaults against a fixed opponent of uniformly random legal moves (SB3 has no
  self-play; benchmarks/sb3_games.py). Both are scored by their mean return against uniformly
  random legal moves over ``GAMES`` games as each seat (first and second player): +1 a win, -1
  a loss, 0 a draw, i.e. the win rate minus the loss rate; 0 is random against random (measured
  over ``RANDOM_GAMES`` games), 1 always winning. entityrl's ``total_timesteps`` counts steps of
  the learner's seat, including the opponent's turns, in which it has no move: 100k steps are
  about 50k of its moves; SB3's count the agent's moves (the opponent moves inside its
  environment).
- ``mpe2:simple_spread_v3`` (mpe2's defaults: 3 agents, 25 steps, discrete moves), a
  cooperative game: entityrl with its defaults, ``algo=ppo``, one policy shared by every agent
  (``algo=poca`` needs the game to declare its group, which PettingZoo games do not without a
  wrapper: docs/interop.md), SB3 with ``PPO("MlpPolicy")``'s defaults, the policy shared by
  the agents through SuperSuit (benchmarks/sb3_games.py). A sample is one agent's step in
  both. Scored by the mean return per agent; 1 is the return of a scripted player that assigns
  agents to landmarks and steers there (benchmarks/mpe_spread_reference.py, 1000 games).

At equal wall time (``--equal-time``): entityrl trains each task and seed for the seconds SB3
took there (its cached run): a step budget (so that the learning-rate schedule ends on time)
sized from entityrl's speed, and a stop when SB3's seconds are spent, whichever comes first;
it is reported as the trainer ``entityrl@sb3-time`` beside SB3's scores at ``--steps``.

usage: python benchmarks/robustness.py [--tasks ...] [--seeds 1 2 3] [--steps 100000]
       [--trainers entityrl sb3] [--label NAME KEY=VALUE ...] [--equal-time] [--write]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

sys.path.insert(0, str(Path(__file__).parent))
from _peer import machine
from learning import run
from results import replace_section

from entityrl import stats
from entityrl.env.random_policy import RandomPolicy
from entityrl.envs import make_vec
from entityrl.training import Agent, Callback, Trainer, evaluate, load_agent, load_config
from entityrl.training.match import MatchResult, play_match
from entityrl.training.players import NetworkPlayer, Player, RandomPlayer

EPISODES = 100
GAMES = 100
"""Games a two-player game's final agent plays against random moves as each seat."""
RANDOM_GAMES = 1000
"""Games of random against random moves for a two-player game's score 0."""
GAME_SLOTS = 20
"""Games played at once (even: a match gives each seat the same number of games)."""
CACHE = Path(__file__).parent / "robustness.json"
SB3 = "sb3"
EQUAL_TIME = "entityrl@sb3-time"
"""The trainer name of entityrl's runs given SB3's wall time (``--equal-time``)."""
SLACK = 0.2
"""An equal-time run may end this share of SB3's wall time early."""
TRIES = 3
"""Runs of an equal-time task and seed, each with the budget the last one's speed allows."""


class WallClock(Callback):
    """Ends a run after the first iteration that finishes ``seconds`` after the start."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.started = time.monotonic()

    def on_iteration(self, trainer: Trainer, metrics: dict[str, float]) -> None:
        if time.monotonic() - self.started >= self.seconds:
            trainer.request_stop(f"wall time {self.seconds:.0f} s spent")


@dataclass(frozen=True)
class Task:
    name: str
    """entityrl's environment name."""
    best: float
    """The reference return that scores 1."""
    gym_id: str | None = None
    """The Gymnasium id SB3 trains on (None: SB3 cannot train this task)."""
    sb3_game: str | None = None
    """Instead of ``gym_id``, the game benchmarks/sb3_games.py trains SB3 on."""

    def random_return(self) -> float:
        """Mean return of uniformly random legal actions over ``EPISODES`` episodes."""
        with make_vec(self.name, 16, seed=12345) as env:
            return evaluate(RandomPolicy(env.action_space, seed=0), env, EPISODES).mean()

    def train_entityrl(
        self, seed: int, steps: int, overrides: Sequence[str], callbacks: Sequence[Callback] = ()
    ) -> dict[str, Any]:
        result = run(
            None,
            1,
            [f"env.id={self.name}", f"seed={seed}", f"total_timesteps={steps}", *overrides],
            callbacks,
            episodes=EPISODES,
        )
        return {"steps": result["steps"], "seconds": result["seconds"], "return": result["reached"]}

    def sb3_command(self, seed: int, steps: int) -> list[str] | None:
        """The command that trains and scores SB3 on this task (None: SB3 cannot)."""
        here = Path(__file__).parent
        if self.sb3_game is not None:
            return [sys.executable, str(here / "sb3_games.py"), "--task", self.sb3_game,
                    "--seed", str(seed), "--steps", str(steps), "--games", str(GAMES)]  # fmt: skip
        if self.gym_id is not None:
            return [sys.executable, str(here / "sb3_ppo.py"), "--defaults", "--env", self.gym_id,
                    "--seed", str(seed), "--steps", str(steps), "--episodes", str(EPISODES)]  # fmt: skip
        return None

    @property
    def sb3_trains(self) -> bool:
        return self.gym_id is not None or self.sb3_game is not None


@dataclass(frozen=True)
class TwoPlayerGame(Task):
    """A two-player zero-sum game, trained by self-play and scored by the mean return of the
    agent against uniformly random legal moves, ``GAMES`` games as each seat."""

    algo: str = "selfplay"
    """The algorithm entityrl trains the game with (the user's one setting)."""

    def match(self, agent: Agent | None, games: int) -> MatchResult:
        """``games`` games of ``agent`` (None: random moves) against random moves, half of them
        in each seat."""
        with make_vec(self.name, GAME_SLOTS, seed=12345) as env:
            player: Player
            if agent is None:
                player = RandomPlayer(env.action_space, seed=0)
            else:
                agent.check_env(env)
                player = NetworkPlayer(agent.net, agent.generator)
            return play_match(player, RandomPlayer(env.action_space, seed=1), env, games)

    def random_return(self) -> float:
        return game_return(self.match(None, RANDOM_GAMES))

    def train_entityrl(
        self, seed: int, steps: int, overrides: Sequence[str], callbacks: Sequence[Callback] = ()
    ) -> dict[str, Any]:
        with tempfile.TemporaryDirectory() as run_dir:
            config = load_config(
                None,
                [f"log.run_dir={run_dir}", "log.tensorboard=false", "log.progress=false",
                 "torch_threads=1", f"env.id={self.name}", f"seed={seed}",
                 f"total_timesteps={steps}", f"algo={self.algo}", *overrides],
            )  # fmt: skip
            started = time.time()
            result = Trainer(config, callbacks=callbacks).run()
            seconds = time.time() - started
            agent = load_agent(run_dir, seed=0)
        match = self.match(agent, 2 * GAMES)
        seats = [match.seats[name].payoff for name in sorted(match.seats)]
        return {"steps": result.steps, "seconds": seconds, "return": game_return(match),
                "wins": match.wins, "draws": match.draws, "losses": match.losses,
                "first": seats[0], "second": seats[1]}  # fmt: skip


def game_return(match: MatchResult) -> float:
    """The mean return of a zero-sum game won (+1), drawn (0) or lost (-1)."""
    return (match.wins - match.losses) / match.games


# References: the return of a near-optimal policy (CartPole's cap; MountainCar's and
# Pendulum's usual "solved" levels; MiniGrid's return is 1 - 0.9 * steps / limit, so 1 is the
# unreachable bound); the shipped entity environments' own config targets; connect four's
# always winning; simple_spread's scripted player (benchmarks/mpe_spread_reference.py: -7.56
# per agent over 1000 games, random moves -26.6).
TASKS = {
    task.name: task
    for task in (
        Task("gymnasium:CartPole-v1", 500.0, "CartPole-v1"),
        Task("gymnasium:MountainCar-v0", -110.0, "MountainCar-v0"),
        Task("gymnasium:Pendulum-v1", -200.0, "Pendulum-v1"),
        Task("minigrid:MiniGrid-Empty-8x8-v0", 1.0, "MiniGrid-Empty-8x8-v0"),
        Task("minigrid:MiniGrid-FourRooms-v0", 1.0, "MiniGrid-FourRooms-v0"),
        Task("minigrid:MiniGrid-DoorKey-6x6-v0", 1.0, "MiniGrid-DoorKey-6x6-v0"),
        Task("minigrid:MiniGrid-RedBlueDoors-6x6-v0", 1.0, "MiniGrid-RedBlueDoors-6x6-v0"),
        Task("CherryPick", 0.95),
        Task("MineSweeper", 0.95),
        TwoPlayerGame("pettingzoo:classic/connect_four-v3", 1.0, sb3_game="connect_four"),
        Task("mpe2:simple_spread_v3", -7.56, sb3_game="simple_spread"),
    )
}
PENDING: dict[str, str] = {}
"""Tasks the suite should have but does not run yet, with the reason."""


def load_cache() -> dict[str, Any]:
    return json.loads(CACHE.read_text()) if CACHE.exists() else {"random": {}, "runs": {}}


def save_cache(cache: dict[str, Any]) -> None:
    """Writes ``cache`` merged into what the file holds now, so that several runs of this
    script (screening different labels) can share the file without dropping each other's
    results."""
    on_disk = load_cache()
    for part in ("random", "runs"):
        cache[part] = on_disk[part] | cache[part]
    fd, tmp = tempfile.mkstemp(dir=CACHE.parent, prefix=".robustness.", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(cache, f, indent=1, sort_keys=True)
    os.replace(tmp, CACHE)


def train_sb3(task: Task, seed: int, steps: int) -> dict[str, Any]:
    command = task.sb3_command(seed, steps)
    assert command is not None
    out = subprocess.run(command, check=True, capture_output=True, text=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    extra = {k: result[k] for k in ("wins", "draws", "losses", "first", "second") if k in result}
    return {"steps": result["steps"], "seconds": result["seconds"], "return": result["reached"],
            **extra}  # fmt: skip


def train_in_sb3_time(
    task: Task, seed: int, steps: int, cache: dict[str, Any], overrides: Sequence[str]
) -> dict[str, Any] | None:
    """entityrl's defaults trained on ``task`` for the wall time SB3 took at ``steps`` (None,
    said, when either library's run at ``steps`` is not in the cache yet).

    The step budget starts from the cached runs' speeds; a run that spends its budget in
    under ``1 - SLACK`` of SB3's time (the cached timing was slowed by other load) is run
    again with the budget its own speed allows, up to ``TRIES`` times."""
    sb3 = cache["runs"].get(run_key(SB3, task.name, seed, steps))
    ours = cache["runs"].get(run_key("entityrl", task.name, seed, steps))
    if sb3 is None or ours is None:
        print(f"{task.name} seed {seed}: run both libraries at {steps} steps first", flush=True)
        return None
    budget = max(1, round(steps * sb3["seconds"] / ours["seconds"]))
    for _ in range(TRIES):
        result = task.train_entityrl(seed, budget, overrides, [WallClock(sb3["seconds"])])
        if result["seconds"] >= (1 - SLACK) * sb3["seconds"] or result["steps"] < budget:
            break
        budget = round(result["steps"] * (1 - SLACK / 2) * sb3["seconds"] / result["seconds"])
    return {**result, "budget": budget, "sb3_seconds": sb3["seconds"]}


def run_key(trainer: str, task: str, seed: int, steps: int) -> str:
    return f"{trainer}|{task}|{seed}|{steps}"


def report(
    cache: dict[str, Any], trainers: list[str], tasks: list[Task], seeds: list[int], steps: int
) -> str:
    """Per task and trainer the normalized score per seed and the mean wall time; then each
    trainer's IQM over the tasks every trainer finished for all seeds."""
    lines = [
        "| task | trainer | normalized score per seed | mean | wall time (s) |",
        "|---|---|---|---:|---:|",
    ]
    scores: dict[str, dict[str, npt.NDArray[np.float64]]] = {t: {} for t in trainers}
    for task in tasks:
        low = cache["random"].get(task.name)
        for trainer in trainers:
            runs = [cache["runs"].get(run_key(trainer, task.name, s, steps)) for s in seeds]
            done = [r for r in runs if r is not None]
            if not done or low is None:
                continue
            normalized = np.array([(r["return"] - low) / (task.best - low) for r in done])
            if len(done) == len(seeds):
                scores[trainer][task.name] = normalized
            shown = iter(normalized)
            per_seed = " ".join(f"{next(shown):.2f}" if r else "-" for r in runs)
            seconds = np.mean([r["seconds"] for r in done])
            lines.append(
                f"| {task.name} | {trainer} | {per_seed} | {normalized.mean():.2f} "
                f"| {seconds:.0f} |"
            )
    common = [t.name for t in tasks if all(t.name in scores[tr] for tr in trainers)]
    summary = [
        f"IQM of normalized scores over {len(common)} tasks x {len(seeds)} seeds "
        f"({', '.join(common) or 'none finished'}), 95% stratified bootstrap interval:",
        "",
        "| trainer | IQM | 95% interval |",
        "|---|---:|---|",
    ]
    for trainer in trainers if common else []:
        iqm = stats.interval([scores[trainer][name] for name in common])
        summary.append(f"| {trainer} | {iqm.value:.2f} | [{iqm.low:.2f}, {iqm.high:.2f}] |")
    if len(trainers) == 2 and common:
        first, second = ([scores[t][name] for name in common] for t in trainers)
        chance = stats.probability_of_improvement(first, second)
        summary += ["", f"Probability that a run of {trainers[0]} outscores one of {trainers[1]} "
                    f"on a task drawn at random: {chance}."]  # fmt: skip
    games = [
        f"{task.name}, {trainer}: "
        + "; ".join(
            f"seed {seed} {r['wins']}/{r['draws']}/{r['losses']} (first {r['first']:+.2f}, "
            f"second {r['second']:+.2f})"
            for seed in seeds
            if (r := cache["runs"].get(run_key(trainer, task.name, seed, steps))) and "wins" in r
        )
        for task in tasks
        if isinstance(task, TwoPlayerGame)
        for trainer in trainers
        if any(run_key(trainer, task.name, s, steps) in cache["runs"] for s in seeds)
    ]
    if games:
        summary += ["", "Games against random moves, won/drawn/lost (mean return as first and "
                    "second player):", "", *(f"- {line}" for line in games)]  # fmt: skip
    randoms = ", ".join(
        f"{t.name} {cache['random'][t.name]:.3g} (reference {t.best:g})"
        for t in tasks
        if t.name in cache["random"]
    )
    return "\n".join([*lines, "", *summary, "", f"Random-play returns (score 0): {randoms}."])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", choices=sorted(TASKS), default=sorted(TASKS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--steps", type=int, default=100_000, help="environment steps each")
    parser.add_argument(
        "--trainers", nargs="+", choices=["entityrl", SB3], default=["entityrl", SB3]
    )
    parser.add_argument(
        "--label", nargs="+", metavar="NAME KEY=VALUE", help="screen entityrl with overrides"
    )
    parser.add_argument(
        "--equal-time",
        action="store_true",
        help="train entityrl for SB3's wall time on each task and seed (both cached at --steps)",
    )
    parser.add_argument("--report", nargs="+", help="trainers to tabulate (default: those run)")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    torch.set_num_threads(1)
    tasks = [TASKS[name] for name in args.tasks]
    label, overrides = (args.label[0], args.label[1:]) if args.label else (None, [])
    trainers = [f"entityrl[{label}]" if t == "entityrl" and label else t for t in args.trainers]
    if args.equal_time:
        if label:
            parser.error("--equal-time compares the library defaults: leave out --label")
        trainers = [EQUAL_TIME, SB3]
    cache = load_cache()
    for task in tasks:
        if task.name not in cache["random"]:
            cache["random"][task.name] = task.random_return()
            save_cache(cache)
        for seed in args.seeds:
            for trainer in sorted(trainers, key=lambda t: t != SB3):  # SB3's time is needed first
                key = run_key(trainer, task.name, seed, args.steps)
                if key in cache["runs"] or (trainer in (SB3, EQUAL_TIME) and not task.sb3_trains):
                    continue
                if trainer == SB3:
                    result = train_sb3(task, seed, args.steps)
                elif trainer == EQUAL_TIME:
                    result = train_in_sb3_time(task, seed, args.steps, cache, overrides)
                    if result is None:
                        continue
                else:
                    result = task.train_entityrl(seed, args.steps, overrides)
                result["load"] = os.getloadavg()[0]
                cache["runs"][key] = result
                save_cache(cache)
                print(key, json.dumps(result), flush=True)
    table = report(cache, args.report or trainers, tasks, args.seeds, args.steps)
    print(table)
    if args.write and args.equal_time:
        replace_section(
            "Robustness suite at equal wall time (benchmarks/robustness.py --equal-time)",
            f"Command: `python benchmarks/robustness.py --seeds {' '.join(map(str, args.seeds))} "
            f"--steps {args.steps} --equal-time --write` (results cached in "
            f"benchmarks/robustness.json).\n\n"
            f"Machine: {machine()}; one torch thread, one training at a time. SB3 as in the "
            f"suite ({args.steps:,} environment steps); `{EQUAL_TIME}` is entityrl's defaults "
            f"given SB3's wall time on the same task and seed (the wall time column is what each "
            f"took; the loads of the runs are in the cache). {EPISODES} final episodes with "
            f"sampled actions.\n\n{table}\n",
        )
    elif args.write:
        pending = "".join(f"\n- {name}: {why}" for name, why in PENDING.items())
        replace_section(
            "Robustness suite: library defaults beside SB3's defaults (benchmarks/robustness.py)",
            f"Command: `python benchmarks/robustness.py --seeds {' '.join(map(str, args.seeds))} "
            f"--steps {args.steps} --write` (results cached in benchmarks/robustness.json).\n\n"
            f"Machine: {machine()}; one torch thread, one training at a time. {args.steps:,} "
            f"environment steps each; {EPISODES} final episodes with sampled actions.\n\n"
            f"{table}\n" + (f"\nPending:{pending}\n" if pending else ""),
        )


if __name__ == "__main__":
    main()
