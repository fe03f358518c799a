"""The batched form of observations that vectorized environments hand to the policy.

A batch has one row per (environment, step). Within a row, entities are indexed in
:class:`~entityrl.env.spaces.ObsSpace` order: all entities of the first type, then of the second,
and so on. Actor and actee indices refer to that order. A global action (categorical or
continuous) is taken by a pseudo-entity with index ``n`` (the number of entities in the row),
which carries the row's global features. The batched masks are defined with their kinds, in
:mod:`entityrl.env.actions`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from entityrl.env.actions.categorical import VecCategoricalMask
from entityrl.env.actions.continuous import VecContinuousMask
from entityrl.env.actions.select_entity import VecSelectEntityMask
from entityrl.env.rows import all_true
from entityrl.ragged import RaggedArray

__all__ = [
    "VecActionMask",
    "VecCategoricalMask",
    "VecContinuousMask",
    "VecObs",
    "VecSelectEntityMask",
]


_T = TypeVar("_T", bound=np.generic)

VecActionMask = VecCategoricalMask | VecSelectEntityMask | VecContinuousMask
"""The batched masks of the registered kinds (:mod:`entityrl.env.actions`)."""


@dataclass
class VecObs:
    """A batch of observations, one row per environment (and, in buffers, per step).

    ``features``: float32 ragged (rows, entities, features) per entity type, every type of the
    observation space present. ``global_features``: float32 (rows, global features).
    ``visible``: bool ragged (rows, entities, 1) for the types where some entity is hidden from
    the policy; absent types are fully visible. ``action_masks``: one per action of the action
    space. ``reward``/``done``: per row; ``done`` means the row's episode ended on this step
    (the row's features are then already those of the next episode's first observation).
    ``metrics``: for episodes that ended on this step, one value per ended episode.
    ``truncated``: per row, the episode ended by being cut off (a time limit), not by the task
    (None: no row was). ``final``: for the truncated rows, in row order, the observations that
    ended their episodes (the trainer bootstraps from their values).
    ``ids``: for wrappers that follow entities from step to step (observation stacking), an
    int64 key per entity (rows, entities, 1) per entity type, filled only on request (see
    :attr:`~entityrl.env.batching.Batcher.entity_keys`); empty otherwise.
    ``active``, ``game_over``, ``group_reward``: per row, from multi-player environments only
    (None otherwise; see :mod:`entityrl.env.multiplayer_vec`): the row's player is in play; the
    row's game ended on this step (its metrics are then those of ``game_over`` rows, not of
    ``done`` ones); the reward the row's group shares for this step.
    ``images``: per image of the observation space, the rows' images stacked densely,
    ``(rows, height, width, channels)`` of the declared dtype (empty for spaces without images).
    """

    features: dict[str, RaggedArray]
    global_features: npt.NDArray[np.float32]
    action_masks: dict[str, VecActionMask]
    reward: npt.NDArray[np.float32]
    done: npt.NDArray[np.bool_]
    visible: dict[str, RaggedArray] = field(default_factory=dict)
    metrics: dict[str, npt.NDArray[np.float64]] = field(default_factory=dict)
    truncated: npt.NDArray[np.bool_] | None = None
    final: VecObs | None = None
    ids: dict[str, RaggedArray] = field(default_factory=dict)
    active: npt.NDArray[np.bool_] | None = None
    game_over: npt.NDArray[np.bool_] | None = None
    group_reward: npt.NDArray[np.float32] | None = None
    images: dict[str, npt.NDArray[np.uint8] | npt.NDArray[np.float32]] = field(default_factory=dict)

    @property
    def num_rows(self) -> int:
        return self.reward.shape[0]

    def entity_counts(self) -> npt.NDArray[np.int64]:
        """Number of entities in each row (all types)."""
        counts = np.zeros(self.num_rows, dtype=np.int64)
        for feats in self.features.values():
            counts += feats.lengths
        return counts

    def take(self, rows: npt.NDArray[np.int64]) -> VecObs:
        """The given rows (metrics, truncation and a game's end and group reward are not needed
        past a step and are dropped)."""
        return VecObs(
            features={k: v.take(rows) for k, v in self.features.items()},
            global_features=self.global_features[rows],
            action_masks={k: m.take(rows) for k, m in self.action_masks.items()},
            reward=self.reward[rows],
            done=self.done[rows],
            visible={k: v.take(rows) for k, v in self.visible.items()},
            ids={k: v.take(rows) for k, v in self.ids.items()},
            active=None if self.active is None else self.active[rows],
            images={k: v[rows] for k, v in self.images.items()},
        )

    @staticmethod
    def concat(batches: Sequence[VecObs], choices: Mapping[str, int]) -> VecObs:
        """Rows of all ``batches`` in order; ``choices`` gives each categorical action's size
        (to fill masks that some batches omit)."""
        if len(batches) == 1:
            return batches[0]
        first = batches[0]
        visible: dict[str, RaggedArray] = {}
        for name in {k for b in batches for k in b.visible}:
            visible[name] = RaggedArray.concat(
                [
                    b.visible[name] if name in b.visible else all_true(b.features[name].lengths, 1)
                    for b in batches
                ]
            )
        action_masks: dict[str, VecActionMask] = {
            name: type(mask).concat([b.action_masks[name] for b in batches], choices.get(name, 0))  # type: ignore[arg-type]
            for name, mask in first.action_masks.items()
        }
        metrics: dict[str, list[npt.NDArray[np.float64]]] = {}
        for b in batches:
            for key, values in b.metrics.items():
                metrics.setdefault(key, []).append(values)
        truncated, final = _concat_truncation(batches, choices)
        return VecObs(
            features={
                k: RaggedArray.concat([b.features[k] for b in batches]) for k in first.features
            },
            global_features=np.concatenate([b.global_features for b in batches]),
            action_masks=action_masks,
            reward=np.concatenate([b.reward for b in batches]),
            done=np.concatenate([b.done for b in batches]),
            visible=visible,
            metrics={k: np.concatenate(v) for k, v in metrics.items()},
            truncated=truncated,
            final=final,
            ids={
                k: RaggedArray.concat([b.ids[k] for b in batches])
                for k in first.ids
                if all(k in b.ids for b in batches)
            },
            images={k: np.concatenate([b.images[k] for b in batches]) for k in first.images},
            active=_concat_rows([b.active for b in batches]),
            game_over=_concat_rows([b.game_over for b in batches]),
            group_reward=_concat_rows([b.group_reward for b in batches]),
        )


def _concat_rows(parts: Sequence[npt.NDArray[_T] | None]) -> npt.NDArray[_T] | None:
    """Per-row arrays of batches laid end to end (None where the batches have none: not a
    multi-player batch)."""
    if any(part is None for part in parts):
        return None
    return np.concatenate(parts)  # type: ignore[arg-type]


def _concat_truncation(
    batches: Sequence[VecObs], choices: Mapping[str, int]
) -> tuple[npt.NDArray[np.bool_] | None, VecObs | None]:
    """The truncation flags and final observations of batches laid end to end."""
    finals = [b.final for b in batches if b.final is not None]
    if not finals:
        return None, None
    truncated = np.concatenate(
        [np.zeros(b.num_rows, np.bool_) if b.truncated is None else b.truncated for b in batches]
    )
    return truncated, VecObs.concat(finals, choices)
