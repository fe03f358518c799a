"""A policy that picks uniformly among the legal actions of every actor, batched in numpy."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from entityrl.env.actions import kind_of
from entityrl.env.spaces import ActionSpace
from entityrl.env.vec_obs import VecObs
from entityrl.ragged import RaggedArray


class RandomPolicy:
    """Uniformly random legal actions for a whole batch (no Python loop over rows or actors):
    a legal choice or candidate, or values uniform within a continuous action's bounds."""

    def __init__(self, action_space: Mapping[str, ActionSpace], seed: int | None = None) -> None:
        self.action_space = dict(action_space)
        self.kinds = {name: kind_of(space) for name, space in self.action_space.items()}
        self.rng = np.random.default_rng(seed)

    def act(self, obs: VecObs) -> dict[str, RaggedArray]:
        actions: dict[str, RaggedArray] = {}
        for name, mask in obs.action_masks.items():
            chosen = self.kinds[name].random(self.action_space[name], mask, self.rng)
            actions[name] = RaggedArray(chosen, mask.actors.lengths)
        return actions
