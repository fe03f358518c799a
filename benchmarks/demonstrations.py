"""Demonstrations inside reinforcement learning: GAIL, and PPO helped by behaviour cloning.

GAIL: record the scripted expert of CherryPick (200 episodes, seed 0), train with algo=gail
and no environment reward (gail.env_reward=0) for the shipped config's steps, then evaluate
the agent and the expert on the same 400 fresh episodes (sampled actions, seed 12345).

Hard exploration: Corridor (reward only at the far end of 40 cells) with RND off. Record the
expert (always right, 20 episodes), then train, per seed, (a) plain PPO, (b) PPO with the
behaviour-cloning loss (bc.strength=1, annealed over the budget) and (c) PPO started from a
behaviour-cloning run on the recordings (init_from); each evaluates every 2,048 steps (16
episodes) and stops once the evaluation's mean return reaches the shipped target (0.95). The
figure is the environment steps until then.

usage: python benchmarks/demonstrations.py [--seeds 1 2 3] [--threads 1] [--write]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from _peer import machine
from results import replace_section

from entityrl.envs import make_vec
from entityrl.envs.experts import EXPERTS
from entityrl.recording import record
from entityrl.training import evaluate, load_agent, make_eval_env, train

EVAL_EPISODES = 400
EVAL_SEED = 12345
GAIL_EPISODES = 200
CORRIDOR_EPISODES = 20
CORRIDOR_BUDGET = 122_880  # four times the shipped config's (with RND) steps
STOP_AT_TARGET = ["eval.interval=2048", "eval.episodes=16", "eval.stop_at_target=true"]


def _quiet(threads: int) -> list[str]:
    return ["log.tensorboard=false", "log.progress=false", f"torch_threads={threads}"]


def gail_run(demos: Path, seed: int, threads: int, tmp: str) -> dict[str, float]:
    started = time.time()
    result = train(
        "CherryPick",
        overrides=[*_quiet(threads), "algo=gail", f"bc.demos=[{demos}]", "gail.env_reward=0",
                   f"seed={seed}", f"log.run_dir={tmp}/gail-{seed}"],
    )  # fmt: skip
    seconds = time.time() - started
    agent = load_agent(result.run_dir, seed=0)
    with make_eval_env(agent, num_envs=16, seed=EVAL_SEED) as env:
        agent_return = evaluate(agent, env, EVAL_EPISODES).mean()
    return {"seed": seed, "steps": result.steps, "return": agent_return, "seconds": seconds}


def steps_to_target(overrides: list[str]) -> tuple[int | None, int]:
    """Environment steps until the evaluation reached the target (None: not within the
    budget), and the steps trained."""
    result = train("Corridor", overrides=[*overrides, *STOP_AT_TARGET])
    return (result.steps if result.stop_reason else None), result.steps


def corridor_runs(demos: Path, seed: int, threads: int, tmp: str) -> dict[str, object]:
    common = [*_quiet(threads), "rnd.coef=0", f"total_timesteps={CORRIDOR_BUDGET}",
              f"seed={seed}"]  # fmt: skip
    row: dict[str, object] = {"seed": seed}
    row["ppo"], _ = steps_to_target([*common, f"log.run_dir={tmp}/ppo-{seed}"])
    row["ppo_bc_loss"], _ = steps_to_target(
        [*common, f"bc.demos=[{demos}]", "bc.strength=1", f"bc.anneal_steps={CORRIDOR_BUDGET}",
         f"log.run_dir={tmp}/ppo-bc-{seed}"]
    )  # fmt: skip
    bc = train(
        "Corridor",
        overrides=[*_quiet(threads), "algo=bc", f"bc.demos=[{demos}]", "bc.epochs=20",
                   "bc.eval_episodes=0", f"seed={seed}", f"log.run_dir={tmp}/bc-{seed}"],
    )  # fmt: skip
    row["bc_samples"] = bc.steps
    row["bc_init"], _ = steps_to_target(
        [*common, f"init_from={bc.run_dir}", f"log.run_dir={tmp}/bc-init-{seed}"]
    )
    return row


def _steps(value: object) -> str:
    return "not reached" if value is None else f"{value:,}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", nargs="*", type=int, default=[1, 2, 3])
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        cherry = Path(tmp) / "cherry.arrow"
        record(EXPERTS["CherryPick"](), make_vec("CherryPick", 16, seed=0), cherry,
               GAIL_EPISODES, env_id="CherryPick")  # fmt: skip
        with make_vec("CherryPick", 16, seed=EVAL_SEED) as env:
            expert = evaluate(EXPERTS["CherryPick"](), env, EVAL_EPISODES).mean()
        gail = []
        for seed in args.seeds:
            gail.append(gail_run(cherry, seed, args.threads, tmp))
            print(gail[-1], flush=True)
        corridor = Path(tmp) / "corridor.arrow"
        record(EXPERTS["Corridor"](), make_vec("Corridor", 4, seed=0), corridor,
               CORRIDOR_EPISODES, env_id="Corridor")  # fmt: skip
        rows = []
        for seed in args.seeds:
            rows.append(corridor_runs(corridor, seed, args.threads, tmp))
            print(rows[-1], flush=True)
    seeds = " ".join(map(str, args.seeds))
    ratios = [r["return"] / expert for r in gail]
    lines = [
        f"Command: `python benchmarks/demonstrations.py --seeds {seeds} --threads "
        f"{args.threads} --write`",
        "",
        f"Machine: {machine()}; torch threads {args.threads}.",
        "",
        f"**GAIL, no environment reward** (CherryPick, shipped config; {GAIL_EPISODES} expert "
        f"episodes; agent and expert evaluated on the same {EVAL_EPISODES} episodes, sampled "
        f"actions). Expert return {expert:.3f}.",
        "",
        "| seed | steps | GAIL agent return | GAIL / expert | wall time (s) |",
        "|---|---|---|---|---|",
        *(
            f"| {r['seed']} | {r['steps']:,.0f} | {r['return']:.3f} | "
            f"{r['return'] / expert:.3f} | {r['seconds']:.0f} |"
            for r in gail
        ),
        "",
        f"Median GAIL / expert: {statistics.median(ratios):.3f}.",
        "",
        f"**Hard exploration: Corridor without RND** ({CORRIDOR_EPISODES} expert episodes; "
        f"environment steps until an evaluation's mean return reached 0.95, budget "
        f"{CORRIDOR_BUDGET:,}; behaviour cloning: 20 epochs).",
        "",
        "| seed | plain PPO | PPO + BC loss | BC samples | PPO from the BC run |",
        "|---|---|---|---|---|",
        *(
            f"| {r['seed']} | {_steps(r['ppo'])} | {_steps(r['ppo_bc_loss'])} | "
            f"{r['bc_samples']:,} | {_steps(r['bc_init'])} |"
            for r in rows
        ),
    ]
    body = "\n".join(lines)
    print(body)
    if args.write:
        replace_section("Demonstrations inside RL: GAIL and BC-helped PPO "
                        "(benchmarks/demonstrations.py)", body)  # fmt: skip


if __name__ == "__main__":
    main()
