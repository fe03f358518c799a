"""Checks every algorithm's settings share."""

from __future__ import annotations

from collections.abc import Mapping

from entityrl.env.actions import kind_of
from entityrl.env.spaces import ActionSpace


def require_positive(section: str, **values: float) -> None:
    """Reject non-positive settings, naming them as ``section.name``."""
    for name, value in values.items():
        if value <= 0:
            key = f"{section}.{name}" if section else name
            raise ValueError(f"{key} must be > 0, got {value}")


def continuous_actions(action_space: Mapping[str, ActionSpace]) -> list[str]:
    """The names of the continuous actions of a space."""
    return [name for name, space in action_space.items() if not kind_of(space).discrete]


def require_discrete(
    algo: str, env_id: str, action_space: Mapping[str, ActionSpace], instead: str
) -> None:
    """Refuse an environment with continuous actions for an algorithm of discrete choices;
    ``instead`` names the algorithms to use."""
    continuous = continuous_actions(action_space)
    if continuous:
        # Imported here: the config module imports the algorithms' settings.
        from entityrl.training.config import ConfigError

        raise ConfigError(
            f"algo={algo} learns discrete actions (categorical, global categorical, "
            f"select-entity); {env_id}'s actions {continuous} are continuous: train them with "
            f"{instead}"
        )
