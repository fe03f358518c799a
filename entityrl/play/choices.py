"""Who acts in row 0 this step, what each actor may legally choose, and back to VecEnv actions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from entityrl.env.actions import kind_of
from entityrl.env.spaces import ActionSpace
from entityrl.env.vec_obs import VecObs
from entityrl.play.entities import ROW, RowEntities
from entityrl.ragged import RaggedArray


@dataclass(frozen=True)
class Option:
    """One legal choice: ``key`` is what a person types (the choice index of a categorical
    action, the entity index of a select-entity candidate), ``value`` what the VecEnv receives
    (the choice index, or the candidate's position in the row's actee list)."""

    key: int
    value: int
    label: str


@dataclass(frozen=True)
class Turn:
    """One actor of one action and its legal options."""

    action: str
    actor: int
    options: tuple[Option, ...]

    def option_for_value(self, value: int) -> Option:
        for option in self.options:
            if option.value == value:
                return option
        raise ValueError(
            f"action {self.action!r}: actor {self.actor} chose {value}, which is not one of its "
            f"legal values {[o.value for o in self.options]}"
        )


def legal_turns(
    obs: VecObs, action_space: Mapping[str, ActionSpace], entities: RowEntities
) -> list[Turn]:
    """Every (action, actor) pair of row 0, in action-space order then actor order
    (actions that are not discrete left out: they have values, not choices)."""
    turns: list[Turn] = []
    for name, mask in obs.action_masks.items():
        space = action_space[name]
        kind = kind_of(space)
        if not mask.actors.lengths[ROW] or not kind.discrete:
            continue  # nobody acts, or values rather than choices: nothing to list or type
        offered = kind.options(space, mask, ROW)
        if offered.entities is None:
            keys_and_labels = [(c, c, label) for c, label in enumerate(offered.labels)]
        else:
            keys_and_labels = [
                (entity, position, entities.describe(entity))
                for position, entity in enumerate(offered.entities)
            ]
        for actor, actor_legal in zip(offered.actors, offered.legal, strict=True):
            options = tuple(
                Option(key, value, label)
                for (key, value, label), ok in zip(keys_and_labels, actor_legal, strict=True)
                if ok
            )
            if not options:
                raise ValueError(
                    f"action {name!r}: {entities.describe(actor)} acts but has no legal choice"
                )
            turns.append(Turn(name, actor, options))
    return turns


def chosen_options(turns: Sequence[Turn], actions: Mapping[str, RaggedArray]) -> list[Option]:
    """The option each turn's actor took in ``actions`` (a one-row batch of VecEnv actions)."""
    position: dict[str, int] = {}
    chosen = []
    for turn in turns:
        k = position.get(turn.action, 0)
        position[turn.action] = k + 1
        chosen.append(turn.option_for_value(int(actions[turn.action][ROW][k, 0])))
    return chosen


def to_actions(
    obs: VecObs, turns: Sequence[Turn], picks: Sequence[Option]
) -> dict[str, RaggedArray]:
    """A one-row batch of VecEnv actions from one picked option per turn (every action of
    ``obs`` gets an entry, empty where nobody acts)."""
    values: dict[str, list[int]] = {name: [] for name in obs.action_masks}
    for turn, pick in zip(turns, picks, strict=True):
        values[turn.action].append(pick.value)
    return {
        name: RaggedArray(
            np.asarray(v, dtype=np.int64).reshape(-1, 1), np.array([len(v)], dtype=np.int64)
        )
        for name, v in values.items()
    }
