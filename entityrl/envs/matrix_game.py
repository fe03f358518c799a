"""MatrixGame: a two-player zero-sum game of one simultaneous choice, from its payoff matrix."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from entityrl.env import (
    CategoricalAction,
    CategoricalActionMask,
    CategoricalActionSpace,
    Entity,
    Observation,
    ObsSpace,
)
from entityrl.env.multiplayer import MultiPlayerEnvironment, PlayerActions
from entityrl.envs.in_play import check_in_play
from entityrl.training.matrix_games import equilibrium_suite, payoff_matrix


class MatrixGame(MultiPlayerEnvironment):
    """Players "row" and "column" each pick one choice at once; each game is one step.

    ``payoff[i, j]`` (a list of lists, shape ``(m, n)``) is the row player's reward when it
    picks ``i`` and the column player picks ``j``; the column player's is ``-payoff[i, j]``.
    Without ``payoff``, the game is number ``game`` of
    :func:`~entityrl.training.matrix_games.equilibrium_suite` (2x2 and 3x3 games whose only
    equilibrium is mixed and not uniform).

    Each player observes one ``Player`` entity (itself) whose feature ``column`` is 1 for the
    column player and 0 for the row player, so one policy can learn both seats; it takes the
    categorical ``choice`` action over ``max(m, n)`` choices, those beyond its own count masked.
    Optimal return: the game's value for the row player, minus it for the column player; the
    equilibrium's NashConv is 0 (``entityrl eval RUN --exploitability``).
    """

    action = "choice"
    """The name of the one categorical action."""
    seat_feature = True
    """Whether the ``Player`` entity tells its seat (a symmetric game may leave it out)."""
    player_names: tuple[str, str] = ("row", "column")

    def __init__(self, payoff: Sequence[Sequence[float]] | None = None, game: int = 0) -> None:
        if payoff is None:
            if game < 0:
                raise ValueError(f"{type(self).__name__}: game must be >= 0, got {game}")
            self.payoff = equilibrium_suite(game + 1)[game][0]
        else:
            self.payoff = payoff_matrix(payoff, type(self).__name__)
        self.choices = max(self.payoff.shape)
        self.in_play: tuple[str, ...] = ()
        self.picks: dict[str, int] = {}

    def players(self) -> tuple[str, ...]:
        return self.player_names

    def choice_labels(self) -> list[str]:
        return [str(i) for i in range(self.choices)]

    def obs_space(self) -> ObsSpace:
        return ObsSpace(entities={"Player": Entity(["column"] if self.seat_feature else [])})

    def action_space(self) -> dict[str, CategoricalActionSpace]:
        return {self.action: CategoricalActionSpace(self.choice_labels())}

    def reset(self) -> dict[str, Observation]:
        self.in_play = self.player_names
        self.picks = {}
        return {player: self.observe(player, 0.0, done=False) for player in self.player_names}

    def act(self, actions: PlayerActions) -> dict[str, Observation]:
        name = type(self).__name__
        check_in_play(name, actions, self.in_play)
        for seat, player in enumerate(self.player_names):
            chosen = actions[player].get(self.action)
            legal = self.payoff.shape[seat]
            if (
                not isinstance(chosen, CategoricalAction)
                or len(chosen.indices) != 1
                or not 0 <= int(chosen.indices[0]) < legal
            ):
                raise ValueError(
                    f"{name}.act: player {player!r} must pick one of its {legal} choices (one "
                    f"CategoricalAction {self.action!r} for its Player), got {chosen!r}"
                )
            self.picks[player] = int(chosen.indices[0])
        row, column = (self.picks[p] for p in self.player_names)
        self.in_play = ()
        reward = float(self.payoff[row, column])
        return {
            self.player_names[0]: self.observe(self.player_names[0], reward, done=True),
            self.player_names[1]: self.observe(self.player_names[1], -reward, done=True),
        }

    def observe(self, player: str, reward: float, done: bool) -> Observation:
        seat = self.player_names.index(player)
        features = np.full((1, int(self.seat_feature)), seat, dtype=np.float32)
        mask: npt.NDArray[np.bool_] | None = None
        if self.payoff.shape[seat] < self.choices:
            mask = (np.arange(self.choices) < self.payoff.shape[seat]).reshape(1, -1)
        return Observation(
            features={"Player": features},
            actions={self.action: CategoricalActionMask(actor_types=["Player"], mask=mask)},
            reward=reward,
            done=done,
        )

    def render(self) -> str:
        if not self.picks:
            return "waiting for both choices"
        labels = self.choice_labels()
        return " vs ".join(f"{p}: {labels[self.picks[p]]}" for p in self.player_names)
