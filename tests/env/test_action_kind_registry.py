"""A kind of action registered with ``register_kind`` works where actions are recorded, shown
to a person and handed to Gymnasium, without those places naming it; what it lacks is named.

The kind here, "toggle", is new from its space to its batched mask (none of its classes is a
built-in one): each lamp is switched off (0) or on (1).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from entityrl.env import Action, Entity, Environment, Observation, ObsSpace, SerialVecEnv
from entityrl.env import actions as kinds
from entityrl.env.actions import kind_of, register_kind
from entityrl.env.actions.kind import Options, PerActorKind, Unbatching
from entityrl.env.random_policy import RandomPolicy
from entityrl.env.vec_obs import VecObs
from entityrl.interop.gymnasium import EntityGymnasiumEnv, UnsupportedSpaceError
from entityrl.play.choices import legal_turns, to_actions
from entityrl.play.entities import RowEntities
from entityrl.ragged import RaggedArray
from entityrl.recording import Recording, RecordingVecEnv

SWITCH = ("off", "on")


@dataclass(frozen=True)
class ToggleSpace:
    """Each acting entity switches something off or on."""


@dataclass
class ToggleMask:
    actor_types: Sequence[str] | None = None
    actor_ids: Sequence[Any] | None = None


@dataclass
class ToggleAction:
    actors: Sequence[Any]
    on: npt.NDArray[np.int64]


@dataclass
class VecToggleMask:
    actors: RaggedArray
    mask = None  # every switch is legal

    def take(self, rows: npt.NDArray[np.int64]) -> VecToggleMask:
        return VecToggleMask(self.actors.take(rows))

    @staticmethod
    def concat(masks: Sequence[VecToggleMask], choices: int = 0) -> VecToggleMask:
        return VecToggleMask(RaggedArray.concat([m.actors for m in masks]))


class UnlistedToggleKind(PerActorKind):
    """Everything the environment layer needs, but it does not list its options."""

    space = ToggleSpace
    mask = ToggleMask
    action = ToggleAction
    vec_mask = VecToggleMask

    def from_data(self, data: Mapping[str, Any]) -> ToggleSpace:
        return ToggleSpace()

    def batch_mask(self, space: Any, specs: Sequence[Any], index: Any) -> VecToggleMask:
        return VecToggleMask(self.actors(specs, index))

    def mask_from_columns(self, space: Any, columns: Mapping[str, RaggedArray]) -> VecToggleMask:
        return VecToggleMask(columns["actors"])

    def unbatch(self, space: Any, values: RaggedArray, to: Unbatching) -> Iterator[tuple[int, Any]]:
        for i, _, actors, lo, hi in self.named_actors(values, to):
            yield i, to.make(actors, values.data[lo:hi, 0])

    def numbers(self, action: ToggleAction) -> npt.ArrayLike:
        return action.on

    def random(self, space: Any, mask: Any, rng: np.random.Generator) -> npt.NDArray[np.int64]:
        return rng.integers(0, len(SWITCH), (mask.actors.items, 1))

    def validate_mask(self, check: Any, field: str, space: Any, spec: Any) -> None:
        check.entities(f"{field}.actor", spec.actor_ids, spec.actor_types)

    def validate_vec_mask(self, check: Any, field: str, space: Any, mask: Any) -> None:
        actors = check.ragged(f"{field}.actors", mask.actors, np.int64, 1, "one entity index")
        check.entities_of_row(f"{field}.actors", actors, "actor")

    def validate_action(self, check: Any, space: Any, action: Any, spec: Any) -> None:
        check.actor_rows()


class ToggleKind(UnlistedToggleKind):
    def choices(self, space: Any) -> Sequence[str]:
        return SWITCH

    def options(self, space: Any, mask: VecToggleMask, row: int) -> Options:
        actors = mask.actors[row][:, 0].tolist()
        return Options(actors, np.ones((len(actors), len(SWITCH)), np.bool_), labels=SWITCH)


class Lamps(Environment):
    """One to three lamps; each step every lamp is switched, and each lamp on pays 1. Episodes
    last three steps. ``received`` keeps what ``act`` was given."""

    def __init__(self) -> None:
        self.received: list[ToggleAction] = []
        self.t = 0
        self.lamps = 1

    def obs_space(self) -> ObsSpace:
        return ObsSpace(entities={"Lamp": Entity(["height"])})

    def action_space(self) -> dict[str, ToggleSpace]:
        return {"switch": ToggleSpace()}

    def reset(self) -> Observation:
        self.t, self.lamps = 0, int(self.rng.integers(1, 4))
        return self.observe(0.0)

    def act(self, actions: Mapping[str, Action]) -> Observation:
        switch = actions["switch"]
        assert isinstance(switch, ToggleAction)
        self.received.append(switch)
        self.t += 1
        return self.observe(float(np.sum(switch.on)))

    def observe(self, reward: float) -> Observation:
        return Observation(
            features={"Lamp": np.arange(self.lamps, dtype=np.float32).reshape(-1, 1)},
            actions={"switch": ToggleMask(actor_types=["Lamp"])},
            ids={"Lamp": [f"lamp-{i}" for i in range(self.lamps)]},
            reward=reward,
            done=self.t == 3,
        )


@pytest.fixture
def toggle(monkeypatch: pytest.MonkeyPatch) -> None:
    """The toggle kind registered for this test only (a copy of the registry is restored)."""
    monkeypatch.setattr(kinds, "_BY_SPACE", dict(kinds._BY_SPACE))
    register_kind(ToggleKind())


def _random_steps(env: SerialVecEnv, steps: int) -> list[tuple[VecObs, dict[str, RaggedArray]]]:
    policy = RandomPolicy(env.action_space, seed=0)
    seen = []
    obs = env.reset()
    for _ in range(steps):
        actions = policy.act(obs)
        seen.append((obs, actions))
        obs = env.act(actions)
    return seen


def test_a_registered_kind_is_recorded_and_read_back(toggle: None, tmp_path: Path) -> None:
    path = tmp_path / "lamps.arrow"
    with RecordingVecEnv(SerialVecEnv(Lamps, 1, seed=0), path) as env:
        seen = _random_steps(env, 6)  # two whole episodes
    recording = Recording(path)
    assert recording.header.action_space == {"switch": ToggleSpace()}
    assert [f.name for f in recording.schema if f.name.endswith("/switch")] == [
        "actors/switch",
        "action/switch",
    ]
    episodes = list(recording.episodes())
    assert [e.length for e in episodes] == [3, 3]
    for t, (obs, actions) in enumerate(seen):
        episode = episodes[t // 3]
        mask = episode.obs.action_masks["switch"]
        assert isinstance(mask, VecToggleMask)
        row = np.array([t % 3])
        np.testing.assert_array_equal(
            mask.actors.take(row).data, obs.action_masks["switch"].actors.data
        )
        np.testing.assert_array_equal(
            episode.actions["switch"].take(row).data, actions["switch"].data
        )


def test_a_person_is_offered_a_registered_kind_s_choices(toggle: None) -> None:
    env = SerialVecEnv(Lamps, 1, seed=1)
    obs = env.reset()
    lamps = obs.features["Lamp"].items
    assert lamps > 1
    turns = legal_turns(obs, env.action_space, RowEntities(obs, env.obs_space))
    assert [(t.actor, [o.label for o in t.options]) for t in turns] == [
        (lamp, ["off", "on"]) for lamp in range(lamps)
    ]
    picks = [turn.options[lamp % 2] for lamp, turn in enumerate(turns)]  # off, on, off, ...
    env.act(to_actions(obs, turns, picks))
    (received,) = env.envs[0].received  # type: ignore[attr-defined]
    assert received.actors == [f"lamp-{i}" for i in range(lamps)]
    assert received.on.tolist() == [lamp % 2 for lamp in range(lamps)]


def test_gymnasium_takes_a_registered_kind_of_fixed_choices(toggle: None) -> None:
    lamps = Lamps()
    lamps.seed(1)
    env = EntityGymnasiumEnv(lamps, max_entities=3)
    assert env.action_space.nvec.tolist() == [2, 2, 2]
    obs, _ = env.reset()
    assert obs["switch_mask"].tolist() == [[1, 1]] * lamps.lamps + [[0, 0]] * (3 - lamps.lamps)
    _, reward, *_ = env.step(np.array([1, 1, 1]))
    assert reward == lamps.lamps  # every lamp present was switched on; the padding ignored
    assert lamps.received[0].on.tolist() == [1] * lamps.lamps


def test_an_action_s_values_come_back_through_its_kind(toggle: None) -> None:
    space = ToggleSpace()
    values = kind_of(space).action_values(space, ToggleAction(["a", "b"], np.array([1, 0])))
    assert values.tolist() == [[1], [0]] and values.dtype == np.int64
    with pytest.raises(TypeError, match="ToggleKind: expected a ToggleAction, got str"):
        kind_of(space).action_values(space, "on")


def test_what_a_registered_kind_lacks_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kinds, "_BY_SPACE", dict(kinds._BY_SPACE))
    register_kind(UnlistedToggleKind())
    env = SerialVecEnv(Lamps, 1, seed=0)
    obs = env.reset()
    with pytest.raises(NotImplementedError, match=r"UnlistedToggleKind .* \(ActionKind.options\)"):
        legal_turns(obs, env.action_space, RowEntities(obs, env.obs_space))
    with pytest.raises(UnsupportedSpaceError, match="'switch': ToggleSpace has no Gymnasium"):
        EntityGymnasiumEnv(Lamps(), max_entities=3)
