"""Training algorithms: a data source and a loss behind the loop every run shares
(:class:`~entityrl.training.runner.Trainer`).

Every algorithm is an :class:`Algorithm` (``base.py``); most start from one of two bases:
:class:`OnPolicyAlgorithm` (collect a rollout with the current policy, then learn from it: PPO
and its kin) or :class:`OffPolicyAlgorithm` (transitions into a replay buffer, updates every few
steps, target networks). One sub-package per shipped algorithm (``ppo``, ``bc``, ``gail``,
``dac``, ``self_play``, ``poca``, ``dqn``, ``sac``), each with its settings and its loss in plain torch; ``common/`` holds
what they share. A config's ``algo`` chooses one by name (:mod:`.registry`), your own as
``module:Class``. See docs/algorithms.md.

The names below are imported on first use: the config module imports the algorithms' settings
from this package, and the algorithms import the config module.
"""

from __future__ import annotations

import importlib
from typing import Any

from entityrl.algorithms.registry import lookup, names, register

_LAZY = {
    "Algorithm": "entityrl.algorithms.base",
    "Context": "entityrl.algorithms.base",
    "Iteration": "entityrl.algorithms.base",
    "OnPolicyAlgorithm": "entityrl.algorithms.on_policy",
    "OffPolicyAlgorithm": "entityrl.algorithms.off_policy",
    "ReplayBuffer": "entityrl.algorithms.common.replay",
    "PPO": "entityrl.algorithms.ppo.algorithm",
    "BehaviourCloning": "entityrl.algorithms.bc.algorithm",
    "GAIL": "entityrl.algorithms.gail.algorithm",
    "SelfPlay": "entityrl.algorithms.self_play.algorithm",
    "POCA": "entityrl.algorithms.poca.algorithm",
    "DAC": "entityrl.algorithms.dac.algorithm",
    "DQN": "entityrl.algorithms.dqn.algorithm",
    "SAC": "entityrl.algorithms.sac.algorithm",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'entityrl.algorithms' has no attribute {name!r}")


__all__ = [*_LAZY, "lookup", "names", "register"]
