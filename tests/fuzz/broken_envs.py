"""A corpus of broken environments: well-formed environments (single-player ones with
categorical, select-entity and continuous actions, multi-player games, a natively batched one)
and one mutation per kind of mistake a simulator author makes, each with the field its error
must name.

Module-level classes, so that worker processes can build them by pickled reference.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

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
from entityrl.env.environment import Simulation
from entityrl.env.multiplayer import MultiPlayerEnvironment, PlayerActions
from entityrl.envs.coin_duel import ACTIONS, CoinDuel
from entityrl.envs.move_to_origin import ContinuousMoveToOrigin
from entityrl.envs.rps_duel import THROWS, RockPaperScissorsDuel
from entityrl.ragged import RaggedArray

BROKEN_ENV = 2
"""The environment (or game) of a batch, seeded ``seed + BROKEN_ENV``, whose observations
break."""


@dataclass(frozen=True)
class Target:
    """What the mutations break in an environment's observations.

    ``entity``: a type with an entity in every observation; ``action``: an action offered in
    every observation. The rest says which mutations apply: ``features``, ``entity`` has
    features; ``choices``, ``action`` is categorical with that many choices (masks can be
    broken); ``per_actor``, ``action`` is taken by entities (not by the observation as a
    whole); ``select``, a select-entity action offered in every observation; ``twins``,
    ``entity`` has two entities or more in every observation.
    """

    entity: str
    action: str
    features: bool = True
    choices: int = 0
    per_actor: bool = True
    select: str | None = None
    twins: bool = False


class Breaking(Simulation):
    """A simulation whose copy :data:`BROKEN_ENV` (the one seeded with it) breaks its
    observations from its ``at``-th on (its first reset's is 0), as mutation ``kind`` of
    :data:`MUTATIONS` says (well-formed if ``kind`` is None)."""

    target: ClassVar[Target]

    def __init__(self, kind: str | None = None, at: int = 0) -> None:
        super().__init__()
        self.kind = kind
        self.at = at
        self.index = -1
        self.steps = 0

    def seed(self, seed: int) -> None:
        super().seed(seed)
        self.index = seed

    def broken(self, obs: Observation) -> Any:
        """``obs``, broken if its time has come."""
        self.steps += 1
        if self.kind is not None and self.index == BROKEN_ENV and self.steps > self.at:
            return MUTATIONS[self.kind].mutate(obs, self.target)
        return obs


class Boxes(Breaking, Environment):
    """2-4 boxes (weight, x; ids ``box-k``) and a picker; boxes move, the picker picks one.
    Episodes last 3 steps; a global feature counts them. Breaks as :class:`Breaking` says."""

    target = Target("Box", "move", choices=2, select="pick", twins=True)

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
        return self.broken(self._observe())

    def act(self, actions: Mapping[str, Action]) -> Observation:
        self.time += 1
        return self.broken(self._observe(reward=1.0, done=self.time == 3))

    def _observe(self, reward: float = 0.0, done: bool = False) -> Observation:
        n = self.count
        return Observation(
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


class BrokenEnvironment(Breaking, Environment):
    """A shipped environment (made by :attr:`inner`), held rather than subclassed so that
    its own attributes stay apart from the breaking's, which breaks (see :class:`Breaking`)."""

    inner: ClassVar[Callable[[], Environment]]

    def __init__(self, kind: str | None = None, at: int = 0) -> None:
        super().__init__(kind, at)
        self.env = self.inner()

    def seed(self, seed: int) -> None:
        super().seed(seed)
        self.env.seed(seed)

    def obs_space(self) -> ObsSpace:
        return self.env.obs_space()

    def action_space(self) -> Mapping[str, Any]:
        return self.env.action_space()

    def reset(self) -> Observation:
        return self.broken(self.env.reset())

    def act(self, actions: Mapping[str, Action]) -> Observation:
        return self.broken(self.env.act(actions))


class BrokenGame(Breaking, MultiPlayerEnvironment):
    """A shipped multi-player game (made by :attr:`inner`) that breaks the observations of
    its first player (see :class:`Breaking`)."""

    inner: ClassVar[Callable[[], MultiPlayerEnvironment]]

    def __init__(self, kind: str | None = None, at: int = 0) -> None:
        super().__init__(kind, at)
        self.game = self.inner()

    def seed(self, seed: int) -> None:
        super().seed(seed)
        self.game.seed(seed)

    def players(self) -> Sequence[str]:
        return self.game.players()

    def obs_space(self) -> ObsSpace:
        return self.game.obs_space()

    def action_space(self) -> Mapping[str, Any]:
        return self.game.action_space()

    def groups(self) -> Mapping[str, str]:
        return self.game.groups()

    def group_reward(self) -> Mapping[str, float]:
        return self.game.group_reward()

    def reset(self) -> dict[str, Observation]:
        return self.broken_player(self.game.reset())

    def act(self, actions: PlayerActions) -> dict[str, Observation]:
        return self.broken_player(self.game.act(actions))

    def broken_player(self, answered: dict[str, Observation]) -> dict[str, Observation]:
        first = self.players()[0]
        if first in answered:
            answered[first] = self.broken(answered[first])
        return answered


class BrokenShip(BrokenEnvironment):
    """A spaceship steered by continuous thrust (one entity, features in float32 arrays)."""

    inner = ContinuousMoveToOrigin
    target = Target("Spaceship", "thrust")


class BrokenDuel(BrokenGame):
    """Rock, paper, scissors: one step a game, a ``Player`` entity without features."""

    inner = RockPaperScissorsDuel
    target = Target("Player", "throw", features=False, choices=len(THROWS))


class BrokenCoins(BrokenGame):
    """Two players race for coins: features in lists, a global categorical action masked by a
    list of flags."""

    inner = CoinDuel
    target = Target("Self", "move", choices=len(ACTIONS), per_actor=False)


# ---------------------------------------------------------------------------- mutations
Mutate = Callable[[Observation, Target], Any]


@dataclass(frozen=True)
class Mutation:
    """A mistake: how it breaks an observation (of an environment described by a
    :class:`Target`); the field its error names (formatted with the target's attributes);
    what the error says about :class:`Boxes` (a regex matched after ``Observation.``); the
    target's attributes it needs (a mutation applies where they are true)."""

    mutate: Mutate
    field: str
    message: str
    needs: tuple[str, ...] = ()

    def applies(self, target: Target) -> bool:
        return all(getattr(target, need) for need in self.needs)

    def field_of(self, target: Target) -> str:
        return self.field.format(**dataclasses.asdict(target))


def _set(**changes: Any) -> Mutate:
    """Set attributes of the observation (to ``value(obs)`` where the value is callable)."""

    def mutate(obs: Observation, target: Target) -> Observation:
        for name, value in changes.items():
            setattr(obs, name, value(obs) if callable(value) else value)
        return obs

    return mutate


def _with(field: str, key: str, value: Callable[[Observation, Target], Any]) -> Mutate:
    """Set ``getattr(obs, field)[key]``, the key formatted with the target's attributes."""

    def mutate(obs: Observation, target: Target) -> Observation:
        getattr(obs, field)[key.format(**dataclasses.asdict(target))] = value(obs, target)
        return obs

    return mutate


def _features(change: Callable[[npt.NDArray[np.float64]], Any]) -> Mutate:
    """Replace the target entities' features (an array or a list of rows) by
    ``change(features as a float64 array)``."""
    return _with(
        "features", "{entity}", lambda obs, t: change(np.array(obs.features[t.entity], float))
    )


def _first_feature(value: float) -> Callable[[npt.NDArray[np.float64]], Any]:
    def change(rows: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        rows[0, 0] = value
        return rows

    return change


def _entities(obs: Observation, target: Target) -> int:
    return len(obs.features[target.entity])


def _mask(value: Callable[[tuple[int, ...]], Any]) -> Mutate:
    """Give the target action the mask ``value(shape of a well-formed mask)``."""

    def mutate(obs: Observation, target: Target) -> Observation:
        spec = obs.actions[target.action]
        shape: tuple[int, ...] = (target.choices,)
        if target.per_actor:
            actors = obs.named_entities(list(obs.features), spec.actor_ids, spec.actor_types)  # type: ignore[union-attr]
            shape = (len(actors), target.choices)
        obs.actions[target.action] = dataclasses.replace(spec, mask=value(shape))  # type: ignore[index]
        return obs

    return mutate


def _first_row_dead(shape: tuple[int, ...]) -> npt.NDArray[np.bool_]:
    """A mask whose first actor may do nothing (a global mask: the observation's only row)."""
    mask = np.ones(shape, bool).reshape(-1, shape[-1])
    mask[0] = False
    return mask.reshape(shape)


def _picks(obs: Observation, target: Target, **changes: Any) -> SelectEntityActionMask:
    """The target's select-entity mask, changed."""
    return dataclasses.replace(obs.actions[target.select], **changes)  # type: ignore[index,arg-type]


MUTATIONS: dict[str, Mutation] = {
    "nan feature": Mutation(
        _features(_first_feature(np.nan)),
        "features[{entity!r}]",
        r"features\['Box'\]\[0\]: feature 'weight': expected a finite number, got nan",
        ("features",),
    ),
    "inf feature": Mutation(
        _features(_first_feature(np.inf)),
        "features[{entity!r}]",
        r"features\['Box'\]\[0\]: feature 'weight': expected a finite number, got inf",
        ("features",),
    ),
    "complex features": Mutation(
        _features(lambda rows: rows + 1j),
        "features[{entity!r}]",
        r"features\['Box'\]\[0\]: feature 'weight': expected a number, got complex \(",
        ("features",),
    ),
    "numeric-string features": Mutation(
        _features(lambda rows: rows.astype(str)),
        "features[{entity!r}]",
        r"features\['Box'\]\[0\]: feature 'weight': expected a number, got str '0\.\d+'",
        ("features",),
    ),
    "feature a string": Mutation(
        _features(lambda rows: [["heavy", *row[1:]] for row in rows.tolist()]),
        "features[{entity!r}]",
        r"features\['Box'\]\[0\]: feature 'weight': expected a number, got str 'heavy'",
        ("features",),
    ),
    "features too wide": Mutation(
        _features(lambda rows: np.zeros((rows.shape[0], rows.shape[1] + 1))),
        "features[{entity!r}]",
        r"features\['Box'\]: expected shape \(entities, 2\) with 2 features per entity "
        r"\(weight, x\), got shape \(\d, 3\)",
        ("features",),
    ),
    "features not a 2-d array": Mutation(
        _features(lambda rows: np.zeros(rows.shape[0])),
        "features[{entity!r}]",
        r"features\['Box'\]: expected shape \(entities, 2\) .* got shape \(\d,\)",
        ("features",),
    ),
    "features of rank 3": Mutation(
        _features(lambda rows: rows.reshape(rows.shape[0], 1, rows.shape[1])),
        "features[{entity!r}]",
        r"features\['Box'\]: expected shape \(entities, 2\) .* got shape \(\d, 1, 2\)",
        ("features",),
    ),
    "nan global feature": Mutation(
        _set(global_features=[np.nan]),
        "global_features",
        r"global_features: feature 'time': expected a finite number, got nan",
    ),
    "global features too long": Mutation(
        _set(global_features=[0.0, 1.0]),
        "global_features",
        r"global_features: expected 1 global features \(time\), got shape \(2,\)",
    ),
    "complex global features": Mutation(
        _set(global_features=lambda obs: np.asarray(obs.global_features) + 1j),
        "global_features",
        r"global_features: feature 'time': expected a number, got complex \(?\d*\+?1j",
    ),
    "nan reward": Mutation(
        _set(reward=np.nan), "reward", r"reward: expected a finite number, got nan"
    ),
    "inf reward": Mutation(
        _set(reward=-np.inf), "reward", r"reward: expected a finite number, got -inf"
    ),
    "reward not a number": Mutation(
        _set(reward="1"), "reward", r"reward: expected a number, got str '1'"
    ),
    "reward None": Mutation(
        _set(reward=None), "reward", r"reward: expected a number, got NoneType None"
    ),
    "reward an array": Mutation(
        _set(reward=np.array([1.0, 2.0])),
        "reward",
        r"reward: expected a number, got ndarray array\(\[1\., 2\.\]\)",
    ),
    "done not a bool": Mutation(_set(done="yes"), "done", r"done: expected a bool, got str 'yes'"),
    "done a number": Mutation(_set(done=1), "done", r"done: expected a bool, got int 1"),
    "done an array": Mutation(
        _set(done=np.array([False, True])),
        "done",
        r"done: expected a bool, got ndarray array\(\[False,  True\]\)",
    ),
    "unknown entity type": Mutation(
        _with("features", "no-such-entity", lambda obs, t: np.zeros((1, 2))),
        "features['no-such-entity']",
        r"features\['no-such-entity'\]: unknown entity type 'no-such-entity'; "
        r"declared types: 'Box', 'Picker'",
    ),
    "unknown action": Mutation(
        _with("actions", "jump", lambda obs, t: CategoricalActionMask()),
        "actions['jump']",
        r"actions\['jump'\]: unknown action 'jump'; declared actions: 'move', 'pick'",
    ),
    "ids one short": Mutation(
        _with("ids", "{entity}", lambda obs, t: [f"e{k}" for k in range(_entities(obs, t) - 1)]),
        "ids[{entity!r}]",
        r"ids\['Box'\]: expected one id per entity \(\d\), got \d",
    ),
    "ids of an unknown type": Mutation(
        _with("ids", "Crate", lambda obs, t: ["crate"]),
        "ids['Crate']",
        r"ids\['Crate'\]: unknown entity type 'Crate'",
    ),
    "duplicate ids": Mutation(
        _with("ids", "{entity}", lambda obs, t: ["twin"] * _entities(obs, t)),
        "ids[{entity!r}]",
        r"ids\['Box'\]\[1\]: expected every entity to have its own id, got 'twin' again",
        ("twins",),
    ),
    "actor id unknown": Mutation(
        _with(
            "actions",
            "{action}",
            lambda obs, t: type(obs.actions[t.action])(actor_ids=["no-such-entity"]),  # type: ignore[call-arg]
        ),
        "actions[{action!r}].actor_ids",
        r"actions\['move'\]\.actor_ids\[0\]: .*'no-such-entity'",
        ("per_actor",),
    ),
    "mask of the wrong shape": Mutation(
        _mask(lambda shape: np.ones((*shape[:-1], shape[-1] + 3), bool)),
        "actions[{action!r}].mask",
        r"actions\['move'\]\.mask: expected shape \(\d, 2\) \(actors, choices\), "
        r"got shape \(\d, 5\)",
        ("choices",),
    ),
    "mask not boolean": Mutation(
        _mask(lambda shape: np.full(shape, 0.5)),
        "actions[{action!r}].mask",
        r"actions\['move'\]\.mask: expected booleans, got dtype float64",
        ("choices",),
    ),
    "mask row all False": Mutation(
        _mask(_first_row_dead),
        "actions[{action!r}].mask",
        r"actions\['move'\]\.mask\[0\]: expected at least one legal choice for actor 0, got a "
        r"row of all False",
        ("choices",),
    ),
    "nothing to select": Mutation(
        _with("actions", "{select}", lambda obs, t: _picks(obs, t, actee_types=[])),
        "actions[{select!r}]",
        r"actions\['pick'\]: expected at least one entity to select for its 1 actors, got none",
        ("select",),
    ),
    "actee mask all False": Mutation(
        _with(
            "actions",
            "{select}",
            lambda obs, t: _picks(obs, t, mask=np.zeros((1, _entities(obs, t)), bool)),
        ),
        "actions[{select!r}].mask",
        r"actions\['pick'\]\.mask\[0\]: expected at least one legal actee for actor 0, got a "
        r"row of all False",
        ("select",),
    ),
    "visible of the wrong length": Mutation(
        _with("visible", "{entity}", lambda obs, t: np.ones(7, bool)),
        "visible[{entity!r}]",
        r"visible\['Box'\]: expected \d booleans \(one per entity\), got bool of shape \(7,\)",
    ),
    "visible not boolean": Mutation(
        _with("visible", "{entity}", lambda obs, t: np.full(_entities(obs, t), 0.5)),
        "visible[{entity!r}]",
        r"visible\['Box'\]: expected \d booleans \(one per entity\), got float64 of shape \(\d,\)",
    ),
    "metric not finite": Mutation(
        _with("metrics", "score", lambda obs, t: np.nan),
        "metrics['score']",
        r"metrics\['score'\]: expected a finite number, got nan",
    ),
    "not an observation": Mutation(
        lambda obs, target: dict(vars(obs)),
        "expected reset()/act() to return an Observation",
        r"expected reset\(\)/act\(\) to return an Observation, got dict",
    ),
}


# ---------------------------------------------------------------------------- natively batched
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
        done = self.x > 3
        if self.steps >= self.at:
            if self.kind == "nan reward":
                reward[BROKEN_ENV] = np.nan
            if self.kind == "done not bool":
                return reward, done.astype(np.int8)  # type: ignore[return-value]
        return reward, done

    def observe(self) -> VecObs:
        self.steps += 1
        n = self.num_envs
        ones = np.ones(n, dtype=np.int64)
        x = self.x.reshape(-1, 1).copy()
        legal = None
        if self.steps > self.at:
            if self.kind == "nan feature":
                x[BROKEN_ENV, 0] = np.nan
            if self.kind == "features too wide":
                x = np.zeros((n, 2), dtype=np.float32)
            if self.kind == "features of integers":
                x = x.astype(np.int64)
            if self.kind == "mask row all False":
                legal = RaggedArray(np.ones((n, 2), np.bool_), ones)
                legal.data[BROKEN_ENV] = False
            if self.kind == "mask not boolean":
                legal = RaggedArray(np.full((n, 2), 0.5, np.float32), ones)
        return VecObs(
            features={"Dot": RaggedArray(x, ones)},
            global_features=np.zeros((n, 0), dtype=np.float32),
            action_masks={
                "push": VecCategoricalMask(RaggedArray(np.zeros((n, 1), np.int64), ones), legal)
            },
            reward=np.zeros(n, dtype=np.float32),
            done=np.zeros(n, dtype=np.bool_),
        )


BATCH_MUTATIONS = {
    "nan feature": rf"features\['Dot'\]: row {BROKEN_ENV}, entity 0: feature 'x': expected a "
    "finite number, got nan",
    "features too wide": r"features\['Dot'\]: expected .*1 features per entity",
    "features of integers": r"features\['Dot'\]: expected dtype float32, got int64",
    "nan reward": rf"reward: row {BROKEN_ENV}: expected a finite number, got nan",
    "done not bool": r"done: expected booleans, got dtype int8",
    "mask row all False": rf"action_masks\['push'\]\.mask: row {BROKEN_ENV}, actor 0: expected "
    "at least one legal choice, got every choice masked out",
    "mask not boolean": r"action_masks\['push'\]\.mask: expected dtype bool, got float32",
}
"""What the error says (after ``BrokenBatch: VecObs.``) for each kind of :class:`BrokenBatch`."""
