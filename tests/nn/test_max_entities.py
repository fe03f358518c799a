"""Observations too large for attention (whose cost is the square of a row's entities) are
refused at once, naming the setting that raises the limit."""

from __future__ import annotations

import time

import numpy as np
import pytest

from entityrl.env import (
    Batcher,
    CategoricalActionMask,
    CategoricalActionSpace,
    Entity,
    Observation,
    ObsSpace,
    VecObs,
)
from entityrl.nn import RogueNet, RogueNetConfig
from entityrl.nn.rogue_net import ObservationTooLargeError
from entityrl.training.config import ConfigError, load_config

OBS_SPACE = ObsSpace(entities={"Unit": Entity(["x", "y"]), "Item": Entity(["x"])})
ACTION_SPACE = {"move": CategoricalActionSpace(["a", "b"])}
BATCHER = Batcher(OBS_SPACE, ACTION_SPACE)


def batch(*sizes: int) -> VecObs:
    """One row per size, of that many entities (half units, which act, half items)."""
    rng = np.random.default_rng(0)
    return BATCHER.batch(
        [
            Observation(
                features={
                    "Unit": rng.normal(size=(n // 2, 2)).astype(np.float32),
                    "Item": rng.normal(size=(n - n // 2, 1)).astype(np.float32),
                },
                actions={"move": CategoricalActionMask(actor_types=["Unit"])},
            )
            for n in sizes
        ]
    )


def test_an_observation_of_20000_entities_is_refused_within_a_second() -> None:
    net = RogueNet(OBS_SPACE, ACTION_SPACE)
    obs = batch(10, 20_000, 30)
    started = time.perf_counter()
    with pytest.raises(ObservationTooLargeError) as caught:
        net.act(obs)
    assert time.perf_counter() - started < 1.0
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(
        "an observation holds 20,000 entities (row 1 of the batch), more than "
        "net.max_entities=4,096"
    )
    assert "raise net.max_entities" in message


def test_the_limit_is_a_setting() -> None:
    net = RogueNet(OBS_SPACE, ACTION_SPACE, RogueNetConfig(max_entities=8))
    net.act(batch(8, 3))
    with pytest.raises(ObservationTooLargeError, match=r"9 entities .* net\.max_entities=8"):
        net.values(batch(9))
    RogueNet(OBS_SPACE, ACTION_SPACE, RogueNetConfig(max_entities=0)).act(batch(5000))
    assert load_config("CherryPick", ["net.max_entities=10000"]).net.max_entities == 10_000
    with pytest.raises(ConfigError, match=r"net\.max_entities must be >= 0"):
        load_config("CherryPick", ["net.max_entities=-1"])
