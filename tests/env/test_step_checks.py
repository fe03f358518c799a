"""The default step checks after the fully validated steps: no false alarm on observations the
validator accepts, however odd; and the sampled checks come to every environment."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from entityrl.env import (
    Action,
    CategoricalActionMask,
    CategoricalActionSpace,
    Entity,
    Environment,
    EnvValidationError,
    Image,
    Observation,
    ObsSpace,
    RandomPolicy,
    SelectEntityActionMask,
    SelectEntityActionSpace,
    SerialVecEnv,
)
from entityrl.env.step_checks import (
    ARRAYS_STRIDE,
    FULLY_VALIDATED_STEPS,
    SAMPLE_STRIDE,
    StepChecks,
)

SPACE = ObsSpace(
    entities={"Crate": Entity(["weight", "x"]), "Ghost": Entity(["y"]), "Agent": Entity([])},
    global_features=["step"],
)


class OddButValid(Environment):
    """Observations the validator accepts in their least usual forms: integer, boolean and
    float16 features, no features as an empty 1-D array, empty float arrays as the mask of no
    actors and as the visibility of no entities, integer global features, numpy scalars as
    reward and done."""

    def obs_space(self) -> ObsSpace:
        return SPACE

    def action_space(self) -> dict[str, Any]:
        return {
            "push": CategoricalActionSpace(["no", "yes"]),
            "haunt": CategoricalActionSpace(["boo", "hush"]),
            "pick": SelectEntityActionSpace(),
        }

    def reset(self) -> Observation:
        self.step = 0
        return self._observe()

    def act(self, actions: Mapping[str, Action]) -> Observation:
        self.step += 1
        return self._observe()

    def _observe(self) -> Observation:
        crates = int(self.rng.integers(1, 4))
        dtype = (np.int64, np.bool_, np.float16)[self.step % 3]
        return Observation(
            features={
                "Crate": self.rng.integers(0, 2, size=(crates, 2)).astype(dtype),
                "Ghost": np.array([]),
                "Agent": np.zeros((1, 0), np.float32),
            },
            global_features=[self.step],
            actions={
                "push": CategoricalActionMask(
                    actor_types=["Crate"], mask=np.ones((crates, 2), np.bool_)
                ),
                "haunt": CategoricalActionMask(actor_types=["Ghost"], mask=np.zeros((0, 2))),
                "pick": SelectEntityActionMask(actor_types=["Agent"], actee_types=["Crate"]),
            },
            visible={"Ghost": np.array([])},
            reward=np.float32(1.0),
            done=np.bool_(self.step == 5),
        )


@pytest.mark.parametrize("validate", [False, True], ids=["default", "validate"])
def test_observations_the_validator_accepts_pass_the_default_checks(validate: bool) -> None:
    env = SerialVecEnv(OddButValid, 16, seed=0, validate=validate)
    policy = RandomPolicy(env.action_space, seed=0)
    obs = env.reset()
    for _ in range(FULLY_VALIDATED_STEPS + 20 * SAMPLE_STRIDE):
        obs = env.act(policy.act(obs))


def _observation(features: Any) -> Observation:
    return Observation(
        features={"Crate": features, "Agent": np.zeros((1, 0))}, global_features=[0.0]
    )


def test_the_sample_comes_to_every_environment_whatever_the_rhythm_of_calls() -> None:
    # Each step checks 16 environments, then single ones (resets, say): ARRAYS_STRIDE calls a
    # step. A sample whose start moved on by one each call would look at the same one of the
    # 16 on every step.
    checks = StepChecks(SPACE, {}, "Rhythm", full_steps=0)
    good = _observation(np.zeros((2, 2)))
    broken = _observation(np.zeros((2, 2)) + 1j)  # complex: batching would drop the 1j
    batch = [good] * 16
    batch[5] = broken
    with pytest.raises(EnvValidationError, match=r"Rhythm \(environment 5\): .*'Crate'"):
        for _ in range(200):
            checks.observations(batch)
            for k in range(ARRAYS_STRIDE - 1):
                checks.observations([good], [16 + k])


class BrightensLate(Environment):
    """A float32 image that leaves [0, 1] long after the fully validated steps."""

    def obs_space(self) -> ObsSpace:
        return ObsSpace(
            entities={"Agent": Entity([])}, images={"view": Image((2, 3, 1), "float32")}
        )

    def action_space(self) -> dict[str, Any]:
        return {"move": CategoricalActionSpace(["stay", "go"])}

    def reset(self) -> Observation:
        self.step = 0
        return self._observe()

    def act(self, actions: Mapping[str, Action]) -> Observation:
        self.step += 1
        return self._observe()

    def _observe(self) -> Observation:
        view = np.full((2, 3, 1), 0.5, np.float32)
        if self.step >= FULLY_VALIDATED_STEPS + 3:
            view[1, 2, 0] = 1.5
        return Observation(
            features={"Agent": np.zeros((1, 0), np.float32)},
            actions={"move": CategoricalActionMask(actor_types=["Agent"])},
            images={"view": view},
            reward=0.0,
            done=False,
        )


def test_a_float32_image_out_of_range_after_the_validated_steps_is_caught() -> None:
    env = SerialVecEnv(BrightensLate, 3, seed=0)
    policy = RandomPolicy(env.action_space, seed=0)
    obs = env.reset()
    with pytest.raises(EnvValidationError, match=r"images\['view'\].*expected a value in \[0, 1\]"):
        for _ in range(FULLY_VALIDATED_STEPS + 5):
            obs = env.act(policy.act(obs))
