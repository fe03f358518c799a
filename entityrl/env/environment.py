"""The base class a simulator author implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np

from entityrl.env.observation import Action, Observation
from entityrl.env.spaces import ActionSpace, ObsSpace


class Simulation:
    """What every kind of simulation shares: a seedable random generator, a picture for
    people, and resources to release."""

    def seed(self, seed: int) -> None:
        """Make the following episodes (or games) reproducible."""
        self._rng = np.random.default_rng(seed)

    @property
    def rng(self) -> np.random.Generator:
        """The simulation's random generator (seeded by :meth:`seed`)."""
        if not hasattr(self, "_rng"):
            self._rng = np.random.default_rng()
        return self._rng

    def render(self) -> str:
        """A picture of the current state for people (text); optional."""
        raise NotImplementedError(f"{type(self).__name__} does not implement render()")

    def close(self) -> None:
        """Release resources held by the simulation."""


class SimulationWrapper(Simulation):
    """A simulation around another (``env``): seeding, drawing and closing go to it."""

    env: Simulation

    def seed(self, seed: int) -> None:
        self.env.seed(seed)

    def render(self) -> str:
        return self.env.render()

    def close(self) -> None:
        self.env.close()


def simulation_name(env: Simulation) -> str:
    """The class name of the simulation inside any wrappers (validation, decisions): what
    messages about its observations call it."""
    while isinstance(env, SimulationWrapper):
        env = env.env
    return type(env).__name__


class Environment(Simulation, ABC):
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


@runtime_checkable
class NativeStepping(Protocol):
    """An environment that wraps one written for another API and can be stepped in that API.

    Translating every observation and action between two APIs costs a few microseconds per
    environment and step, as much as a light simulator's own step. A :class:`SerialVecEnv`
    (without validation) therefore steps such environments natively: it batches their native
    observations directly (they must have :class:`Observation`'s attributes, and their masks
    those of entityrl's masks) and builds native actions with :attr:`native_actions`.
    The results are those of the translated path.
    """

    native_actions: Mapping[str, Callable[..., Any]]
    """Per action name, the constructor of its native action (see
    :data:`entityrl.env.batching.ActionConstructor`)."""

    def native_reset(self) -> Any:
        """:meth:`Environment.reset`, returning the native observation."""

    def native_act(self, actions: Mapping[str, Any]) -> Any:
        """:meth:`Environment.act` on native actions, returning the native observation."""
