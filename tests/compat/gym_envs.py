"""Small environments written against the entity-gym API (the stand-in in fake_entity_gym).

Like entity-gym's own examples they draw from the global ``random`` and ``np.random``. Each
keeps the last actions it received (``last_actions``) so tests can see exactly what arrived.
Module-level classes, so that worker processes can build them by pickled reference.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import numpy as np
from fake_entity_gym import (
    CategoricalAction,
    CategoricalActionMask,
    CategoricalActionSpace,
    Entity,
    Environment,
    GlobalCategoricalAction,
    GlobalCategoricalActionMask,
    GlobalCategoricalActionSpace,
    Observation,
    ObsSpace,
    SelectEntityAction,
    SelectEntityActionMask,
    SelectEntityActionSpace,
)


class Herd(Environment):
    """1-4 sheep, hungry or not, and a dog; every entity acts ("graze": rest or eat).

    No entity ids (actors arrive as ``(type, index)``), every entity acts (no actor spec), and
    the dog may only rest (per-actor mask). Reward per step: the fraction of sheep that eat
    exactly when hungry (random play: 0.5). Episodes last ``length`` steps; the metric
    ``correct`` is the latest step's reward.
    """

    def __init__(self, length: int = 2) -> None:
        self.length = length
        self.hungry: list[bool] = []
        self.step = 0
        self.last_actions: Mapping[str, Any] = {}

    def obs_space(self) -> ObsSpace:
        return ObsSpace(entities={"Sheep": Entity(["hungry"]), "Dog": Entity(["barking"])})

    def action_space(self) -> dict[str, Any]:
        return {"graze": CategoricalActionSpace(["rest", "eat"])}

    def reset(self) -> Observation:
        self.step = 0
        return self.observe(reward=0.0, correct=0.0)

    def act(self, actions: Mapping[str, Any]) -> Observation:
        self.last_actions = actions
        graze = actions["graze"]
        assert isinstance(graze, CategoricalAction)
        right = 0
        for actor, label in zip(graze.actors, graze.labels, strict=True):
            kind, index = actor
            if kind == "Dog":
                assert label == "rest", "the mask lets the dog only rest"
            else:
                right += (label == "eat") == self.hungry[index]
        reward = right / len(self.hungry)
        self.step += 1
        return self.observe(reward, correct=reward)

    def observe(self, reward: float, correct: float) -> Observation:
        self.hungry = [random.random() < 0.5 for _ in range(random.randint(1, 4))]
        sheep = len(self.hungry)
        return Observation(
            entities={"Sheep": [[float(h)] for h in self.hungry], "Dog": [[1.0]]},
            actions={"graze": CategoricalActionMask(mask=[[True, True]] * sheep + [[True, False]])},
            reward=reward,
            done=self.step >= self.length,
            metrics={"correct": correct},
        )


class PickBest(Environment):
    """A picker takes three of five items (values from ``np.random``), one per step.

    Ids in the ``entities=(features, ids)`` form; the picker is named by id, the candidates
    are the unpicked items by id, and the first candidate is masked while others remain.
    Picked items stay in the observation but are hidden from the policy (``visible``).
    Reward: the value of the item picked.
    """

    def __init__(self, items: int = 5, picks: int = 3) -> None:
        self.items = items
        self.picks = picks
        self.values: list[float] = []
        self.picked: list[str] = []
        self.last_actions: Mapping[str, Any] = {}

    def obs_space(self) -> ObsSpace:
        return ObsSpace(entities={"Item": Entity(["value"]), "Picker": Entity([])})

    def action_space(self) -> dict[str, Any]:
        return {"pick": SelectEntityActionSpace()}

    @property
    def ids(self) -> list[str]:
        return [f"item-{i}" for i in range(self.items)]

    def candidates(self) -> list[str]:
        return [i for i in self.ids if i not in self.picked]

    def reset(self) -> Observation:
        self.values = np.random.uniform(0, 1, size=self.items).tolist()
        self.picked = []
        return self.observe(reward=0.0)

    def act(self, actions: Mapping[str, Any]) -> Observation:
        self.last_actions = actions
        pick = actions["pick"]
        assert isinstance(pick, SelectEntityAction)
        assert list(pick.actors) == ["picker"]
        (chosen,) = pick.actees
        candidates = self.candidates()
        assert chosen in candidates[1:], f"{chosen} is not an allowed candidate"
        self.picked.append(chosen)
        return self.observe(reward=self.values[self.ids.index(chosen)])

    def observe(self, reward: float) -> Observation:
        candidates = self.candidates()
        mask = np.ones((1, len(candidates)), dtype=np.bool_)
        mask[0, 0] = False
        return Observation(
            entities={
                "Item": (np.array(self.values, dtype=np.float32).reshape(-1, 1), self.ids),
                "Picker": (np.zeros((1, 0), dtype=np.float32), ["picker"]),
            },
            actions={
                "pick": SelectEntityActionMask(
                    actor_ids=["picker"], actee_ids=candidates, mask=mask
                )
            },
            visible={"Item": [i not in self.picked for i in self.ids]},
            reward=reward,
            done=len(self.picked) >= self.picks,
        )


class Dial(Environment):
    """Turn a dial towards a target direction given as a global feature; three steps.

    A global categorical action ("turn"; "off" is always masked) and, on even steps only, a
    categorical "tap" by the knob (actors by type, ids in the ``features=``/``ids=`` form).
    Reward 1 per step the dial points at the target.
    """

    DIRECTIONS = ("n", "e", "s", "w", "off")

    def __init__(self) -> None:
        self.target = 0
        self.step = 0
        self.last_actions: Mapping[str, Any] = {}

    def obs_space(self) -> ObsSpace:
        return ObsSpace(global_features=["target"], entities={"Knob": Entity(["angle", "step"])})

    def action_space(self) -> dict[str, Any]:
        return {
            "turn": GlobalCategoricalActionSpace(list(self.DIRECTIONS)),
            "tap": CategoricalActionSpace(["soft", "hard"]),
        }

    def reset(self) -> Observation:
        self.target = random.randrange(4)
        self.step = 0
        return self.observe(reward=0.0)

    def act(self, actions: Mapping[str, Any]) -> Observation:
        self.last_actions = actions
        turn = actions["turn"]
        assert isinstance(turn, GlobalCategoricalAction)
        assert turn.label == self.DIRECTIONS[turn.index] and turn.label != "off"
        assert ("tap" in actions) == (self.step % 2 == 0), "tap arrives when it was offered"
        self.step += 1
        return self.observe(reward=float(turn.index == self.target))

    def observe(self, reward: float) -> Observation:
        actions: dict[str, Any] = {
            "turn": GlobalCategoricalActionMask(mask=np.array([True, True, True, True, False]))
        }
        if self.step % 2 == 0:
            actions["tap"] = CategoricalActionMask(actor_types=["Knob"])
        return Observation(
            features={"Knob": np.array([[0.25 * self.target, self.step]], dtype=np.float32)},
            ids={"Knob": ["knob"]},
            global_features=[float(self.target)],
            actions=actions,
            reward=reward,
            done=self.step >= 3,
        )


ENVS = (Herd, PickBest, Dial)
