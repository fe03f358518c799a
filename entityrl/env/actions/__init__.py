"""Kinds of action, one module each, behind one protocol (:class:`ActionKind`) and a registry
keyed by action space class.

numpy only: the network's part of each kind (head and distribution) is registered in
:mod:`entityrl.nn.heads` under the same space class.
"""

from __future__ import annotations

from typing import Any

from entityrl.env.actions.categorical import CategoricalKind
from entityrl.env.actions.continuous import ContinuousKind
from entityrl.env.actions.global_categorical import GlobalCategoricalKind
from entityrl.env.actions.global_continuous import GlobalContinuousKind
from entityrl.env.actions.kind import ActionConstructor, ActionKind
from entityrl.env.actions.select_entity import SelectEntityKind

__all__ = ["ActionConstructor", "ActionKind", "kind_named", "kind_of", "kinds", "register_kind"]

_BY_SPACE: dict[type, ActionKind] = {}


def register_kind(kind: ActionKind) -> None:
    """Make ``kind`` the handler of its space class ``kind.space``."""
    _BY_SPACE[kind.space] = kind


def kinds() -> list[ActionKind]:
    """Every registered kind."""
    return list(_BY_SPACE.values())


def kind_of(space: Any) -> ActionKind:
    """The kind of an action space; TypeError naming the registered spaces for anything
    else."""
    kind = _BY_SPACE.get(type(space))
    if kind is None:
        raise TypeError(f"expected an action space ({space_names()}), got {type(space).__name__}")
    return kind


def kind_named(space_name: str) -> ActionKind:
    """The kind whose space class is called ``space_name`` (as in saved space
    descriptions); KeyError for an unknown name."""
    for space, kind in _BY_SPACE.items():
        if space.__name__ == space_name:
            return kind
    raise KeyError(f"unknown action space {space_name!r}; known: {space_names()}")


def space_names() -> str:
    return ", ".join(space.__name__ for space in _BY_SPACE)


for _kind in (
    CategoricalKind(),
    SelectEntityKind(),
    GlobalCategoricalKind(),
    ContinuousKind(),
    GlobalContinuousKind(),
):
    register_kind(_kind)
