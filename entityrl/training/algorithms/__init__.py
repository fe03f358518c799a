"""The training algorithms, by the name a config's ``algo`` gives them.

Each is an :class:`~entityrl.training.algorithms.base.Algorithm`: a data source and a loss
behind the loop every run shares (:class:`~entityrl.training.runner.Trainer`).
"""

from __future__ import annotations

from entityrl.training.algorithms.base import Algorithm, Context, Iteration
from entityrl.training.algorithms.bc import BehaviourCloning
from entityrl.training.algorithms.gail import GAIL
from entityrl.training.algorithms.poca import POCA
from entityrl.training.algorithms.ppo import PPO
from entityrl.training.algorithms.self_play import SelfPlay

ALGORITHMS: dict[str, type[Algorithm]] = {
    algorithm.name: algorithm for algorithm in (PPO, BehaviourCloning, GAIL, SelfPlay, POCA)
}

__all__ = [
    "ALGORITHMS",
    "GAIL",
    "PPO",
    "Algorithm",
    "BehaviourCloning",
    "Context",
    "Iteration",
    "SelfPlay",
]
