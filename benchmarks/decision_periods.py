"""Agents deciding at their own periods (env.decisions) learn what agents deciding every step
learn: Lanes, two players sharing one policy (algo=ppo), trained per seed with

- ``every step``: both players decide every step (env.decisions off);
- ``1 and 5``: player 0 every step, player 1 every 5 steps (its moves repeated between);
- ``5 and 5``: both every 5 steps;
- ``1 and 5, none between``: as ``1 and 5``, but player 1 takes no action between decisions
  (a control: it then walks one cell per 5 steps, so its optimum is lower);

the same steps each (every budget of ``--steps``), then each trained agent plays ``--games``
games (greedy actions, with the decisions it was trained with) and each player's mean return
and mean ``extra_steps`` (steps beyond the distance to its goal; 0 is optimal with actions
repeated) are reported, with the optimal return on the same games at each player's decision
times (walking towards the goal at every decision).

``--overrides`` adds config overrides to every run (e.g. ``net.memory=true``: a recurrent
policy, whose state runs over every step while it learns from its decisions only);
``--variants`` picks the settings to train.

usage: python benchmarks/decision_periods.py [--seeds 1 2 3] [--steps N ...] [--games N]
                                             [--variants NAME ...] [--overrides KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).parent))
from _peer import FAST_REGIME, machine

from entityrl.env import VecEnv, VecObs
from entityrl.envs import make_vec
from entityrl.envs.lanes import MOVES
from entityrl.ragged import RaggedArray
from entityrl.training import load_agent, load_config, train
from entityrl.training.agent import make_eval_env

QUIET = ["log.tensorboard=false", "log.progress=false", "log.checkpoint_interval=100000000"]
# The step sizes these figures were measured with (PPO's defaults are smaller since).
GAME = ["env.kwargs={length: 15, max_steps: 40, step_cost: 0.02}", *FAST_REGIME]
EVAL_SEED = 12345
VARIANTS = {
    "every step": [],
    "1 and 5": ["env.decisions.periods={'1': 5}"],
    "5 and 5": ["env.decisions.period=5"],
    "1 and 5, none between": ["env.decisions.periods={'1': 5}", "env.decisions.between=none"],
}


def play(
    env: VecEnv, act: Callable[[VecObs], dict[str, RaggedArray]]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Per player, the mean return and mean extra_steps of the first game of each of the
    environment's game slots, played with ``act``."""
    games = env.num_envs // 2
    returns = np.full((2, games), np.nan)
    extra = np.full((2, games), np.nan)
    obs = env.reset()
    while np.isnan(returns).any():
        obs = env.act(act(obs))
        if obs.game_over is None or not obs.game_over.any():
            continue
        for i, row in enumerate(np.flatnonzero(obs.game_over).tolist()):
            game, player = divmod(row, 2)
            if np.isnan(returns[player, game]):
                returns[player, game] = obs.metrics["episode_return"][i]
                extra[player, game] = obs.metrics["extra_steps"][i]
    env.close()
    return returns.mean(axis=1), extra.mean(axis=1)


def walk_to_goal(obs: VecObs) -> dict[str, RaggedArray]:
    """The optimal play of Lanes at any decision times: at every decision, towards the goal
    (each row has one Walker, whose second feature is the goal's side)."""
    actors = obs.action_masks["move"].actors.lengths
    side = obs.features["Walker"].data[:, 1][actors > 0]
    choice = np.where(side > 0, MOVES.index("right"), MOVES.index("left")).astype(np.int64)
    return {"move": RaggedArray(choice.reshape(-1, 1), actors.copy())}


def optimum(extra: list[str], games: int) -> npt.NDArray[np.float64]:
    """Per player, the optimal mean return on the evaluation games with the decisions that the
    overrides ``extra`` give."""
    config = load_config("Lanes", [*GAME, *extra])
    env = make_vec(
        "Lanes", games, seed=EVAL_SEED, decisions=config.env.decisions, **config.env.kwargs
    )
    return play(env, walk_to_goal)[0]


def evaluate(run_dir: str, games: int) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Per player, the mean return and mean extra_steps of the trained agent (greedy) in
    ``games`` games, with the decisions it was trained with."""
    agent = load_agent(run_dir, deterministic=True, seed=EVAL_SEED)
    return play(make_eval_env(agent, num_envs=games, seed=EVAL_SEED), agent.act)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--steps", type=int, nargs="+", default=[8192, 16384, 40_000])
    parser.add_argument("--games", type=int, default=400)
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--overrides", nargs="+", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    variants = {name: [*VARIANTS[name], *args.overrides] for name in args.variants}
    print(machine(), flush=True)
    for name, extra in variants.items():
        best = optimum(extra, args.games)
        print(f"optimal return, {name}: {best[0]:.3f} / {best[1]:.3f}", flush=True)
    print("| steps | decisions (player 0 / 1) | seed | return | extra_steps | s |")
    runs = 0
    with tempfile.TemporaryDirectory() as tmp:
        for steps in args.steps:
            for name, extra in variants.items():
                for seed in args.seeds:
                    run_dir = f"{tmp}/run-{runs}"
                    runs += 1
                    started = time.time()
                    train(
                        "Lanes",
                        overrides=[f"seed={seed}", f"log.run_dir={run_dir}", "torch_threads=1",
                                   f"total_timesteps={steps}", *QUIET, *GAME, *extra],
                    )  # fmt: skip
                    ret, extra_steps = evaluate(run_dir, args.games)
                    print(
                        f"| {steps} | {name} | {seed} | {ret[0]:.3f} / {ret[1]:.3f} | "
                        f"{extra_steps[0]:.2f} / {extra_steps[1]:.2f} | "
                        f"{time.time() - started:.0f} |",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
