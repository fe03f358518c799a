"""Every kind of broken environment is caught with a message naming the environment and the
field: by the default checks (whether the mistake shows in the first, fully validated steps
or later, where only the vectorized checks run) and by full validation."""

from __future__ import annotations

import functools

import pytest
from broken_envs import BATCH_MUTATIONS, BROKEN_ENV, MUTATIONS, Boxes, BrokenBatch

from entityrl.env import EnvValidationError, ProcessVecEnv, RandomPolicy, SerialVecEnv, VecEnv
from entityrl.env.step_checks import FULLY_VALIDATED_STEPS, SAMPLE_STRIDE

# The reset (the default checks validate it fully) and a step long after the full checks.
EARLY, LATE = 0, FULLY_VALIDATED_STEPS + 4


# Long enough after LATE for the sampled checks, which look into one environment in
# SAMPLE_STRIDE per call, to come to the broken one.
def play(env: VecEnv, steps: int = LATE + 8 * SAMPLE_STRIDE) -> None:
    policy = RandomPolicy(env.action_space, seed=0)
    obs = env.reset()
    for _ in range(steps):
        obs = env.act(policy.act(obs))


def expected(kind: str, validate: bool) -> str:
    # The default checks name the environment's place in the batch; a validating
    # environment, which checks itself, knows only its own name.
    where = r"Boxes: " if validate else rf"Boxes \(environment {BROKEN_ENV}\): "
    return where + r"(Observation\.)?" + MUTATIONS[kind].message


def test_the_well_formed_environment_passes_both_paths() -> None:
    for validate in (False, True):
        play(SerialVecEnv(Boxes, 4, seed=0, validate=validate))


@pytest.mark.parametrize("validate", [False, True], ids=["default", "validate"])
@pytest.mark.parametrize("at", [EARLY, LATE], ids=["early", "late"])
@pytest.mark.parametrize("kind", list(MUTATIONS))
def test_a_broken_environment_is_caught_with_the_field_named(
    kind: str, at: int, validate: bool
) -> None:
    env = SerialVecEnv(functools.partial(Boxes, kind, at), 4, seed=0, validate=validate)
    with pytest.raises(EnvValidationError, match=expected(kind, validate)):
        play(env)


@pytest.mark.parametrize("kind", ["nan reward", "duplicate ids", "unknown entity type"])
def test_an_environment_in_a_worker_process_is_named_by_its_place_in_the_whole_batch(
    kind: str,
) -> None:
    env = ProcessVecEnv(functools.partial(Boxes, kind, LATE), 4, seed=0, num_workers=2)
    try:
        with pytest.raises(EnvValidationError, match=expected(kind, validate=False)):
            play(env)
    finally:
        env.close()


@pytest.mark.parametrize("validate", [False, True], ids=["default", "validate"])
@pytest.mark.parametrize("at", [EARLY, LATE], ids=["early", "late"])
@pytest.mark.parametrize("kind", list(BATCH_MUTATIONS))
def test_a_broken_batched_environment_is_caught_with_the_field_named(
    kind: str, at: int, validate: bool
) -> None:
    env = BrokenBatch(4, seed=0, kind=kind, at=at)
    env.validate = validate
    message = r"BrokenBatch: VecObs\." + BATCH_MUTATIONS[kind]
    with pytest.raises(EnvValidationError, match=message):
        play(env)
