"""entityrl beside Stable-Baselines3 PPO on the same machine, in the same run.

entityrl trains with its shipped config for the task (through entityrl.interop); SB3 trains
with RL Baselines3 Zoo's tuned hyperparameters in its own virtual environment
(benchmarks/sb3_ppo.py, started with --sb3-python; SB3 is never a dependency of entityrl).
Both final agents play the same number of fresh episodes with sampled actions; the table gives
the return reached, the training steps and the training wall time, per seed and as medians.

usage: python benchmarks/external.py --sb3-python /work/venvs/sb3/bin/python [--seeds 1 2 3]
       [--write]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from _peer import machine
from learning import EPISODES, run
from results import replace_section

from entityrl.training.config import config_path_for

# entityrl's registry name -> (the Gymnasium id SB3 trains on, SB3's step budget)
TASKS = {"gymnasium:CartPole-v1": ("CartPole-v1", 100_000)}


def sb3(python: str, env_id: str, seed: int, steps: int) -> dict[str, float]:
    script = Path(__file__).parent / "sb3_ppo.py"
    out = subprocess.run(
        [python, str(script), "--env", env_id, "--seed", str(seed), "--steps", str(steps),
         "--episodes", str(EPISODES)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sb3-python", required=True, help="python of a venv with SB3")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    torch.set_num_threads(1)
    lines = [
        "| task | trainer | seed | steps | return reached | wall time (s) |",
        "|---|---|---|---:|---:|---:|",
    ]
    medians = []
    for name, (gym_id, sb3_steps) in TASKS.items():
        ours, theirs = [], []
        for seed in args.seeds:
            r = run(config_path_for(name), threads=1, overrides=[f"seed={seed}"])
            ours.append((float(r["reached"]), float(r["seconds"])))
            s = sb3(args.sb3_python, gym_id, seed, sb3_steps)
            theirs.append((s["reached"], s["seconds"]))
            for trainer, steps, (reached, seconds) in (
                ("entityrl", r["steps"], ours[-1]), ("SB3 PPO", sb3_steps, theirs[-1])
            ):  # fmt: skip
                lines.append(
                    f"| {gym_id} | {trainer} | {seed} | {steps:,} | {reached:.1f} | {seconds:.0f} |"
                )
                print(lines[-1], flush=True)
        for trainer, results in (("entityrl", ours), ("SB3 PPO", theirs)):
            medians.append(
                f"| {gym_id} | {trainer} | {statistics.median(x for x, _ in results):.1f} "
                f"| {statistics.median(t for _, t in results):.0f} |"
            )
    summary = "\n".join(
        [
            "| task | trainer | median return | median wall time (s) |",
            "|---|---|---:|---:|",
            *medians,
        ]
    )
    print(summary)
    if args.write:
        replace_section(
            "Side by side with Stable-Baselines3 (benchmarks/external.py)",
            f"Command: `python benchmarks/external.py --sb3-python /work/venvs/sb3/bin/python "
            f"--seeds {' '.join(map(str, args.seeds))} --write`\n\nMachine: {machine()}; one "
            f"torch thread each; the runs take turns on the shared cores (other jobs ran too, "
            f"so wall times move by tens of percent). Returns: {EPISODES} fresh episodes with "
            f"sampled actions.\n\n{summary}\n\n{chr(10).join(lines)}\n",
        )


if __name__ == "__main__":
    main()
