"""Checks of the multi-player contract (see :mod:`entityrl.env.multiplayer`).

:func:`check_players` (who answered) runs on every step of a vectorized multi-player
environment, as a wrong set of players would silently misroute rewards; the
:class:`ValidatingMultiPlayer` wrapper adds the full check of every observation, of the actions
each player is given, and of the groups.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from entityrl.env.environment import SimulationWrapper
from entityrl.env.multiplayer import MultiPlayerEnvironment, PlayerActions
from entityrl.env.observation import Observation
from entityrl.env.spaces import ActionSpace, ObsSpace
from entityrl.env.validator import EnvValidationError, validate_observation, validate_spaces


def check_player_names(players: Any, env_name: str) -> list[str]:
    """``players()`` as a list: distinct non-empty strings, at least one."""
    if isinstance(players, str) or not isinstance(players, Sequence) or not players:
        raise EnvValidationError(
            f"{env_name}: players(): expected a non-empty list of player names, got {players!r}"
        )
    for name in players:
        if not isinstance(name, str) or not name:
            raise EnvValidationError(
                f"{env_name}: players(): expected non-empty strings, got {name!r}"
            )
    if len(set(players)) != len(players):
        raise EnvValidationError(f"{env_name}: players(): names repeat: {list(players)}")
    return list(players)


def check_players(
    answered: Any,
    required: Collection[str],
    joining: Collection[str],
    method: str,
    env_name: str,
) -> Mapping[str, Observation]:
    """``answered`` (what ``reset``/``act`` returned) has an observation for each of the
    players ``required`` (those in play), possibly for some of ``joining`` (those yet to join
    the game), and for no other; and for one player at least."""
    if not isinstance(answered, Mapping):
        raise EnvValidationError(
            f"{env_name}: {method}: expected a dict of player -> Observation, "
            f"got {type(answered).__name__}"
        )
    missing = sorted(set(required) - answered.keys())
    extra = sorted(answered.keys() - set(required) - set(joining), key=str)
    if missing or extra or not answered:
        raise EnvValidationError(
            f"{env_name}: {method}: expected an observation for each player in play "
            f"{sorted(required)}"
            + (f" and any joining of {sorted(joining)}" if joining else "")
            + (f"; missing {missing}" if missing else "")
            + (f"; neither in play nor able to join {extra}" if extra else "")
            + ("; got none" if not answered else "")
        )
    return answered


class ValidatingMultiPlayer(SimulationWrapper, MultiPlayerEnvironment):
    """Wraps a multi-player environment and checks every call against the contract and the
    declared spaces, naming the player (and the environment) in each message."""

    def __init__(self, env: MultiPlayerEnvironment) -> None:
        self.env = env
        self.name = type(env).__name__
        self._players = check_player_names(env.players(), self.name)
        self._obs_space = env.obs_space()
        self._action_space = dict(env.action_space())
        validate_spaces(self._obs_space, self._action_space, self.name)
        self._groups = self._checked_groups(env.groups())
        self.in_play: set[str] = set()
        self.joined: set[str] = set()  # this game's players so far (in play or left)

    def players(self) -> list[str]:
        return self._players

    def obs_space(self) -> ObsSpace:
        return self._obs_space

    def action_space(self) -> Mapping[str, ActionSpace]:
        return self._action_space

    def groups(self) -> Mapping[str, str]:
        return self._groups

    def reset(self) -> dict[str, Observation]:
        self.joined = set()
        return self._checked(self.env.reset(), (), "reset()")

    def act(self, actions: PlayerActions) -> dict[str, Observation]:
        if not self.in_play:
            raise EnvValidationError(
                f"{self.name}: act(): the game is over (every player's last observation was "
                "done); call reset()"
            )
        if not isinstance(actions, Mapping):
            raise EnvValidationError(
                f"{self.name}: act(): expected a dict of player -> actions, "
                f"got {type(actions).__name__}"
            )
        for player in actions:
            if player not in self._players:
                raise EnvValidationError(
                    f"{self.name}: act(): unknown player {player!r}; players: {self._players}"
                )
            if player not in self.in_play:
                state = "has left the game (its last observation was done)"
                if player not in self.joined:
                    state = "has not joined the game yet"
                raise EnvValidationError(
                    f"{self.name}: act(): actions for player {player!r}, which {state}; in "
                    f"play: {sorted(self.in_play)}"
                )
        missing = sorted(self.in_play - actions.keys())
        if missing:
            raise EnvValidationError(
                f"{self.name}: act(): no actions for players in play {missing} (give an "
                "empty dict to a player that takes no action this step)"
            )
        answered = self._checked(self.env.act(actions), self.in_play, "act()")
        rewards = self.env.group_reward()
        for group, reward in rewards.items():
            if group not in self._groups.values():
                raise EnvValidationError(
                    f"{self.name}: group_reward(): unknown group {group!r}; groups: "
                    f"{sorted(set(self._groups.values()))}"
                )
            if not isinstance(reward, (int, float)) or not math.isfinite(reward):
                raise EnvValidationError(
                    f"{self.name}: group_reward()[{group!r}]: expected a finite number, "
                    f"got {reward!r}"
                )
        return answered

    def group_reward(self) -> Mapping[str, float]:
        return self.env.group_reward()

    def _checked(
        self, answered: Any, in_play: Collection[str], method: str
    ) -> dict[str, Observation]:
        joining = [p for p in self._players if p not in self.joined]
        observations = check_players(answered, in_play, joining, method, self.name)
        for player, obs in observations.items():
            validate_observation(
                obs, self._obs_space, self._action_space, f"{self.name} (player {player!r})"
            )
        self.joined |= observations.keys()
        self.in_play = {p for p, obs in observations.items() if not obs.done}
        return dict(observations)

    def _checked_groups(self, groups: Any) -> dict[str, str]:
        if not isinstance(groups, Mapping):
            raise EnvValidationError(
                f"{self.name}: groups(): expected a dict of player -> group name, "
                f"got {type(groups).__name__}"
            )
        for player, group in groups.items():
            if player not in self._players:
                raise EnvValidationError(
                    f"{self.name}: groups(): unknown player {player!r}; players: {self._players}"
                )
            if not isinstance(group, str) or not group:
                raise EnvValidationError(
                    f"{self.name}: groups()[{player!r}]: expected a non-empty group name, "
                    f"got {group!r}"
                )
        return dict(groups)
