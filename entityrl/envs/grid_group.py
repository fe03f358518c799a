"""What the cooperative grid games share: players "0", "1", ... in one group, each moving
(stay, up, down, left, right) every step and seeing only a few cells around it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from entityrl.env import GlobalCategoricalActionMask, GlobalCategoricalActionSpace, Observation
from entityrl.env.multiplayer import MultiPlayerEnvironment
from entityrl.envs.grid import MOVES_OR_STAY, Cell


class GridGroupGame(MultiPlayerEnvironment):
    """``players`` players on a ``size`` x ``size`` grid, all in group :attr:`GROUP`, who see
    ``sight`` cells around them (in x and in y) and whose games last at most ``max_steps``."""

    GROUP: ClassVar[str]

    def __init__(self, size: int, players: int, sight: int, max_steps: int) -> None:
        name = type(self).__name__
        if size < 2:
            raise ValueError(f"{name}: size must be >= 2, got {size}")
        if sight < 0:
            raise ValueError(f"{name}: sight must be >= 0, got {sight}")
        if max_steps < 1:
            raise ValueError(f"{name}: max_steps must be >= 1, got {max_steps}")
        self.size = size
        self.sight = sight
        self.max_steps = max_steps
        self.names = tuple(str(i) for i in range(players))
        self.steps = 0

    def players(self) -> tuple[str, ...]:
        return self.names

    def groups(self) -> dict[str, str]:
        return dict.fromkeys(self.names, self.GROUP)

    def action_space(self) -> dict[str, GlobalCategoricalActionSpace]:
        return {"move": GlobalCategoricalActionSpace(list(MOVES_OR_STAY))}

    def observe(self, player: str, me: Cell, done: bool) -> Observation:
        """``player``'s view from ``me``, its cell."""
        raise NotImplementedError

    def answer(
        self, left: Mapping[str, Cell], in_play: Mapping[str, Cell], over: bool
    ) -> dict[str, Observation]:
        """A step's observations: the last ones of the players that ``left`` on it, and those
        of the players still ``in_play`` (their last too when the game is ``over``)."""
        observations = {p: self.observe(p, cell, done=True) for p, cell in left.items()}
        observations.update({p: self.observe(p, cell, done=over) for p, cell in in_play.items()})
        return observations

    def view(
        self,
        features: Mapping[str, Sequence[Sequence[float]]],
        visible: Mapping[str, Sequence[bool]],
        done: bool,
        metrics: Mapping[str, float],
    ) -> Observation:
        """A player's observation of these entities (global features: the steps left and the
        grid's size; every player may move; rewards are the group's)."""
        return Observation(
            features=dict(features),
            global_features=[self.max_steps - self.steps, self.size],
            visible=dict(visible),
            actions={"move": GlobalCategoricalActionMask()},
            reward=0.0,
            done=done,
            metrics=dict(metrics),
        )

    def in_sight(self, me: Cell, cell: Cell) -> bool:
        """Whether a player at ``me`` sees ``cell``."""
        return abs(cell[0] - me[0]) <= self.sight and abs(cell[1] - me[1]) <= self.sight
