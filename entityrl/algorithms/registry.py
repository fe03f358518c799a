"""Algorithms by the name a config's ``algo`` gives them.

A built-in algorithm is named by its short name (``ppo``); any other by ``module:Class``, the
class imported on first use (so ``entityrl train ENV algo=my_algos:MyAlgo`` needs no edit to
entityrl), or by the name it was :func:`register`-ed under in this process. This module imports
no algorithm until one is asked for: the config module reads it while algorithms import the
config module.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from entityrl.algorithms.base import Algorithm

BUILT_IN = {
    "ppo": "entityrl.algorithms.ppo.algorithm:PPO",
    "bc": "entityrl.algorithms.bc.algorithm:BehaviourCloning",
    "gail": "entityrl.algorithms.gail.algorithm:GAIL",
    "dac": "entityrl.algorithms.dac.algorithm:DAC",
    "selfplay": "entityrl.algorithms.self_play.algorithm:SelfPlay",
    "poca": "entityrl.algorithms.poca.algorithm:POCA",
    "dqn": "entityrl.algorithms.dqn.algorithm:DQN",
    "sac": "entityrl.algorithms.sac.algorithm:SAC",
}
"""The shipped algorithms: name -> ``module:Class``."""

_registered: dict[str, type[Algorithm]] = {}


class UnknownAlgorithmError(KeyError):
    """``algo`` names no algorithm (its message says which names exist)."""

    def __str__(self) -> str:
        return str(self.args[0])


def register(cls: type[Algorithm]) -> type[Algorithm]:
    """Make ``algo=<cls.name>`` choose ``cls`` in this process (usable as a class decorator).
    From the command line, name the class as ``module:Class`` instead."""
    from entityrl.algorithms.base import Algorithm

    if not (isinstance(cls, type) and issubclass(cls, Algorithm)):
        raise TypeError(f"register() takes an Algorithm subclass, got {cls!r}")
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name or ":" in name:
        raise TypeError(f"{cls.__qualname__}.name must be a short name without ':', got {name!r}")
    if name in BUILT_IN:
        raise ValueError(f"algorithm name {name!r} is taken by a built-in algorithm")
    _registered[name] = cls
    return cls


def names() -> list[str]:
    """The names ``algo`` accepts without a ``module:`` part."""
    return [*BUILT_IN, *sorted(_registered)]


def is_known(name: str) -> bool:
    """Whether ``name`` can name an algorithm, without importing anything (an import path is
    checked when it is imported)."""
    return name in BUILT_IN or name in _registered or _is_import_path(name)


def lookup(name: str) -> type[Algorithm]:
    """The algorithm class ``algo=name`` chooses; :class:`UnknownAlgorithmError` with the
    names that exist (and the closest one) if there is none."""
    if name in _registered:
        return _registered[name]
    if name in BUILT_IN:
        return _import(BUILT_IN[name], name)
    if _is_import_path(name):
        return _import(name, name)
    close = difflib.get_close_matches(name, names(), n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise UnknownAlgorithmError(
        f"algo={name!r} is not an algorithm.{hint} Built in or registered: {', '.join(names())};"
        " or your own class as module:Class (e.g. algo=my_algos:MyAlgo)"
    )


def _is_import_path(name: str) -> bool:
    module, colon, attr = name.partition(":")
    return bool(colon and module and attr.isidentifier())


def _import(path: str, name: str) -> type[Algorithm]:
    from entityrl.algorithms.base import Algorithm

    module_name, _, attr = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise UnknownAlgorithmError(
            f"algo={name!r}: cannot import module {module_name!r}: {err} (a module of the "
            "current directory or of an installed package)"
        ) from None
    cls = getattr(module, attr, None)
    if cls is None:
        found = [n for n, v in vars(module).items() if _is_algorithm(v, Algorithm)]
        close = difflib.get_close_matches(attr, found, n=1)
        raise UnknownAlgorithmError(
            f"algo={name!r}: module {module_name!r} has no {attr!r}"
            + (f". Did you mean {close[0]!r}?" if close else "")
            + (f" Its algorithms: {', '.join(found)}" if found else "")
        )
    if not _is_algorithm(cls, Algorithm):
        raise UnknownAlgorithmError(
            f"algo={name!r}: {attr} is a {type(cls).__name__}, expected a subclass of "
            "entityrl.algorithms.Algorithm"
        )
    return cls


def _is_algorithm(value: object, base: type) -> bool:
    """A concrete algorithm class (not a base such as OffPolicyAlgorithm)."""
    return isinstance(value, type) and issubclass(value, base) and not inspect.isabstract(value)
