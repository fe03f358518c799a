"""Multi-player games stepped in worker processes or Ray actors.

:class:`ProcessPlayerVecEnv` is a :class:`~entityrl.env.process_vec_env.ProcessVecEnv`, and
:class:`RayPlayerVecEnv` a :class:`~entityrl.env.ray_vec_env.RayVecEnv`, whose workers each run
a :class:`~entityrl.env.multiplayer_vec.PlayerVecEnv` over a contiguous block of games: worker
``k`` steps games ``a..b``, which are rows ``a * players .. (b + 1) * players - 1`` of the
batch, so the rows, their order and everything the batch carries (``active``, ``game_over``,
``group_reward``, the finished games' metrics in row order) are those of one
:class:`PlayerVecEnv` over all the games. With ``seed``, game ``i`` is seeded with
``seed + i`` as there, so the same seed plays the same games with any number of workers.
Starting, bounded waits, errors (one line naming the worker and its games) and closing are
those of the worker pool.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from entityrl.env.multiplayer_vec import (
    GameFactory,
    MultiPlayerVecEnv,
    PlayerVecEnv,
    keeps_seats,
)
from entityrl.env.observation import Observation
from entityrl.env.process_vec_env import ProcessVecEnv
from entityrl.env.ray_vec_env import RayVecEnv
from entityrl.env.vec_env import VecEnv


def _describe_game(envs: VecEnv, context: dict[str, Any]) -> tuple[Any, ...]:
    """In a worker: what the parent needs to know of the game."""
    games = keeps_seats(envs, "the game")
    return games.name, games.players, games.group_names, games.groups


def _observations(envs: VecEnv, context: dict[str, Any]) -> list[Observation]:
    """In a worker: each of its rows' latest observation."""
    assert isinstance(envs, MultiPlayerVecEnv)
    return envs.observations


class _GameWorkers(ProcessVecEnv, MultiPlayerVecEnv):
    """A pool of workers (of the pool class it is mixed with) that each run a
    :class:`PlayerVecEnv` over a block of whole games: its rows are (game, player) seats.
    ``make_game`` must be picklable (a module-level class or function, or a
    :func:`functools.partial` of one), and so must ``wrap``, which wraps each worker's
    :class:`PlayerVecEnv` in the worker and must keep its seats (e.g. observation stacking,
    :func:`~entityrl.env.stacking.stacking`); the other keyword arguments are the pool's.
    :attr:`observations` asks the workers for their rows' observations (for scripted
    players; it costs a round trip)."""

    _WORKER = ("game worker", "games")
    _game_bounds: list[int] | None = None  # until the workers said how many players

    def __init__(
        self, make_game: GameFactory, num_games: int, seed: int | None = None, **pool: Any
    ) -> None:
        super().__init__(make_game, num_games, seed, build=PlayerVecEnv, **pool)  # type: ignore[arg-type]
        try:
            self.name, self.players, self.group_names, self.groups = self.call(
                _describe_game, [()] * self.num_workers
            )[0]
        except BaseException:
            self.close()
            raise
        # The pool split the games; its rows are (game, player) seats.
        seats = len(self.players)
        self._game_bounds = self.bounds
        self.bounds = [b * seats for b in self._game_bounds]
        self.num_games = num_games
        self.num_envs = num_games * seats

    def _shares(self) -> list[int]:
        return self.bounds if self._game_bounds is None else self._game_bounds

    @property
    def observations(self) -> list[Observation]:
        last = self._last  # reading them does not step the games
        parts: Sequence[list[Observation]] = self.call(_observations, [()] * self.num_workers)
        self._last = last
        return [obs for part in parts for obs in part]


class ProcessPlayerVecEnv(_GameWorkers):
    """``num_games`` copies of a multi-player game split over ``num_workers`` worker processes
    (at most one per game; keyword arguments as :class:`ProcessVecEnv`'s), one row per (game,
    player) as in :class:`PlayerVecEnv`."""


class RayPlayerVecEnv(_GameWorkers, RayVecEnv):
    """``num_games`` copies of a multi-player game split over ``num_workers`` Ray actors of
    the cluster at ``address`` (keyword arguments as :class:`RayVecEnv`'s, which spreads them
    over the nodes), one row per (game, player) as in :class:`PlayerVecEnv`."""


__all__ = ["ProcessPlayerVecEnv", "RayPlayerVecEnv"]
