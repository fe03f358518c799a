"""The training loop and everything around it: configs, rollouts, checkpoints, logs."""

from entityrl.training.config import ConfigError, TrainConfig, load_config
from entityrl.training.runner import Trainer, TrainResult, train

__all__ = ["ConfigError", "TrainConfig", "TrainResult", "Trainer", "load_config", "train"]
