"""A policy that picks uniformly among the legal actions of every actor, batched in numpy."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from entityrl.env.spaces import ActionSpace
from entityrl.env.vec_obs import VecCategoricalMask, VecObs, VecSelectEntityMask
from entityrl.ragged import RaggedArray


class RandomPolicy:
    """Uniformly random legal actions for a whole batch (no Python loop over rows or actors)."""

    def __init__(self, action_space: Mapping[str, ActionSpace], seed: int | None = None) -> None:
        self.action_space = dict(action_space)
        self.rng = np.random.default_rng(seed)

    def act(self, obs: VecObs) -> dict[str, RaggedArray]:
        actions: dict[str, RaggedArray] = {}
        for name, mask in obs.action_masks.items():
            if isinstance(mask, VecCategoricalMask):
                chosen = self._categorical(mask, len(self.action_space[name]))  # type: ignore[arg-type]
            else:
                chosen = self._select(mask)
            actions[name] = RaggedArray(chosen.reshape(-1, 1), mask.actors.lengths)
        return actions

    def _categorical(self, mask: VecCategoricalMask, choices: int) -> npt.NDArray[np.int64]:
        actors = mask.actors.items
        if mask.mask is None:
            return self.rng.integers(0, choices, size=actors, dtype=np.int64)
        # The largest random score among the legal choices is a uniform pick among them.
        scores = self.rng.random((actors, choices))
        scores[~mask.mask.data] = -1.0
        return scores.argmax(axis=1).astype(np.int64)

    def _select(self, mask: VecSelectEntityMask) -> npt.NDArray[np.int64]:
        widths = np.repeat(mask.actees.lengths, mask.actors.lengths)
        if mask.mask is None:
            return (self.rng.random(widths.shape[0]) * widths).astype(np.int64)
        # One random score per (actor, candidate) pair; pick each actor's best legal candidate.
        legal = mask.mask.data[:, 0]
        scores = np.where(legal, self.rng.random(legal.shape[0]), -1.0)
        starts = np.cumsum(widths) - widths
        if not widths.size:
            return np.zeros(0, dtype=np.int64)
        best = np.maximum.reduceat(scores, starts) if scores.size else scores
        segment = np.repeat(np.arange(widths.shape[0]), widths)
        winners = np.flatnonzero(scores == best[segment])
        # Ties have probability ~0; keep the first winner of each segment to be safe.
        first = np.unique(segment[winners], return_index=True)[1]
        return (winners[first] - starts).astype(np.int64)
