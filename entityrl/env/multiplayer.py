"""The base class for simulations with several players (agents, units, teams' members).

Every player sees its own :class:`Observation` (its features, ids, ``visible`` entities,
masks, reward and done) and takes its own actions; all players share the observation and
action spaces, so one policy can act for any of them (a player's role, if it matters, is
something it observes). Players may leave before the game ends (an agent is eliminated) and
still share in the group's later reward (:meth:`MultiPlayerEnvironment.group_reward`).

The contract, checked by :class:`~entityrl.env.multiplayer_validator.ValidatingMultiPlayer`:

- :meth:`reset` returns an observation for every player that starts the game (usually all
  of :meth:`players`; at least one);
- :meth:`act` receives actions for exactly the players whose latest observation was not
  ``done`` (the players *in play*) and returns a new observation for each of them; a
  player's observation with ``done`` is its last one (it has left: it acts no more and gets
  no further individual reward);
- :meth:`act` may also return a first observation for a player that has not been in the game
  yet: it joins (a unit spawns, reinforcements arrive) and is in play from then on; a player
  that has left does not come back within the game;
- the game ends when no player is in play; then :meth:`reset` starts the next.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence

from entityrl.env.environment import Simulation, SimulationWrapper
from entityrl.env.observation import Action, Observation
from entityrl.env.spaces import ActionSpace, ObsSpace

PlayerActions = Mapping[str, Mapping[str, Action]]
"""One step's actions: per player in play, its actions by action name."""


class MultiPlayerEnvironment(Simulation, ABC):
    """One copy of a game of several players, stepped one joint move at a time.

    Implement :meth:`players`, :meth:`obs_space`, :meth:`action_space`, :meth:`reset` and
    :meth:`act`; cooperative games also implement :meth:`groups` and :meth:`group_reward`.
    Draw randomness from :attr:`rng` so that :meth:`seed` makes games reproducible.
    """

    @abstractmethod
    def players(self) -> Sequence[str]:
        """The names of the players, the same for every game, in a fixed order."""

    @abstractmethod
    def obs_space(self) -> ObsSpace:
        """The entity types and global features of every player's observations."""

    @abstractmethod
    def action_space(self) -> Mapping[str, ActionSpace]:
        """The actions every player may take, by name."""

    @abstractmethod
    def reset(self) -> dict[str, Observation]:
        """Start a new game; returns the first observation of every player that starts it."""

    @abstractmethod
    def act(self, actions: PlayerActions) -> dict[str, Observation]:
        """Apply one joint move (actions of every player in play); returns the next
        observation of each of those players, and the first of any player joining now."""

    def groups(self) -> Mapping[str, str]:
        """Per player, the cooperative group it belongs to (players absent: no group). Players
        of a group share :meth:`group_reward`."""
        return {}

    def group_reward(self) -> Mapping[str, float]:
        """Per group, the reward its players share for the latest step, on top of their own
        (players that have left included: the group's success is theirs too)."""
        return {}


class GameWrapper(SimulationWrapper, MultiPlayerEnvironment):
    """A game around another (``env``): its players, spaces and groups are the wrapped game's,
    and seeding, drawing and closing go to it; a subclass says how it resets and steps."""

    env: MultiPlayerEnvironment

    def players(self) -> Sequence[str]:
        return self.env.players()

    def obs_space(self) -> ObsSpace:
        return self.env.obs_space()

    def action_space(self) -> Mapping[str, ActionSpace]:
        return self.env.action_space()

    def groups(self) -> Mapping[str, str]:
        return self.env.groups()

    def group_reward(self) -> Mapping[str, float]:
        return self.env.group_reward()
