"""The training loop and everything around it: configs, rollouts, checkpoints, logs."""

from entityrl.training.agent import (
    Agent,
    AgentError,
    Evaluation,
    Policy,
    evaluate,
    load_agent,
    make_eval_env,
)
from entityrl.training.callbacks import Callback
from entityrl.training.config import ConfigError, TrainConfig, load_config
from entityrl.training.runner import Trainer, TrainResult, train

__all__ = [
    "Agent",
    "AgentError",
    "Callback",
    "ConfigError",
    "Evaluation",
    "Policy",
    "TrainConfig",
    "TrainResult",
    "Trainer",
    "evaluate",
    "load_agent",
    "load_config",
    "make_eval_env",
    "train",
]
