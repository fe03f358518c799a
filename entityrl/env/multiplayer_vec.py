"""Many copies of a multi-player game as one batch with a row per (game, player).

Row ``g * players + p`` is player ``p`` of game ``g``, so every row is a fixed seat and a
policy can be given any set of rows (see :mod:`entityrl.training.players`). Beyond the
single-player rules of :class:`~entityrl.env.vec_env.VecEnv`:

- a row's ``reward`` is its player's own reward plus its group's shared reward, while it is in
  play; its ``done`` is True on the step its player leaves (an end for its returns: nothing is
  bootstrapped across it), even though the game goes on;
- a player that has left keeps its row until the game ends: the row is not ``active``, has no
  actors (its masks are empty) and gets no reward; so has a player that has not joined yet
  (its row is empty until then; its first observation carries no reward);
- when every player has left, the game resets: ``game_over`` marks its rows, and each of
  them reports its player's ``episode_return`` and ``episode_length`` (and the player's own
  metrics) in :attr:`VecObs.metrics`, one value per ``game_over`` row in row order; in a game
  with groups, also ``group_return``: the rewards of its player's group over the game, those
  paid after the player left included (0 for a player in no group);
- ``group_reward`` gives every row its group's reward for the step, whether its player is in
  play or not (what algorithms that credit players after they leave need).
"""

from __future__ import annotations

import dataclasses
from abc import abstractmethod
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from entityrl.env import plain_state
from entityrl.env.batching import Batcher
from entityrl.env.environment import simulation_name
from entityrl.env.multiplayer import MultiPlayerEnvironment
from entityrl.env.multiplayer_validator import (
    ValidatingMultiPlayer,
    check_player_names,
    check_players,
)
from entityrl.env.observation import Observation
from entityrl.env.step_checks import BATCHING_ERRORS, FULLY_VALIDATED_STEPS, StepChecks
from entityrl.env.vec_env import VecEnv, check_actions
from entityrl.env.vec_obs import VecObs
from entityrl.ragged import RaggedArray

GameFactory = Callable[[], MultiPlayerEnvironment]
"""A callable that builds one game."""


class MultiPlayerSettingError(ValueError):
    """A way of vectorizing environments (Ray actors, a wrapper that loses the seats) that
    multi-player games do not support."""


class MultiPlayerVecEnv(VecEnv):
    """What every batch of multi-player games offers beyond a :class:`VecEnv`: its rows are
    the (game, player) seats described in this module, whether the games step in this process
    (:class:`PlayerVecEnv`) or in worker processes
    (:class:`~entityrl.env.multiplayer_workers.ProcessPlayerVecEnv`)."""

    name: str
    """The game's name (for messages)."""
    players: list[str]
    """The game's players, in seat order: row ``g * len(players) + p`` is player ``p`` of game
    ``g``."""
    num_games: int
    group_names: list[str]
    """The game's groups, sorted."""
    groups: dict[str, str]
    """The group of each player in one (as the game's ``groups()`` gives it)."""

    def rows_of(self, game: int) -> range:
        """The rows of game ``game`` (one per player, in :attr:`players` order)."""
        players = len(self.players)
        return range(game * players, (game + 1) * players)

    @property
    @abstractmethod
    def observations(self) -> list[Observation]:
        """Each row's latest observation, as its player got it (a player that has left: its
        last one, without actions)."""


def keeps_seats(env: VecEnv, name: str) -> MultiPlayerVecEnv:
    """``env``, a batch of the multi-player game ``name`` after a wrapper, if the wrapper kept
    the game's seats; else MultiPlayerSettingError."""
    if not isinstance(env, MultiPlayerVecEnv):
        raise MultiPlayerSettingError(
            f"wrap: {name} is a multi-player game, and the wrapper returned a "
            f"{type(env).__name__}, which has lost the game's seats (expected a "
            "MultiPlayerVecEnv, such as the wrapper entityrl.env.stacking.stacking(k) returns)"
        )
    return env


