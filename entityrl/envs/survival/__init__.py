"""The configurable survival world (after the Eden paper): a world defined by a YAML file.

Presets ``DayAndNight`` and ``FourSeason`` ship in ``presets/``; ``RiverNavigation`` is the
navigation task family. :mod:`entityrl.envs.survival.metrics` measures how hard tasks are.
"""

from entityrl.envs.survival.config import (
    SurvivalConfigError,
    WorldConfig,
    load_config,
    preset_names,
)
from entityrl.envs.survival.navigation import RiverNavigation
from entityrl.envs.survival.rules import Rules
from entityrl.envs.survival.world import DayAndNight, FourSeason, SurvivalWorld

__all__ = [
    "DayAndNight",
    "FourSeason",
    "RiverNavigation",
    "Rules",
    "SurvivalConfigError",
    "SurvivalWorld",
    "WorldConfig",
    "load_config",
    "preset_names",
]
