"""Multi-player games stepped in worker processes.

:class:`ProcessPlayerVecEnv` is a :class:`~entityrl.env.process_vec_env.ProcessVecEnv` whose
workers each run a :class:`~entityrl.env.multiplayer_vec.PlayerVecEnv` over a contiguous block
of games: worker ``k`` steps games ``a..b``, which are rows ``a * players .. (b + 1) * players - 1``
of the batch, so the rows, their order and everything the batch carries (``active``,
``game_over``, ``group_reward``, the finished games' metrics in row order) are those of one
:class:`PlayerVecEnv` over all the games. With ``seed``, game ``i`` is seeded with
``seed + i`` as there, so the same seed plays the same games with any number of workers.
Starting, bounded waits, errors (one line naming the worker and its games) and closing are
ProcessVecEnv's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from entityrl.env.multiplayer_vec import (
    GameFactory,
    MultiPlayerVecEnv,
    PlayerVecEnv,
    keeps_seats,
)
from entityrl.env.observation import Observation
from entityrl.env.process_vec_env import DEFAULT_ANSWER_TIMEOUT, ProcessVecEnv
from entityrl.env.vec_env import VecEnv


def _describe_game(envs: VecEnv, context: dict[str, Any]) -> tuple[Any, ...]:
    """In a worker: what the parent needs to know of the game."""
    games = keeps_seats(envs, "the game")
    return games.name, games.players, games.group_names, games.groups


def _observations(envs: VecEnv, context: dict[str, Any]) -> list[Observation]:
    """In a worker: each of its rows' latest observation."""
    assert isinstance(envs, MultiPlayerVecEnv)
    return envs.observations


class ProcessPlayerVecEnv(ProcessVecEnv, MultiPlayerVecEnv):
    """``num_games`` copies of a multi-player game split over ``num_workers`` worker processes
    (at most one per game), one row per (game, player) as in :class:`PlayerVecEnv`.

    ``make_game`` must be picklable (a module-level class or function, or a
    :func:`functools.partial` of one), and so must ``wrap``, which wraps each worker's
    :class:`PlayerVecEnv` in the worker and must keep its seats (e.g. observation stacking,
    :func:`~entityrl.env.stacking.stacking`). :attr:`observations` asks the workers for their rows'
    observations (for scripted players; it costs a round trip)."""

    def __init__(
        self,
        make_game: GameFactory,
        num_games: int,
        seed: int | None = None,
        *,
        num_workers: int,
        validate: bool = False,
        start_method: str | None = None,
        wrap: Callable[[VecEnv], VecEnv] | None = None,
        answer_timeout: float | None = DEFAULT_ANSWER_TIMEOUT,
    ) -> None:
        self._game_bounds: list[int] | None = None  # until the workers said how many players
        super().__init__(
            make_game,  # type: ignore[arg-type]
            num_games,
            seed,
            num_workers=num_workers,
            validate=validate,
            start_method=start_method,
            wrap=wrap,
            answer_timeout=answer_timeout,
            build=PlayerVecEnv,
        )
        try:
            self.name, self.players, self.group_names, self.groups = self.call(
                _describe_game, [()] * self.num_workers
            )[0]
        except BaseException:
            self.close()
            raise
        # ProcessVecEnv split the games; its rows are (game, player) seats.
        seats = len(self.players)
        self._game_bounds = self.bounds
        self.bounds = [b * seats for b in self._game_bounds]
        self.num_games = num_games
        self.num_envs = num_games * seats

    def _describe(self, k: int) -> str:
        games = self._game_bounds if self._game_bounds is not None else self.bounds
        return f"game worker {k} (games {games[k]}..{games[k + 1] - 1})"

    @property
    def observations(self) -> list[Observation]:
        last = self._last  # reading them does not step the games
        parts: Sequence[list[Observation]] = self.call(_observations, [()] * self.num_workers)
        self._last = last
        return [obs for part in parts for obs in part]


__all__ = ["ProcessPlayerVecEnv"]
