"""entityrl: reinforcement learning on entity-based environments.

``import entityrl`` stays light (no torch); :func:`train` imports the trainer when called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from entityrl.training.runner import TrainResult

__version__ = "0.1.0"


def train(env: Any = None, config: Any = None, **kwargs: Any) -> TrainResult:
    """Train a RogueNet agent with PPO; see :func:`entityrl.training.runner.train`."""
    from entityrl.training.runner import train as _train

    return _train(env, config, **kwargs)
