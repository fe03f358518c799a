"""`entityrl tune` on a small budget against an environment's shipped config.

For each environment: run `entityrl tune ENV --trials N` (the default search space, the
shipped config's own step budget, training seed 1 as in every trial, sampler seed 0, each
finished trial scored on 64 evaluation episodes), timing the whole study. Then train the
shipped config and the study's best.yaml with fresh seeds (never the tuning seed), the same
steps, and evaluate every final agent on the same 400 episodes (sampled actions, environment
seed 777, also never seen by the study). The shipped config is also scored the way the study
scores a trial (seed 1, the study's evaluation), which shows how much of the best trial's lead
is the luck of picking the best of N runs of one seed.

usage: python benchmarks/tune.py [--env MoveToOrigin] [--trials 20] [--seeds 11 12 13 14 15]
                                 [--threads 1] [--write]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from functools import reduce
from pathlib import Path

import optuna
import torch

sys.path.insert(0, str(Path(__file__).parent))
from _peer import machine
from results import replace_section

from entityrl.cli.main import main as entityrl
from entityrl.training import evaluate, load_agent, make_eval_env, train
from entityrl.training.config import TrainConfig, load_config
from entityrl.training.tune import BEST_FILE, DEFAULT_SPACE, NAME, STUDY_FILE, Tuner, load_space

EPISODES = 400
EVAL_SEED = 777
TUNING_SEED = 1  # the configs' own seed: every trial trains with it


def setting(config: TrainConfig, key: str) -> object:
    return reduce(getattr, key.split("."), config)


def run_study(env: str, trials: int, quiet: list[str], study: Path) -> dict:
    """`entityrl tune` in this process; its wall time, trial states and best trial."""
    started = time.time()
    code = entityrl(["tune", env, *quiet, "--trials", str(trials), "--study", str(study)])
    seconds = time.time() - started
    if code != 0:
        sys.exit(f"entityrl tune {env} exited with {code}")
    result = optuna.load_study(study_name=NAME, storage=f"sqlite:///{study / STUDY_FILE}")
    states = Counter(t.state.name.lower() for t in result.trials)
    return {"seconds": seconds, "states": states, "best": result.best_trial}


def train_and_evaluate(source: str | Path, seed: int, quiet: list[str], run_dir: Path) -> dict:
    """Train ``source`` (an environment's shipped config or a YAML file) with ``seed``; the
    final agent's mean return on the benchmark's evaluation episodes."""
    started = time.time()
    train(config=source, overrides=[f"seed={seed}", f"log.run_dir={run_dir}", *quiet])
    seconds = time.time() - started
    agent = load_agent(run_dir, seed=0)
    with make_eval_env(agent, num_envs=16, seed=EVAL_SEED) as env:
        value = float(evaluate(agent, env, EPISODES).mean())
    return {"return": value, "seconds": seconds}


def spread(values: list[float]) -> str:
    return f"{statistics.mean(values):.3f} ± {statistics.stdev(values):.3f}"


def measure(env: str, trials: int, seeds: list[int], threads: int, tmp: Path) -> str:
    """The section body for one environment."""
    quiet = [f"torch_threads={threads}", "log.tensorboard=false", "log.progress=false"]
    study = tmp / f"{env}-study"
    load_before = os.getloadavg()[0]
    tuned = run_study(env, trials, quiet, study)
    best = study / BEST_FILE
    tuner = Tuner(study, env, quiet, load_space(None))
    shipped_dir = tmp / f"{env}-shipped-seed{TUNING_SEED}"
    train(config=env, overrides=[f"seed={TUNING_SEED}", f"log.run_dir={shipped_dir}", *quiet])
    shipped_score = tuner.score(shipped_dir)
    runs: dict[str, list[dict]] = {"shipped": [], "tuned": []}
    for seed in seeds:  # interleaved, so the machine's load weighs on both alike
        for name, source in (("shipped", env), ("tuned", best)):
            row = train_and_evaluate(source, seed, quiet, tmp / f"{env}-{name}-{seed}")
            print(env, name, seed, row, flush=True)
            runs[name].append(row)
    load_after = os.getloadavg()[0]

    shipped, tuned_config = load_config(env), load_config(best)
    states = ", ".join(f"{n} {k}" for k, n in sorted(tuned["states"].items()))
    lines = [
        "| config | " + " | ".join(DEFAULT_SPACE) + " | tuning score (seed 1) | "
        + " | ".join(f"seed {s}" for s in seeds) + " | mean ± sd | wall time per run (s) |",
        "|---|" + "---|" * (len(DEFAULT_SPACE) + len(seeds) + 3),
    ]  # fmt: skip
    for name, config, score in (
        ("shipped", shipped, shipped_score),
        ("tuned", tuned_config, tuned["best"].value),
    ):
        returns = [r["return"] for r in runs[name]]
        lines.append(
            f"| {name} | "
            + " | ".join(f"{setting(config, k):.4g}" for k in DEFAULT_SPACE)
            + f" | {score:.3f} | "
            + " | ".join(f"{v:.3f}" for v in returns)
            + f" | {spread(returns)} | {statistics.median(r['seconds'] for r in runs[name]):.0f} |"
        )
    gains = [t["return"] - s["return"] for s, t in zip(runs["shipped"], runs["tuned"], strict=True)]
    return "\n".join(
        [
            f"Command: `python benchmarks/tune.py --env {env} --trials {trials} --seeds "
            f"{' '.join(map(str, seeds))} --threads {threads} --write`",
            "",
            f"Machine: {machine()}; torch threads {threads}; shared with other jobs (load "
            f"average {load_before:.1f} at the start, {load_after:.1f} at the end), so wall "
            "times are longer than an idle machine's.",
            "",
            f"Study: `entityrl tune {env} --trials {trials}` with the default search space, at "
            f"the shipped config's {shipped.total_timesteps:,} steps: {states} trials in "
            f"{tuned['seconds'] / 60:.1f} min; best trial {tuned['best'].number}. Then the "
            f"shipped config and best.yaml trained with seeds {', '.join(map(str, seeds))} "
            f"(never seen by the study) and evaluated on the same {EPISODES} episodes "
            f"(sampled actions, environment seed {EVAL_SEED}). The tuning score is the "
            f"study's own measure (seed {TUNING_SEED}, 64 episodes).",
            "",
            *lines,
            "",
            f"Tuned minus shipped, seed by seed: {', '.join(f'{g:+.3f}' for g in gains)} "
            f"(mean {statistics.mean(gains):+.3f}).",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", nargs="*", default=["MoveToOrigin"], help="environment names")
    parser.add_argument("--trials", type=int, default=20, help="finished trials of each study")
    parser.add_argument("--seeds", nargs="*", type=int, default=[11, 12, 13, 14, 15])
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    if TUNING_SEED in args.seeds or len(args.seeds) < 2:
        parser.error(f"--seeds: two or more, not the tuning seed {TUNING_SEED}")
    torch.set_num_threads(args.threads)
    for env in args.env:
        with tempfile.TemporaryDirectory() as tmp:
            body = measure(env, args.trials, args.seeds, args.threads, Path(tmp))
        print(body)
        if args.write:
            replace_section(f"Hyperparameter search against the shipped config: {env}, "
                            f"{args.trials} trials (benchmarks/tune.py)", body)  # fmt: skip


if __name__ == "__main__":
    main()
