"""Worlds composed of parts: a world file's ``include`` lists other world files (or presets, or
the modules under ``presets/modules``) whose sections are combined before its own.

Combining is not an override: mappings (creatures, items, buffs, a terrain's spawns, a buff's
effects, ...) are merged key by key, lists (recipes, seasons) are concatenated, and two parts
that give one field different values are an error naming both, unless the including file sets
that field itself (the including file has the last word on every field).
"""

from __future__ import annotations

import copy
from collections.abc import Set
from typing import Any

Tree = dict[str, Any]


class ConflictingPartsError(ValueError):
    """Two parts of a composed world give one field different values."""


def leaf_paths(tree: Tree, prefix: str = "") -> set[str]:
    """The dotted paths of every value that is not a mapping."""
    paths: set[str] = set()
    for key, value in tree.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        paths |= leaf_paths(value, path) if isinstance(value, dict) else {path}
    return paths


def combine(parts: list[tuple[str, Tree]], decided: Set[str] = frozenset()) -> Tree:
    """Combine ``(name, sections)`` parts in order; conflicts outside ``decided`` are errors."""
    combined: Tree = {}
    owners: dict[str, str] = {}
    for name, part in parts:
        _merge(combined, part, name, owners, decided, "")
    return combined


def overlay(base: Tree, own: Tree) -> Tree:
    """``own`` on top of ``base``: mappings merged, lists concatenated, ``own``'s values win."""
    out = copy.deepcopy(base)
    for key, value in own.items():
        if isinstance(out.get(key), dict) and isinstance(value, dict):
            out[key] = overlay(out[key], value)
        elif isinstance(out.get(key), list) and isinstance(value, list):
            out[key] = out[key] + copy.deepcopy(value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _merge(
    into: Tree, part: Tree, name: str, owners: dict[str, str], decided: Set[str], prefix: str
) -> None:
    for key, value in part.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if key not in into:
            into[key] = copy.deepcopy(value)
            owners[path] = name
        elif isinstance(into[key], dict) and isinstance(value, dict):
            _merge(into[key], value, name, owners, decided, path)
        elif isinstance(into[key], list) and isinstance(value, list):
            into[key] = into[key] + copy.deepcopy(value)
        elif into[key] != value and path not in decided:
            raise ConflictingPartsError(
                f"{name}: field {path}: {value!r} here but {into[key]!r} in "
                f"{_owner(owners, path)}; expected one value (set it in the including file "
                "to choose)"
            )


def _owner(owners: dict[str, str], path: str) -> str:
    while path not in owners and "." in path:
        path = path.rsplit(".", 1)[0]
    return owners.get(path, "an earlier part")
