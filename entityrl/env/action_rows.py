"""Actions as an environment takes them, turned into the rows of a batch.

A scripted expert or player written against one :class:`Observation` answers as
:meth:`Environment.act` takes actions: actors and actees by entity id. A batch of actions
(what a VecEnv takes, what recordings store) holds, per action, one row of values per actor in
the observation's actor order: a categorical choice, a select-entity candidate's *position
among the row's candidates*, or continuous values. :func:`batch_actions` converts one into the
other and says exactly what is wrong when an answer does not fit its observation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from entityrl.env.actions import kind_of
from entityrl.env.observation import Action, Observation
from entityrl.env.spaces import ActionSpace
from entityrl.ragged import RaggedArray


class ActionOutputError(ValueError):
    """Actions written for one observation do not fit it."""


def batch_actions(
    observations: Sequence[Observation],
    answers: Sequence[Any],
    action_space: Mapping[str, ActionSpace],
    type_order: Sequence[str],
    where: Sequence[str],
) -> dict[str, RaggedArray]:
    """Per action of ``action_space``, the batched rows of ``answers[i]`` (the actions by
    action name written for ``observations[i]``); ``where[i]`` names who answered, for errors.
    ``type_order`` is the observation space's entity types in order."""
    values: dict[str, list[npt.NDArray[Any]]] = {name: [] for name in action_space}
    lengths = {name: np.zeros(len(observations), np.int64) for name in action_space}
    for row, (observation, chosen, who) in enumerate(
        zip(observations, answers, where, strict=True)
    ):
        if not isinstance(chosen, Mapping):
            raise ActionOutputError(
                f"{who}: expected a dict of actions by action name, got {type(chosen).__name__}"
            )
        unknown = sorted(set(chosen) - set(observation.actions))
        if unknown:
            raise ActionOutputError(
                f"{who}: returned actions {unknown} that the observation does not offer "
                f"(it offers {sorted(observation.actions)})"
            )
        for name, mask in observation.actions.items():
            if name not in chosen:
                raise ActionOutputError(
                    f"{who}: no {name!r} action although the observation offers it "
                    f"(got {sorted(chosen)})"
                )
            what = f"{who}: action {name!r}"
            row_values = _rows(
                observation, action_space[name], chosen[name], mask, type_order, what
            )
            values[name].append(row_values)
            lengths[name][row] = len(row_values)
    actions = {}
    for name, space in action_space.items():
        kind = kind_of(space)
        parts = values[name] or [np.zeros((0, kind.width(space)), kind.dtype)]
        actions[name] = RaggedArray(np.concatenate(parts).astype(kind.dtype), lengths[name])
    return actions


def _rows(
    observation: Observation,
    space: ActionSpace,
    action: Action,
    mask: Any,
    type_order: Sequence[str],
    what: str,
) -> npt.NDArray[Any]:
    """``action`` as its rows of batched values: per actor of ``mask``, in its order."""
    kind = kind_of(space)
    if not isinstance(action, kind.action):
        raise ActionOutputError(
            f"{what}: expected a {kind.action.__name__}, got {type(action).__name__} ({action!r})"
        )
    if not hasattr(action, "actors"):  # a global action: the row is its one actor
        return _checked(kind.action_values(space, action), space, what)
    actors = observation.named_entities(type_order, mask.actor_ids, mask.actor_types)
    given = list(action.actors)
    missing = [a for a in actors if a not in given]
    extra = [a for a in given if a not in actors]
    if missing or extra or len(given) != len(set(given)):
        raise ActionOutputError(
            f"{what}: expected one choice for each of the actors {actors}, got actors "
            f"{given}" + (f" (missing {missing})" if missing else "")
            + (f" (not actors: {extra})" if extra else "")
        )  # fmt: skip
    order = [given.index(a) for a in actors]
    if hasattr(action, "actees"):  # select entity: positions among the candidates
        candidates = observation.named_entities(type_order, mask.actee_ids, mask.actee_types)
        chosen = list(action.actees)
        wrong = [c for c in chosen if c not in candidates]
        if len(chosen) != len(given) or wrong:
            raise ActionOutputError(
                f"{what}: expected one actee per actor among the candidates {candidates}, "
                f"got actees {chosen}"
            )
        return np.array([[candidates.index(chosen[i])] for i in order], np.int64)
    numbers = kind.action_values(space, action)
    if len(numbers) != len(given):
        raise ActionOutputError(
            f"{what}: expected one choice per actor ({len(given)}), got {len(numbers)}"
        )
    return _checked(numbers[order], space, what)


def _checked(values: npt.NDArray[Any], space: ActionSpace, what: str) -> npt.NDArray[Any]:
    """``values``, refused if a choice lies outside the action's choices."""
    choices: Sequence[str] | None = getattr(space, "choices", None)
    if choices is not None and ((values < 0) | (values >= len(choices))).any():
        raise ActionOutputError(
            f"{what}: expected choice indices in 0..{len(choices) - 1} ({list(choices)}), "
            f"got {values[:, 0].tolist()}"
        )
    return values
