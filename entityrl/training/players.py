"""Who plays the seats of a multi-player game: the learner, snapshots, scripted or random players.

In a :class:`~entityrl.env.multiplayer_vec.MultiPlayerVecEnv` each row is a seat (a player of one
game). A :class:`Player` chooses the actions of the rows it is given, carrying whatever state
it needs from one step to the next (a recurrent network's memory, or a scripted player's rows):
``act(obs, state) -> (actions, state)``. The sampler gives the learner some seats and the
opponents the others (:class:`Seating`), so an opponent is just another player.
:class:`PlayerStates` keeps each player's state of every row, and starts a row's afresh where
the row's episode starts (:func:`episode_over`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
import torch

from entityrl.env.action_rows import batch_actions
from entityrl.env.multiplayer_vec import MultiPlayerVecEnv
from entityrl.env.observation import Action, Observation
from entityrl.env.random_policy import RandomPolicy
from entityrl.env.spaces import ActionSpace
from entityrl.env.vec_obs import VecObs
from entityrl.nn.rogue_net import RogueNet
from entityrl.ragged import RaggedArray
from entityrl.training.agent import Agent

Actions = dict[str, RaggedArray]

ScriptedFunction = Callable[[Observation], Mapping[str, Action]]
"""A scripted player: one player's observation in, its actions (by action name) out."""


class Player(Protocol):
    """Chooses the actions of some rows of a batch.

    A state is None (nothing to carry) or holds one entry per row along its first axis (a
    tensor or an array), so that the rows' states can be taken, put back and started afresh
    one by one (:class:`PlayerStates`)."""

    def initial_state(self, rows: npt.NDArray[np.int64]) -> Any:
        """The state of the batch rows ``rows`` when their episodes start."""

    def act(self, obs: VecObs, state: Any) -> tuple[Actions, Any]:
        """Actions for every row of ``obs`` (the rows the player plays, whose states are
        ``state``) and their states after the step."""


class NetworkPlayer:
    """A RogueNet policy (a frozen snapshot of the learner, or a trained agent's network)
    acting through an :class:`~entityrl.training.agent.Agent`: sampled actions, or the most
    probable ones with ``deterministic``. Its states are kept by :class:`PlayerStates`."""

    def __init__(
        self, net: RogueNet, generator: torch.Generator, *, deterministic: bool = False
    ) -> None:
        self.agent = Agent(net, generator=generator, deterministic=deterministic)

    @property
    def net(self) -> RogueNet:
        return self.agent.net

    @property
    def generator(self) -> torch.Generator:
        return self.agent.generator

    def initial_state(self, rows: npt.NDArray[np.int64]) -> torch.Tensor | None:
        return self.net.initial_state(rows.shape[0])

    def act(self, obs: VecObs, state: torch.Tensor | None) -> tuple[Actions, Any]:
        out = self.agent.decide(obs, state)
        return out.actions(obs), out.state


class RandomPlayer:
    """Uniformly random legal actions."""

    def __init__(self, action_space: Mapping[str, ActionSpace], seed: int | None = None) -> None:
        self.policy = RandomPolicy(action_space, seed)

    def initial_state(self, rows: npt.NDArray[np.int64]) -> None:
        return None

    def act(self, obs: VecObs, state: None) -> tuple[Actions, None]:
        return self.policy.act(obs), None


class ScriptedPlayer:
    """A :data:`ScriptedFunction` playing its rows of ``env``: it reads each row's
    :class:`Observation` as the game gave it. Its state is the rows it plays."""

    def __init__(self, function: ScriptedFunction, env: MultiPlayerVecEnv) -> None:
        self.function = function
        self.env = env
        self.type_names = list(env.obs_space.entities)

    def initial_state(self, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        return rows

    def act(
        self, obs: VecObs, state: npt.NDArray[np.int64]
    ) -> tuple[Actions, npt.NDArray[np.int64]]:
        observations = [self.env.observations[row] for row in state.tolist()]
        answers = [self.function(o) if o.actions else {} for o in observations]
        where = [f"scripted player {_name(self.function)}"] * len(observations)
        actions = batch_actions(
            observations, answers, self.env.action_space, self.type_names, where
        )
        return actions, state


def _name(function: Callable[..., Any]) -> str:
    return f"{function.__module__}:{getattr(function, '__qualname__', repr(function))}"


def import_function(path: str) -> ScriptedFunction:
    """The function named ``module:function``; a clear error when there is none."""
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise ValueError(f"expected a scripted player as module:function, got {path!r}")
    try:
        function = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"cannot import the scripted player {path!r}: {err}") from None
    if not callable(function):
        raise ValueError(f"{path!r} is not a function (got {type(function).__name__})")
    return function  # type: ignore[no-any-return]


