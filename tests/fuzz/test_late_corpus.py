"""Every mistake of the late corpus (see late_corpus.py), made long after the fully validated
steps, in single-player environments and in multi-player games, stops the run with an
EnvValidationError naming the environment's place in the batch and the field: none passes
silently, none ends in an unrelated exception."""

from __future__ import annotations

import pytest
from late_corpus import LATE_CORPUS, MULTIPLAYER_CORPUS, PRECISE, Case, play

from entityrl.env.step_checks import FULLY_VALIDATED_STEPS

CASES = [*LATE_CORPUS, *MULTIPLAYER_CORPUS]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.label)
def test_a_late_mistake_is_caught_naming_the_environment_and_the_field(case: Case) -> None:
    ending = play(case)
    assert ending.ending == PRECISE, f"{case.label}: {ending}"
    # Found by the default checks, not by the full validation of the first batches.
    assert ending.step > FULLY_VALIDATED_STEPS
