"""Decisions at their own times: when agents decide, and what the environment gets between
decisions (entityrl.env.decisions)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest

from entityrl.env import (
    Entity,
    Environment,
    EnvValidationError,
    GlobalCategoricalAction,
    GlobalCategoricalActionMask,
    GlobalCategoricalActionSpace,
    Observation,
    ObsSpace,
)
from entityrl.env.decisions import DecidingEnvironment, DecidingGame, Decisions
from entityrl.env.vec_env import SerialVecEnv
from entityrl.envs import make_vec
from entityrl.envs.lanes import Lanes
from entityrl.ragged import RaggedArray
from entityrl.training.config import ConfigError, load_config


class Recorder(Environment):
    """Records the actions it gets; reward = the step's number; ends after ``length`` steps;
    requests a decision on the steps in ``requests``; forbids choice "b" on those in ``no_b``."""

    def __init__(
        self, length: int = 100, requests: tuple[int, ...] = (), no_b: tuple[int, ...] = ()
    ) -> None:
        self.length, self.requests, self.no_b = length, requests, no_b
        self.got: list[Mapping[str, object]] = []
        self.t = 0

    def obs_space(self) -> ObsSpace:
        return ObsSpace(entities={"A": Entity(["x"])})

    def action_space(self) -> dict[str, GlobalCategoricalActionSpace]:
        return {"go": GlobalCategoricalActionSpace(["a", "b"])}

    def observe(self) -> Observation:
        done = self.t >= self.length
        return Observation(
            features={"A": [[float(self.t)]]},
            actions={"go": GlobalCategoricalActionMask([True, self.t not in self.no_b])},
            reward=float(self.t),
            done=done,
        )

    def reset(self) -> Observation:
        self.t = 0
        return self.observe()

    def act(self, actions: Mapping[str, object]) -> Observation:
        self.got.append(dict(actions))
        self.t += 1
        return self.observe()

    def requests_decision(self) -> bool:
        return self.t in self.requests


def choice(index: int) -> dict[str, GlobalCategoricalAction]:
    return {"go": GlobalCategoricalAction(index, "ab"[index])}


def play(env: DecidingEnvironment, steps: int) -> tuple[list[bool], list[object]]:
    """Which steps offered a decision; the policy chooses the step's number mod 2 there."""
    deciding, obs = [], env.reset()
    for t in range(steps):
        deciding.append(bool(obs.actions))
        obs = env.act(choice(t % 2) if obs.actions else {})
    return deciding, [got.get("go") for got in env.env.got]  # type: ignore[attr-defined]


def test_period_and_offset_schedule_decisions_and_repeat_between() -> None:
    env = DecidingEnvironment(Recorder(), Decisions(period=3, offset=1))
    deciding, got = play(env, 8)
    assert deciding == [False, True, False, False, True, False, False, True]
    # Nothing before the first decision; then the decision's action until the next.
    b, a = choice(1)["go"], choice(0)["go"]
    assert got == [None, b, b, b, a, a, a, b]


def test_a_repeated_action_the_mask_now_forbids_is_not_taken() -> None:
    env = DecidingEnvironment(Recorder(no_b=(4,)), Decisions(period=4, offset=1))
    _, got = play(env, 7)
    b = choice(1)["go"]  # chosen at the decisions on steps 1 and 5
    assert got == [None, b, b, b, None, b, b]


def test_no_action_between_decisions() -> None:
    env = DecidingEnvironment(Recorder(), Decisions(period=3, between="none"))
    deciding, got = play(env, 6)
    assert deciding == [True, False, False, True, False, False]
    assert got == [choice(0)["go"], None, None, choice(1)["go"], None, None]


def test_requests_add_decisions_and_the_clock_restarts_with_each_episode() -> None:
    env = DecidingEnvironment(
        Recorder(length=5, requests=(2,)), Decisions(period=4, on_request=True)
    )
    deciding, obs = [], env.reset()
    for _ in range(9):
        deciding.append(bool(obs.actions))
        obs = env.act(choice(0) if obs.actions else {})
        if obs.done:
            assert obs.metrics["decisions"] == 3.0  # steps 0, 2 (requested) and 4
            obs = env.reset()
    assert deciding == [True, False, True, False, True, True, False, True, False]


def test_game_players_decide_at_their_own_periods_and_offsets() -> None:
    game = Lanes(length=7, max_steps=20)
    game.seed(0)
    wrapped = DecidingGame(game, Decisions(periods={"1": 5}, offsets={"1": 2}))
    first = wrapped.reset()
    deciding: dict[str, list[bool]] = {"0": [], "1": []}
    observations = first
    for _ in range(8):
        joint = {}
        for player, obs in observations.items():
            deciding[player].append(bool(obs.actions))
            joint[player] = {"move": GlobalCategoricalAction(1, "stay")} if obs.actions else {}
        observations = wrapped.act(joint)
    assert deciding["0"] == [True] * 8
    assert deciding["1"] == [False, False, True, False, False, False, False, True]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (["env.decisions.offset=3", "env.decisions.period=3"], "below its period 3"),
        (["env.decisions.period=0"], "needs env.decisions.on_request=true"),
        (["env.decisions.between=skip"], "one of repeat, none, got 'skip'"),
        (["env.decisions.periods={x: -2}"], "periods['x'] must be an integer >= 0, got -2"),
    ],
)
def test_bad_settings_are_refused_naming_them(settings: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("(", r"\(")):
        load_config("Lanes", settings)


def test_wrappers_refuse_what_does_not_fit_the_environment() -> None:
    with pytest.raises(ValueError, match=r"name \['2'\], which are not players of Lanes"):
        make_vec("Lanes", 1, decisions=Decisions(periods={"2": 3}))
    with pytest.raises(ValueError, match="Recorder is a single-player environment"):
        DecidingEnvironment(Recorder(), Decisions(offsets={"0": 1}, period=2))
    with pytest.raises(TypeError, match="Lanes does not implement requests_decision"):
        make_vec("Lanes", 1, decisions=Decisions(on_request=True))
    with pytest.raises(ValueError, match="CherryPickBatched is natively batched"):
        make_vec("CherryPickBatched", 1, decisions=Decisions(period=2))


def test_default_settings_wrap_nothing() -> None:
    env = make_vec("Lanes", 2, seed=0, decisions=Decisions())
    assert all(type(game) is Lanes for game in env.games)  # type: ignore[attr-defined]
    assert np.all(env.reset().done == False)  # noqa: E712


class WrongFeatures(Recorder):
    """Its third observation has two features where one is declared."""

    def observe(self) -> Observation:
        observation = super().observe()
        if self.t == 2:
            observation.features = {"A": [[1.0, 2.0]]}
        return observation


def test_a_wrapped_environments_bad_observation_names_the_environment() -> None:
    env = SerialVecEnv(lambda: DecidingEnvironment(WrongFeatures(), Decisions(period=2)), 1, 0)
    env.reset()
    decide = {"go": RaggedArray(np.zeros((1, 1), np.int64), np.ones(1, np.int64))}
    wait = {"go": RaggedArray(np.zeros((0, 1), np.int64), np.zeros(1, np.int64))}
    env.act(decide)
    with pytest.raises(EnvValidationError, match="WrongFeatures") as caught:
        env.act(wait)  # its third observation is the wrong one
    assert "DecidingEnvironment" not in str(caught.value)
