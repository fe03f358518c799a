"""A corpus of broken environments: one well-formed environment and one mutation per kind of
mistake a simulator author makes, each with the field its error must name.

Module-level classes, so that worker processes can build them by pickled reference.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from entityrl.env import (
    Action,
    BatchedEnvironment,
    CategoricalActionMask,
    CategoricalActionSpace,
    Entity,
    Environment,
    Observation,
    ObsSpace,
    SelectEntityActionMask,
    SelectEntityActionSpace,
    VecCategoricalMask,
    VecObs,
)
from entityrl.ragged import RaggedArray

BROKEN_ENV = 2
"""The environment of a batch (seeded ``seed + BROKEN_ENV``) whose observations break."""


class Boxes(Environment):
    """2-4 boxes (weight, x; ids ``box-k``) and a picker; boxes move, the picker picks one.
    Episodes last 3 steps; a global feature counts them. Well-formed unless ``kind`` names a
    mutation of :data:`MUTATIONS`, applied to environment :data:`BROKEN_ENV`'s observations
    from step ``at`` on (its reset is step 0)."""

    def __init__(self, kind: str | None = None, at: int = 0) -> None:
        self.kind = kind
        self.at = at
        self.index = -1
        self.steps = 0

    def seed(self, seed: int) -> None:
        super().seed(seed)
        self.index = seed

    def obs_space(self) -> ObsSpace:
        return ObsSpace(
            entities={"Box": Entity(["weight", "x"]), "Picker": Entity([])},
            global_features=["time"],
        )

    def action_space(self) -> dict[str, Any]:
        return {
            "move": CategoricalActionSpace(["left", "right"]),
            "pick": SelectEntityActionSpace(),
        }

    def reset(self) -> Observation:
        self.time = 0
        self.count = int(self.rng.integers(2, 5))
        return self._observe()

    def act(self, actions: Mapping[str, Action]) -> Observation:
        self.time += 1
        return self._observe(reward=1.0, done=self.time == 3)

    def _observe(self, reward: float = 0.0, done: bool = False) -> Observation:
        n = self.count
        obs = Observation(
            features={"Box": self.rng.uniform(0, 1, size=(n, 2)), "Picker": np.zeros((1, 0))},
            ids={"Box": [f"box-{k}" for k in range(n)], "Picker": ["picker"]},
            global_features=[float(self.time)],
            actions={
                "move": CategoricalActionMask(actor_types=["Box"], mask=np.ones((n, 2), bool)),
                "pick": SelectEntityActionMask(actor_types=["Picker"], actee_types=["Box"]),
            },
            reward=reward,
            done=done,
        )
        self.steps += 1
        if self.kind is not None and self.index == BROKEN_ENV and self.steps > self.at:
            return MUTATIONS[self.kind].mutate(obs)  # type: ignore[return-value]
        return obs


@dataclass(frozen=True)
class Mutation:
    """A mistake: how it breaks an observation, and what the error must say (a regex matched
    after ``Observation.``)."""

    mutate: Callable[[Observation], Any]
    message: str


def _set(**changes: Any) -> Callable[[Observation], Observation]:
    def mutate(obs: Observation) -> Observation:
        for name, value in changes.items():
            setattr(obs, name, value(obs) if callable(value) else value)
        return obs

    return mutate


def _box_features(value: float) -> Callable[[Observation], Observation]:
    def mutate(obs: Observation) -> Observation:
        obs.features["Box"][1, 0] = value  # type: ignore[index]
        return obs

    return mutate


def _with(field: str, key: str, value: Callable[[Observation], Any]) -> Callable[..., Any]:
    def mutate(obs: Observation) -> Observation:
        getattr(obs, field)[key] = value(obs)
        return obs

    return mutate


MUTATIONS: dict[str, Mutation] = {
    "nan feature": Mutation(
        _box_features(np.nan),
        r"features\['Box'\]\[1\]: feature 'weight': expected a finite number, got nan",
    ),
    "inf feature": Mutation(
        _box_features(np.inf),
        r"features\['Box'\]\[1\]: feature 'weight': expected a finite number, got inf",
    ),
    "nan global feature": Mutation(
        _set(global_features=[np.nan]),
        r"global_features: feature 'time': expected a finite number, got nan",
    ),
    "global features too long": Mutation(
        _set(global_features=[0.0, 1.0]),
        r"global_features: expected 1 global features \(time\), got shape \(2,\)",
    ),
    "nan reward": Mutation(_set(reward=np.nan), r"reward: expected a finite number, got nan"),
    "inf reward": Mutation(_set(reward=-np.inf), r"reward: expected a finite number, got -inf"),
    "reward not a number": Mutation(_set(reward="1"), r"reward: expected a number, got str '1'"),
    "done not a bool": Mutation(_set(done="yes"), r"done: expected a bool, got str 'yes'"),
    "done a number": Mutation(_set(done=1), r"done: expected a bool, got int 1"),
    "features too wide": Mutation(
        _with("features", "Box", lambda obs: np.zeros((len(obs.features["Box"]), 3))),
        r"features\['Box'\]: expected shape \(entities, 2\) with 2 features per entity "
        r"\(weight, x\), got shape \(\d, 3\)",
    ),
    "features not a 2-d array": Mutation(
        _with("features", "Box", lambda obs: np.zeros(len(obs.features["Box"]))),
        r"features\['Box'\]: expected shape \(entities, 2\) .* got shape \(\d,\)",
    ),
    "feature a string": Mutation(
        _with("features", "Box", lambda obs: [["heavy", 0.0]] * len(obs.features["Box"])),
        r"features\['Box'\]\[0\]: feature 'weight': expected a number, got str 'heavy'",
    ),
    "unknown entity type": Mutation(
        _with("features", "no-such-entity", lambda obs: np.zeros((1, 2))),
        r"features\['no-such-entity'\]: unknown entity type 'no-such-entity'; "
        r"declared types: 'Box', 'Picker'",
    ),
    "unknown action": Mutation(
        _with("actions", "jump", lambda obs: CategoricalActionMask(actor_types=["Box"])),
        r"actions\['jump'\]: unknown action 'jump'; declared actions: 'move', 'pick'",
    ),
    "ids one short": Mutation(
        _with("ids", "Box", lambda obs: obs.ids["Box"][:-1]),
        r"ids\['Box'\]: expected one id per entity \(\d\), got \d",
    ),
    "ids of an unknown type": Mutation(
        _with("ids", "Crate", lambda obs: ["crate"]),
        r"ids\['Crate'\]: unknown entity type 'Crate'",
    ),
    "duplicate ids": Mutation(
        _with("ids", "Box", lambda obs: ["box-0"] * len(obs.ids["Box"])),
        r"ids\['Box'\]\[1\]: expected every entity to have its own id, got 'box-0' again",
    ),
    "actor id unknown": Mutation(
        _with("actions", "move", lambda obs: CategoricalActionMask(actor_ids=["no-such-entity"])),
        r"actions\['move'\]\.actor_ids\[0\]: .*'no-such-entity'",
    ),
    "mask of the wrong shape": Mutation(
        _with(
            "actions",
            "move",
            lambda obs: CategoricalActionMask(actor_types=["Box"], mask=np.ones((1, 5), bool)),
        ),
        r"actions\['move'\]\.mask: expected shape \(\d, 2\)",
    ),
    "visible of the wrong length": Mutation(
        _with("visible", "Box", lambda obs: np.ones(7, bool)),
        r"visible\['Box'\]: expected \d booleans \(one per entity\), got bool of shape \(7,\)",
    ),
    "metric not finite": Mutation(
        _with("metrics", "score", lambda obs: np.nan),
        r"metrics\['score'\]: expected a finite number, got nan",
    ),
    "not an observation": Mutation(
        lambda obs: dict(vars(obs)),
        r"expected reset\(\)/act\(\) to return an Observation, got dict",
    ),
}


class BrokenBatch(BatchedEnvironment):
    """A natively batched counter (one "Dot" per copy, a "Push" action) whose batches break
    from step ``at`` on, in copy :data:`BROKEN_ENV`, as ``kind`` says (see
    :data:`BATCH_MUTATIONS`)."""

    obs_space = ObsSpace(entities={"Dot": Entity(["x"])})

    def __init__(self, num_envs: int, seed: int | None = None, kind: str = "", at: int = 0):
        super().__init__(num_envs, seed)
        self.kind, self.at, self.steps = kind, at, 0
        self.action_space = {"push": CategoricalActionSpace(["no", "yes"])}
        self.x = np.zeros(num_envs, dtype=np.float32)

    def reset_envs(self, envs: npt.NDArray[np.int64]) -> None:
        self.x[envs] = 0.0

    def step(
        self, actions: Mapping[str, RaggedArray]
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.bool_]]:
        self.x += actions["push"].data[:, 0]
        reward = np.ones(self.num_envs, dtype=np.float32)
        if self.kind == "nan reward" and self.steps >= self.at:
            reward[BROKEN_ENV] = np.nan
        done = self.x > 3
        return reward, done.astype(np.int8) if self.kind == "done not bool" else done  # type: ignore[return-value]

    def observe(self) -> VecObs:
        self.steps += 1
        n = self.num_envs
        ones = np.ones(n, dtype=np.int64)
        x = self.x.reshape(-1, 1).copy()
        if self.steps > self.at:
            if self.kind == "nan feature":
                x[BROKEN_ENV, 0] = np.nan
            if self.kind == "features too wide":
                x = np.zeros((n, 2), dtype=np.float32)
        return VecObs(
            features={"Dot": RaggedArray(x, ones)},
            global_features=np.zeros((n, 0), dtype=np.float32),
            action_masks={
                "push": VecCategoricalMask(RaggedArray(np.zeros((n, 1), np.int64), ones))
            },
            reward=np.zeros(n, dtype=np.float32),
            done=np.zeros(n, dtype=np.bool_),
        )


BATCH_MUTATIONS = {
    "nan feature": rf"features\['Dot'\]: row {BROKEN_ENV}, entity 0: feature 'x': expected a "
    "finite number, got nan",
    "features too wide": r"features\['Dot'\]: expected .*1 features per entity",
    "nan reward": rf"reward: row {BROKEN_ENV}: expected a finite number, got nan",
    "done not bool": r"done: expected booleans, got dtype int8",
}
