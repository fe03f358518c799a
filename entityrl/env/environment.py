"""The base class a simulator author implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping

import numpy as np

from entityrl.env.observation import Action, Observation
from entityrl.env.spaces import ActionSpace, ObsSpace


class Environment(ABC):
    """One copy of a simulation, stepped one observation at a time.

    Implement :meth:`obs_space`, :meth:`action_space`, :meth:`reset` and :meth:`act`. Draw
    randomness from :attr:`rng` so that :meth:`seed` makes episodes reproducible.
    """

    @abstractmethod
    def obs_space(self) -> ObsSpace:
        """The entity types and global features observations contain."""

    @abstractmethod
    def action_space(self) -> Mapping[str, ActionSpace]:
        """The actions the environment accepts, by name."""

    @abstractmethod
    def reset(self) -> Observation:
        """Start a new episode and return its first observation."""

    @abstractmethod
    def act(self, actions: Mapping[str, Action]) -> Observation:
        """Apply one step's actions (by action name) and return the next observation."""

    def seed(self, seed: int) -> None:
        """Make the following episodes reproducible."""
        self._rng = np.random.default_rng(seed)

    @property
    def rng(self) -> np.random.Generator:
        """The environment's random generator (seeded by :meth:`seed`)."""
        if not hasattr(self, "_rng"):
            self._rng = np.random.default_rng()
        return self._rng

    def render(self) -> str:
        """A picture of the current state for people (text); optional."""
        raise NotImplementedError(f"{type(self).__name__} does not implement render()")

    def close(self) -> None:
        """Release resources held by the environment."""
