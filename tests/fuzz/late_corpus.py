"""The late corpus: every mutation of :mod:`broken_envs` that applies, broken from observation
:data:`LATE_AT` on (long after the fully validated steps, where only the default vectorized
checks run), in single-player environments (categorical, select-entity and continuous actions;
a natively batched one) and in multi-player games; and how each case ends.

A case ends *precisely* when an :class:`EnvValidationError` names the environment (its place
in the batch) and the field; *vaguely* when the error names less; *silently* when nothing is
raised; or in an *unrelated* exception. Run by tests/fuzz/test_late_corpus.py and counted by
``benchmarks/step_checks.py --corpus``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass

from broken_envs import (
    BATCH_MUTATIONS,
    BROKEN_ENV,
    MUTATIONS,
    Boxes,
    Breaking,
    BrokenBatch,
    BrokenCoins,
    BrokenDuel,
    BrokenGame,
    BrokenShip,
)

from entityrl.env import EnvValidationError, RandomPolicy, SerialVecEnv, VecEnv
from entityrl.env.multiplayer_vec import PlayerVecEnv

LATE_AT = 20
"""The first broken observation of the broken environment (its first reset's is 0)."""

STEPS = LATE_AT + 60
"""Steps played: the sampled checks look into one environment in 8 per call, so a persistent
mistake is found within a few dozen calls."""

COPIES = 4
"""Environments (or games) per batch."""

PRECISE, VAGUE, SILENT, UNRELATED = "precise", "vague", "silent", "unrelated"
ENDINGS = (PRECISE, VAGUE, SILENT, UNRELATED)


@dataclass(frozen=True)
class Case:
    """One broken vectorized environment (``make``) and the regex its error must match."""

    label: str
    make: Callable[[], VecEnv]
    expected: str


@dataclass(frozen=True)
class Ending:
    """How a case ended: one of :data:`ENDINGS`, the error, and the step that raised it (0:
    the reset)."""

    ending: str
    error: str = ""
    step: int = -1


def breaking_case(env: type[Breaking], kind: str) -> Case:
    """Mutation ``kind`` in the observations of ``env``'s copy :data:`BROKEN_ENV` (the first
    player's, in a game): the error must name that row of the batch and the field."""
    make = functools.partial(env, kind, LATE_AT)
    row = BROKEN_ENV
    vectorized: Callable[[], VecEnv] = functools.partial(SerialVecEnv, make, COPIES, seed=0)
    if issubclass(env, BrokenGame):
        row = BROKEN_ENV * len(env().players())  # type: ignore[abstract]
        vectorized = functools.partial(PlayerVecEnv, make, COPIES, seed=0)
    field = MUTATIONS[kind].field_of(env.target)
    expected = re.escape(f"{env.__name__} (environment {row}): ") + r"(Observation\.)?"
    return Case(f"{env.__name__}: {kind}", vectorized, expected + re.escape(field))


def batch_case(kind: str) -> Case:
    """Mutation ``kind`` of :class:`BrokenBatch`: the error is the batch validator's."""
    return Case(
        f"BrokenBatch: {kind}",
        functools.partial(BrokenBatch, COPIES, seed=0, kind=kind, at=LATE_AT),
        r"BrokenBatch: VecObs\." + BATCH_MUTATIONS[kind],
    )


def breaking_cases(envs: tuple[type[Breaking], ...]) -> list[Case]:
    return [
        breaking_case(env, kind)
        for env in envs
        for kind, mutation in MUTATIONS.items()
        if mutation.applies(env.target)
    ]


LATE_CORPUS = [*breaking_cases((Boxes, BrokenShip)), *map(batch_case, BATCH_MUTATIONS)]
"""Single-player environments."""

MULTIPLAYER_CORPUS = breaking_cases((BrokenDuel, BrokenCoins))
"""Multi-player games."""


def play(case: Case) -> Ending:
    """Play ``case`` with random legal actions for :data:`STEPS` steps."""
    env = case.make()
    played = 0
    try:
        policy = RandomPolicy(env.action_space, seed=0)
        obs = env.reset()
        for _ in range(STEPS):
            obs = env.act(policy.act(obs))
            played += 1
    except EnvValidationError as err:
        ending = PRECISE if re.match(case.expected, str(err)) else VAGUE
        return Ending(ending, str(err), played)
    except Exception as err:  # what the corpus counts, whatever it is
        return Ending(UNRELATED, f"{type(err).__name__}: {err}", played)
    finally:
        env.close()
    return Ending(SILENT)