class PlayerVecEnv(MultiPlayerVecEnv):
    """``num_games`` copies of a multi-player game stepped in this process, one row per
    (game, player): ``num_envs`` is ``num_games * len(players)``.

    With ``seed``, game ``i`` is seeded with ``seed + seed_offset + i`` (so games split over
    worker processes play as they would here). With ``validate``, every call is
    checked against the contract and the spaces
    (:class:`~entityrl.env.multiplayer_validator.ValidatingMultiPlayer`); without it, which
    players answer is always checked, and the first observations fully.
    """

    def __init__(
        self,
        make_game: GameFactory,
        num_games: int,
        seed: int | None = None,
        *,
        validate: bool = False,
        seed_offset: int = 0,
    ) -> None:
        if num_games < 1:
            raise ValueError(f"num_games must be >= 1, got {num_games}")
        games = [make_game() for _ in range(num_games)]
        for game in games:
            if not isinstance(game, MultiPlayerEnvironment):
                raise TypeError(
                    f"expected the factory to build a MultiPlayerEnvironment, "
                    f"got {type(game).__name__}"
                )
        self.name = simulation_name(games[0])
        if validate:
            games = [ValidatingMultiPlayer(game) for game in games]
        if seed is not None:
            for i, game in enumerate(games):
                game.seed(seed + seed_offset + i)
        self.games: list[MultiPlayerEnvironment] = games
        self.players = check_player_names(games[0].players(), self.name)
        self.num_games = num_games
        self.num_envs = num_games * len(self.players)
        self.obs_space = games[0].obs_space()
        self.checks = StepChecks(
            self.obs_space,
            games[0].action_space(),
            self.name,
            full_steps=0 if validate else FULLY_VALIDATED_STEPS,
        )
        self.action_space = self.checks.action_space
        self.batcher = Batcher(self.obs_space, self.action_space)
        groups = dict(games[0].groups())
        self.groups = groups
        # Rows of the same group share an index; players in no group get one of their own.
        names = sorted(set(groups.values()))
        self.group_names = names
        self._player_group = np.array(
            [names.index(groups[p]) if p in groups else -1 for p in self.players]
        )
        rows = self.num_envs
        self._observations: list[Observation] = []
        self._in_play = np.zeros(rows, dtype=np.bool_)
        self._joined = np.zeros(rows, dtype=np.bool_)  # the player has been in its game
        # The row of a player that has not joined its game yet: nothing in it, no actions.
        self._absent = Observation(
            global_features=np.zeros(len(self.obs_space.global_features), np.float32)
        )
        self._returns = np.zeros(rows, dtype=np.float64)
        self._group_returns = np.zeros(rows, dtype=np.float64)  # paid in play or not
        self._lengths = np.zeros(rows, dtype=np.int64)
        self._metrics: list[dict[str, float]] = [{} for _ in range(rows)]
        self._last: VecObs | None = None

    # ------------------------------------------------------------------ rows and games
    @property
    def observations(self) -> list[Observation]:
        return self._observations

    @property
    def observation(self) -> VecObs:
        if self._last is None:
            raise RuntimeError("call reset() before reading the observation")
        return self._last

    # ------------------------------------------------------------------ stepping
    def reset(self) -> VecObs:
        observations: list[Observation] = []
        for g, game in enumerate(self.games):
            observations.extend(self._reset_game(g, game))
        self._returns[:] = 0
        self._group_returns[:] = 0
        self._lengths[:] = 0
        self._metrics = [dict(obs.metrics) for obs in observations]
        self._observations = observations
        rows = self.num_envs
        self._last = self._batch(
            observations,
            np.zeros(rows, np.float32),
            np.zeros(rows, np.bool_),
            np.zeros(rows, np.float32),
        )
        return self._last

    def _reset_game(self, g: int, game: MultiPlayerEnvironment) -> list[Observation]:
        """Start game ``g`` again: its rows' first observations (players that join later:
        empty rows)."""
        first = check_players(game.reset(), (), self.players, "reset()", self.name)
        observations = [first.get(p, self._absent) for p in self.players]
        span = self.rows_of(g)
        # Messages name a player's row in the whole batch.
        self.checks.observations(
            list(first.values()), [span.start + self.players.index(p) for p in first]
        )
        for p, obs in enumerate(observations):
            self._joined[span.start + p] = self.players[p] in first
            self._in_play[span.start + p] = self.players[p] in first and not obs.done
        return observations

    def act(self, actions: Mapping[str, RaggedArray]) -> VecObs:
        if self._last is None:
            raise RuntimeError("call reset() before act()")
        check_actions(actions, self._last, self.action_space)
        try:
            per_row = self.batcher.unbatch(actions, self._observations)
        except BATCHING_ERRORS as err:
            self.checks.explain(self._observations, None, f"cannot name the actors ({err!r})")
        rows = self.num_envs
        reward = np.zeros(rows, dtype=np.float32)
        done = np.zeros(rows, dtype=np.bool_)
        group_reward = np.zeros(rows, dtype=np.float32)
        game_over = np.zeros(rows, dtype=np.bool_)
        observations = list(self._observations)
        finals: list[tuple[int, Observation]] = []  # rows cut off by a time limit
        players = len(self.players)
        joined: list[int] = []  # rows whose player joined its game on this step
        for g, game in enumerate(self.games):
            base = g * players
            seats = [p for p in range(players) if self._in_play[base + p]]
            joint = {self.players[p]: per_row[base + p] for p in seats}
            waiting = [self.players[p] for p in range(players) if not self._joined[base + p]]
            answered = check_players(
                game.act(joint), [self.players[p] for p in seats], waiting, "act()", self.name
            )
            for player in answered.keys() & set(waiting):  # a first observation: no reward
                row = base + self.players.index(player)
                observations[row] = answered[player]
                joined.append(row)
            group_reward[base : base + players] = self._group_rewards(game)
            for p in seats:
                observations[base + p] = answered[self.players[p]]
        in_play = np.flatnonzero(self._in_play).tolist()
        stepped = [*in_play, *joined]
        # Checked before anything is read from them: a reward of None or a done that is an
        # array is the checks' to report, naming the row and the field.
        self.checks.observations([observations[r] for r in stepped], stepped)
        for row in in_play:
            obs = observations[row]
            reward[row] = float(obs.reward) + group_reward[row]
            if obs.done:
                done[row] = True
                if obs.truncated:
                    finals.append((row, obs))
            if obs.metrics:
                self._metrics[row].update(obs.metrics)
        self._returns += reward
        self._group_returns += group_reward
        self._lengths += self._in_play
        self._in_play &= ~done
        self._joined[joined] = True
        self._in_play[joined] = [not observations[r].done for r in joined]
        metrics: dict[str, list[float]] = {}
        for g, game in enumerate(self.games):
            span = self.rows_of(g)
            if self._in_play[span.start : span.stop].any():
                for row in span:  # players that left keep their last observation, inert
                    if done[row]:
                        observations[row] = dataclasses.replace(observations[row], actions={})
                continue
            game_over[span.start : span.stop] = True
            self._report(span, metrics)
            observations[span.start : span.stop] = self._reset_game(g, game)
            for row in span:
                self._metrics[row] = dict(observations[row].metrics)
        self._observations = observations
        batch = self._batch(observations, reward, done, group_reward)
        batch.game_over = game_over
        batch.metrics = {k: np.asarray(v, dtype=np.float64) for k, v in metrics.items()}
        if finals:
            batch.truncated = np.zeros(rows, dtype=np.bool_)
            batch.truncated[[row for row, _ in finals]] = True
            batch.final = self.batcher.batch([obs for _, obs in finals])
        self.checks.batched(batch, observations)
        self._last = batch
        return batch

    def _group_rewards(self, game: MultiPlayerEnvironment) -> npt.NDArray[np.float32]:
        """Per player (in :attr:`players` order), its group's reward for the step just taken."""
        shared = np.zeros(len(self.players), dtype=np.float32)
        if not self.group_names:
            return shared
        by_group = game.group_reward()
        for p, group in enumerate(self._player_group):
            if group >= 0:
                shared[p] = by_group.get(self.group_names[group], 0.0)
        return shared

    def _report(self, rows: range, metrics: dict[str, list[float]]) -> None:
        """Record the episodes of the players of a game that just ended."""
        for row in rows:
            metrics.setdefault("episode_return", []).append(float(self._returns[row]))
            metrics.setdefault("episode_length", []).append(float(self._lengths[row]))
            if self.group_names:
                metrics.setdefault("group_return", []).append(float(self._group_returns[row]))
            for key, value in self._metrics[row].items():
                metrics.setdefault(key, []).append(float(value))
        self._returns[rows.start : rows.stop] = 0
        self._group_returns[rows.start : rows.stop] = 0
        self._lengths[rows.start : rows.stop] = 0

    def _batch(
        self,
        observations: list[Observation],
        reward: npt.NDArray[np.float32],
        done: npt.NDArray[np.bool_],
        group_reward: npt.NDArray[np.float32],
    ) -> VecObs:
        try:
            batch = self.batcher.batch(observations, reward, done)
        except BATCHING_ERRORS as err:
            self.checks.explain(observations, None, f"cannot batch the observations ({err!r})")
        batch.active = self._in_play.copy()
        batch.group_reward = group_reward
        return batch

    # ------------------------------------------------------------------ state
    # What continues the games exactly where they are (the games pickle with their RNGs).
    _STATE = (
        "games",
        "_observations",
        "_in_play",
        "_joined",
        "_returns",
        "_group_returns",
        "_lengths",
        "_metrics",
        "_last",
    )

    def get_state(self, allow_pickle: bool = False) -> Any:
        return plain_state.capture_attributes(
            self, self._STATE, allow_pickle=allow_pickle, where=self.name
        )

    def set_state(self, state: Any, allow_pickle: bool = False) -> VecObs:
        plain_state.restore_attributes(self, self._STATE, state, allow_pickle=allow_pickle)
        if self._last is None:
            raise ValueError("the saved state was taken before reset()")
        return self._last

    def render(self, index: int = 0) -> str:
        """A picture of the game that row ``index`` plays in."""
        return self.games[index // len(self.players)].render()

    def close(self) -> None:
        for game in self.games:
            game.close()