# ---------------------------------------------------------------------------- states
def episode_over(before: VecObs, after: VecObs) -> npt.NDArray[np.bool_]:
    """Per row of a multi-player batch, whether nothing of the row's episode goes on past the
    step from ``before`` to ``after``: its player left with the step (``done``), or was not in
    play (it had left, or had not joined yet). A row's next episode (its game's restart, its
    player joining) starts after such a step, so a state reset after each of them is fresh
    exactly there."""
    over = after.done.copy()
    if before.active is not None:
        over |= ~before.active
    return over


class PlayerStates:
    """Each player's state (:meth:`Player.initial_state`) of every row of a batch of ``rows``
    rows, carried from step to step and from rollout to rollout (updated in place).

    A player reads and writes its own state of the rows it acts for; :meth:`restart` starts a
    row's state afresh, for every player, where the row's episode starts. So a player that
    takes over a row mid-game (seats are drawn anew every rollout) goes on from its own state
    of that row: the initial one, unless it played there earlier in the same game.
    """

    def __init__(self, rows: int) -> None:
        self.rows = rows
        # By id: a player need not be hashable; the entry keeps it alive, so ids stay unique.
        self._states: dict[int, tuple[Player, Any]] = {}

    def act(self, player: Player, obs: VecObs, rows: npt.NDArray[np.int64]) -> Actions:
        """``player``'s actions for the batch rows ``rows`` (``obs`` holds those rows only),
        from and into its state of them."""
        state = self.get(player)
        actions, after = player.act(obs, None if state is None else state[rows])
        if state is not None:
            state[rows] = after
        return actions

    def get(self, player: Player) -> Any:
        """``player``'s state of every row (the initial one before it first acts)."""
        if id(player) not in self._states:
            self._states[id(player)] = (player, player.initial_state(np.arange(self.rows)))
        return self._states[id(player)][1]

    def set(self, player: Player, state: Any) -> None:
        """Give ``player`` back its state of every row (one :meth:`get` returned)."""
        self._states[id(player)] = (player, state)

    def restart(self, over: npt.NDArray[np.bool_]) -> None:
        """After a step: every player's state of the rows whose episode is ``over`` (see
        :func:`episode_over`) back to its initial state."""
        rows = np.flatnonzero(over)
        if not rows.size:
            return
        for player, state in self._states.values():
            if state is not None:
                state[rows] = player.initial_state(rows)

    def keep(self, players: Sequence[Player]) -> None:
        """Forget the states of every player but ``players`` (one that plays again starts
        afresh)."""
        kept = {id(player) for player in players}
        self._states = {key: entry for key, entry in self._states.items() if key in kept}


# ---------------------------------------------------------------------------- seating
@dataclass
class Seating:
    """Which rows the learner plays and which the opponents play, for one rollout.

    ``owner[row]`` is -1 for the learner's rows, else the index of the opponent in
    ``opponents`` that plays the row.
    """

    owner: npt.NDArray[np.int64]
    opponents: list[Player]

    @property
    def learner_rows(self) -> npt.NDArray[np.int64]:
        return np.flatnonzero(self.owner < 0)

    def opponent_rows(self) -> list[tuple[Player, npt.NDArray[np.int64]]]:
        return [(p, np.flatnonzero(self.owner == k)) for k, p in enumerate(self.opponents)]

    @staticmethod
    def learner_everywhere(rows: int) -> Seating:
        """Every seat the learner's (independent learners sharing one policy)."""
        return Seating(np.full(rows, -1, dtype=np.int64), [])


def random_seats(
    games: int,
    players: int,
    learner_players: Sequence[int],
    seats_per_game: int,
    rng: np.random.Generator,
) -> npt.NDArray[np.bool_]:
    """Per row (game-major), whether the learner plays it: in each game, ``seats_per_game``
    seats drawn from ``learner_players`` (the players it may play)."""
    learner = np.zeros((games, players), dtype=np.bool_)
    for game in range(games):
        seats = rng.choice(learner_players, size=seats_per_game, replace=False)
        learner[game, seats] = True
    return learner.reshape(-1)


def merge_actions(parts: Sequence[tuple[npt.NDArray[np.int64], Actions]], rows: int) -> Actions:
    """One batch of actions from the actions of disjoint sets of rows."""
    order = np.concatenate([part_rows for part_rows, _ in parts])
    if order.shape[0] != rows:
        raise ValueError(f"the players' rows cover {order.shape[0]} of {rows} rows")
    inverse = np.empty(rows, dtype=np.int64)
    inverse[order] = np.arange(rows)
    names = parts[0][1].keys()
    return {
        name: RaggedArray.concat([actions[name] for _, actions in parts]).take(inverse)
        for name in names
    }
