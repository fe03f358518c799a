"""Small multi-player games for the tests of the multi-player API."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from entityrl.env import (
    CategoricalAction,
    CategoricalActionMask,
    CategoricalActionSpace,
    Entity,
    Observation,
    ObsSpace,
)
from entityrl.env.multiplayer import MultiPlayerEnvironment, PlayerActions


class Dropout(MultiPlayerEnvironment):
    """Players ``a``, ``b``, ``c`` (one group) each step "stay" or "leave". Leaving ends the
    player's part with reward 1 (its own); while anyone stays, the group earns 0.5 per step.
    The game is cut off after ``limit`` steps (truncated). ``log`` records every joint move."""

    def __init__(self, limit: int = 3, players: int = 3) -> None:
        self.limit = limit
        self.names = ["a", "b", "c", "d"][:players]
        self.log: list[dict[str, int]] = []
        self.in_play: set[str] = set()
        self.t = 0
        self.shared = 0.0

    def players(self) -> list[str]:
        return self.names

    def obs_space(self) -> ObsSpace:
        return ObsSpace(entities={"Self": Entity(["step", "seat"])})

    def action_space(self) -> dict[str, CategoricalActionSpace]:
        return {"choice": CategoricalActionSpace(["stay", "leave"])}

    def groups(self) -> Mapping[str, str]:
        return dict.fromkeys(self.names, "team")

    def group_reward(self) -> Mapping[str, float]:
        return {"team": self.shared}

    def reset(self) -> dict[str, Observation]:
        self.t = 0
        self.in_play = set(self.names)
        self.shared = 0.0
        return {p: self._observe(p, 0.0, False) for p in self.names}

    def act(self, actions: PlayerActions) -> dict[str, Observation]:
        self.t += 1
        moves = {p: int(a["choice"].indices[0]) for p, a in actions.items()}  # type: ignore[union-attr]
        self.log.append(moves)
        leaving = {p for p, m in moves.items() if m == 1}
        cut = self.t >= self.limit
        self.in_play -= leaving
        self.shared = 0.5 if self.in_play else 0.0
        out = {}
        for p in moves:
            if p in leaving:
                out[p] = self._observe(p, 1.0, True)
            else:
                out[p] = self._observe(p, 0.0, cut, truncated=cut)
        if cut:
            self.in_play = set()
        return out

    def _observe(
        self, player: str, reward: float, done: bool, truncated: bool = False
    ) -> Observation:
        return Observation(
            features={"Self": np.array([[self.t, self.names.index(player)]], np.float32)},
            actions={"choice": CategoricalActionMask(actor_types=["Self"])},
            reward=reward,
            done=done,
            truncated=truncated,
        )


class Bigger(MultiPlayerEnvironment):
    """Two players each pick 0, 1 or 2 once; the bigger pick wins (+1, the other -1; a tie
    0). Picking 2 never loses: it is the only equilibrium."""

    def players(self) -> list[str]:
        return ["0", "1"]

    def obs_space(self) -> ObsSpace:
        return ObsSpace(entities={"Self": Entity(["seat"])})

    def action_space(self) -> dict[str, CategoricalActionSpace]:
        return {"pick": CategoricalActionSpace(["0", "1", "2"])}

    def reset(self) -> dict[str, Observation]:
        return {p: self._observe(p, 0.0, False) for p in self.players()}

    def act(self, actions: PlayerActions) -> dict[str, Observation]:
        a, b = (int(actions[p]["pick"].indices[0]) for p in self.players())  # type: ignore[union-attr]
        reward = float(np.sign(a - b))
        return {"0": self._observe("0", reward, True), "1": self._observe("1", -reward, True)}

    def _observe(self, player: str, reward: float, done: bool) -> Observation:
        return Observation(
            features={"Self": np.array([[float(player)]], np.float32)},
            actions={"pick": CategoricalActionMask(actor_types=["Self"])},
            reward=reward,
            done=done,
        )


def pick_zero(obs: Observation) -> dict[str, CategoricalAction]:
    """A scripted player that always picks 0."""
    return {"pick": CategoricalAction(actors=[("Self", 0)], indices=np.array([0]))}


class Reinforcements(MultiPlayerEnvironment):
    """Player ``a`` starts alone; ``b`` joins after the first step (with a reward of 5 that
    must not count: it was not in play). Each step every player in play earns 1; ``b``
    leaves after 2 steps in play, ``a`` after 3."""

    def __init__(self) -> None:
        self.t = 0

    def players(self) -> list[str]:
        return ["a", "b"]

    def obs_space(self) -> ObsSpace:
        return ObsSpace(entities={"Self": Entity(["step"])}, global_features=["t"])

    def action_space(self) -> dict[str, CategoricalActionSpace]:
        return {"choice": CategoricalActionSpace(["wait"])}

    def reset(self) -> dict[str, Observation]:
        self.t = 0
        return {"a": self._observe(0.0, False)}

    def act(self, actions: PlayerActions) -> dict[str, Observation]:
        self.t += 1
        out = {p: self._observe(1.0, self.t == {"a": 3, "b": 3}[p]) for p in actions}
        if self.t == 1:
            out["b"] = self._observe(5.0, False)
        return out

    def _observe(self, reward: float, done: bool) -> Observation:
        return Observation(
            features={"Self": np.array([[self.t]], np.float32)},
            actions={"choice": CategoricalActionMask(actor_types=["Self"])},
            global_features=[float(self.t)],
            reward=reward,
            done=done,
        )
