"""What the default step checks (entityrl/env/step_checks.py) cost: samples per second with
them and with them switched off, stepping environments alone (the worst case: no network
time to hide them) and training end to end (measured as benchmarks/throughput.py does: from
the first rollout to the end of the last iteration); and, with ``--corpus``, what they catch.

"Off" replaces the checks' methods with no-ops for the measurement; runs with and without
alternate, and each figure is the median of ``--repeats`` runs. On a shared machine the two
rates move by more than the checks cost, so the runs with checks also time every call of
them: the share of the measured time spent inside the checks is the figure that noise does
not blur. The first, fully validated batches are a one-time cost at the start, reported
separately; the samples per second are measured after them. ``--timesteps 0`` skips training.

``--corpus`` plays instead the late corpus and the multi-player corpus of
tests/fuzz/late_corpus.py (every kind of broken observation, from long after the fully
validated steps on) and counts how the cases end: caught precisely (an EnvValidationError
naming the environment's place in the batch and the field), vaguely, silently, or in an
unrelated exception.

The figures are printed as markdown, a dated measurement to add to the "Default step
checks" section of benchmarks/RESULTS.md (the earlier ones stay, for comparison).

usage: python benchmarks/step_checks.py [--num-envs 256] [--steps 300] [--repeats 5]
                                        [--timesteps 32768] [--corpus]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _peer import machine

from entityrl.env import RandomPolicy
from entityrl.env.step_checks import FULLY_VALIDATED_STEPS, StepChecks
from entityrl.envs import make_vec

ROOT = Path(__file__).resolve().parent.parent
ENVS = ("CherryPick", "MineSweeper", "PickMatchingBalls", "CherryPickBatched")
TRAIN_ENVS = ("CherryPick", "MineSweeper")


CHECK_METHODS = ("observations", "batched", "checked_batch")


@contextlib.contextmanager
def timed_checks(spent: list[float]) -> Iterator[None]:
    """Add the seconds spent in the checks' entry points to ``spent[0]``."""
    saved = {name: getattr(StepChecks, name) for name in CHECK_METHODS}

    def timed(method: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - start

        return call

    try:
        for name, method in saved.items():
            setattr(StepChecks, name, timed(method))
        yield
    finally:
        for name, method in saved.items():
            setattr(StepChecks, name, method)


@contextlib.contextmanager
def checks_off() -> Iterator[None]:
    """The default checks as no-ops (for comparison only)."""
    saved = {name: getattr(StepChecks, name) for name in CHECK_METHODS}
    try:
        for name in saved:
            setattr(StepChecks, name, lambda *args, **kwargs: None)
        yield
    finally:
        for name, method in saved.items():
            setattr(StepChecks, name, method)


def env_rate(name: str, num_envs: int, steps: int, checks: bool) -> tuple[float, float, float]:
    """Samples per second after the fully validated batches, the share of that time spent in
    the checks, and the seconds the fully validated batches took."""
    spent = [0.0]
    with contextlib.ExitStack() as stack:
        stack.enter_context(timed_checks(spent) if checks else checks_off())
        env = stack.enter_context(make_vec(name, num_envs, seed=0))
        policy = RandomPolicy(env.action_space, seed=0)
        start = time.perf_counter()
        obs = env.reset()
        for _ in range(FULLY_VALIDATED_STEPS):
            obs = env.act(policy.act(obs))
        first = time.perf_counter() - start
        spent[0] = 0.0
        start = time.perf_counter()
        for _ in range(steps):
            obs = env.act(policy.act(obs))
        seconds = time.perf_counter() - start
        return num_envs * steps / seconds, spent[0] / seconds, first


def train_rate(name: str, timesteps: int, checks: bool) -> tuple[float, float]:
    """Training samples per second, from the first rollout to the end of the last iteration,
    and the share of that time spent in the checks."""
    from entityrl.training.config import load_config
    from entityrl.training.runner import Trainer

    spent = [0.0]
    with tempfile.TemporaryDirectory() as run_dir, contextlib.ExitStack() as stack:
        stack.enter_context(timed_checks(spent) if checks else checks_off())
        config = load_config(
            name,
            [
                f"total_timesteps={timesteps}",
                f"log.run_dir={run_dir}/run",
                "log.progress=false",
                "log.tensorboard=false",
            ],
        )
        marks: dict[str, float] = {}
        trainer = Trainer(config, on_iteration=lambda _: marks.update(last=time.perf_counter()))
        collect = trainer.algorithm.sampler.collect

        def timed_collect(*args: Any) -> Any:
            if "first" not in marks:
                marks["first"] = time.perf_counter()
                spent[0] = 0.0  # the fully validated batches of the reset are not counted
            return collect(*args)

        trainer.algorithm.sampler.collect = timed_collect  # type: ignore[method-assign]
        result = trainer.run()
        seconds = marks["last"] - marks["first"]
        return result.steps / seconds, spent[0] / seconds


def compare(measure: Any, repeats: int) -> tuple[list[Any], list[Any]]:
    """``measure(checks)`` alternately on and off, ``repeats`` times each."""
    on: list[Any] = []
    off: list[Any] = []
    for _ in range(repeats):
        on.append(measure(True))
        off.append(measure(False))
    return on, off


def row(label: str, on: list[tuple[float, ...]], off: list[tuple[float, ...]]) -> str:
    """Median rates with and without, the difference, and the median share in the checks."""
    a = statistics.median(r[0] for r in on)
    b = statistics.median(r[0] for r in off)
    share = statistics.median(r[1] for r in on)
    return f"| {label} | {a:,.0f} | {b:,.0f} | {100 * (b - a) / b:+.1f}% | {100 * share:.2f}% |"


def corpus_counts() -> list[str]:
    """How the cases of the late and the multi-player corpus end, and each case that did not
    end precisely."""
    sys.path.insert(0, str(ROOT / "tests" / "fuzz"))
    from late_corpus import ENDINGS, LATE_AT, LATE_CORPUS, MULTIPLAYER_CORPUS, PRECISE, STEPS, play

    lines = [
        f"Every mutation of tests/fuzz/broken_envs.py that applies, from observation {LATE_AT} "
        f"of the broken environment on, {STEPS} steps of random legal actions.",
        "",
        "| corpus | cases | " + " | ".join(ENDINGS) + " |",
        "| --- | ---: |" + " ---: |" * len(ENDINGS),
    ]
    missed: list[str] = []
    for name, cases in (("late", LATE_CORPUS), ("multi-player", MULTIPLAYER_CORPUS)):
        counts: Counter[str] = Counter()
        for case in cases:
            # Batching warns as it casts complex numbers; what counts is how the case ends.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ending = play(case)
            counts[ending.ending] += 1
            if ending.ending != PRECISE:
                missed.append(f"- {case.label}: {ending.ending}; {ending.error[:200]}")
        lines.append(
            f"| {name} | {len(cases)} | " + " | ".join(str(counts[e]) for e in ENDINGS) + " |"
        )
        print(lines[-1], flush=True)
    return lines + (["", *missed] if missed else [])


def overhead(args: argparse.Namespace) -> list[str]:
    """The figures of the checks' cost (see the module's description)."""
    lines = [
        f"Environments alone: {args.num_envs} environments, random legal actions, "
        f"{args.steps} steps after the {FULLY_VALIDATED_STEPS} fully validated batches; "
        f"median of {args.repeats} runs, with and without the checks alternating. Difference = "
        "the share of samples per second lost (negative: the machine's noise exceeds it); in "
        "checks = the share of the time spent inside the checks' calls.",
        "",
        "| environment | with checks (samples/s) | without | difference | in checks "
        "| first batches (s) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name in ENVS:
        on, off = compare(
            lambda checks, n=name: env_rate(n, args.num_envs, args.steps, checks), args.repeats
        )
        first = statistics.median(r[2] for r in on)
        lines.append(row(name, on, off) + f" {first:.3f} |")
        print(lines[-1], flush=True)
    if not args.timesteps:
        return lines
    lines += [
        "",
        f"Training end to end: the shipped config, {args.timesteps:,} steps, samples per "
        "second from the first rollout to the end of the last iteration (as "
        f"benchmarks/throughput.py), median of {args.repeats} runs.",
        "",
        "| environment | with checks (samples/s) | without | difference | in checks |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name in TRAIN_ENVS:
        on, off = compare(
            lambda checks, n=name: train_rate(n, args.timesteps, checks), args.repeats
        )
        lines.append(row(name, on, off))
        print(lines[-1], flush=True)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num-envs", type=int, default=256)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--timesteps", type=int, default=32_768)
    parser.add_argument("--corpus", action="store_true", help="count what the checks catch")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    if args.corpus:
        command = "python benchmarks/step_checks.py --corpus"
        lines = corpus_counts()
    else:
        command = (
            f"python benchmarks/step_checks.py --num-envs {args.num_envs} --steps {args.steps} "
            f"--repeats {args.repeats} --timesteps {args.timesteps}"
        )
        lines = overhead(args)
    print(
        "\n".join(
            [
                "",
                f"### {datetime.date.today().isoformat()}: `{command}`",
                "",
                f"Machine: {machine()}; shared with other jobs (1-minute load average "
                f"{load_before:.1f} before the run, {os.getloadavg()[0]:.1f} after).",
                "",
                *lines,
            ]
        )
    )


if __name__ == "__main__":
    main()
