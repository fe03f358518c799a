"""Asynchronous sampling of multi-player games (``rollout.mode=async`` with ``algo=selfplay``,
``algo=poca`` or ``algo=ppo`` on a game): workers that own whole games and play every seat.

In sync mode the games may step in worker processes, but every player's policy acts in the
training process (:class:`~entityrl.training.player_sampler.PlayerSampler`). Here each worker of
the game pool (:class:`~entityrl.env.multiplayer_workers.ProcessPlayerVecEnv` or its Ray
sibling) plays its block of games for a whole rollout by itself, with the loop the training
process runs in sync mode (:func:`~entityrl.training.player_sampler.play`):

- the learner's seats with the parameters it last received (with the rollout's request, as for
  single-player environments: :class:`~entityrl.training.async_sampler.AsyncSampler`);
- the opponents' seats with the opponents of the seating the learner drew for the rollout (its
  :class:`~entityrl.training.players.Seating`: which row each player plays). An opponent crosses
  to the workers only when the seating names a new one (self-play swaps its snapshot every
  ``selfplay.swap_every`` steps): a network (a snapshot, a trained agent) as the pickled
  network, a random player as its kind (each worker draws from a generator of its own), a
  scripted player as its function, run on the worker's own games. The worker keeps it, and its
  states of the rows, until the seating names another.

A worker sends back the learner's steps of its games (the acting policy's log-probabilities
among them, with ``net.memory`` the states it acted from) and its finished games, scored for
the learner. The learner assembles the steps in the rows and order of sync mode and corrects
the lag by V-trace like any async rollout; the games are rated worker after worker (in sync
mode, step after step).

Which opponent a rollout meets is decided when it is requested, so the games it reports are
rated against that opponent: the request for the next rollout leaves after this iteration's
swap, and its games are rated at the end of the same iteration, before the next swap.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from entityrl.algorithms.common.rollout import Rollout
from entityrl.env.multiplayer_vec import MultiPlayerVecEnv
from entityrl.env.vec_env import VecEnv
from entityrl.nn.rogue_net import RogueNet
from entityrl.training.async_sampler import AsyncSampler, refusal
from entityrl.training.match import GameResult
from entityrl.training.player_sampler import PlayerSampler, play
from entityrl.training.players import (
    NetworkPlayer,
    Player,
    PlayerStates,
    RandomPlayer,
    ScriptedPlayer,
    Seating,
)
from entityrl.training.sampler import _Step, _worker_agent

# How an opponent crosses to a worker: (kind, what the worker rebuilds it from).
Portable = tuple[str, Any]


def portable(player: Player) -> Portable:
    """What a worker rebuilds ``player`` from (:func:`_rebuild`); a TypeError naming a player
    that cannot cross."""
    if isinstance(player, NetworkPlayer):
        # Pickled by value: the worker's copy must not alias the training process's tensors.
        return "network", (pickle.dumps(player.net), player.agent.deterministic)
    if isinstance(player, RandomPlayer):
        return "random", None
    if isinstance(player, ScriptedPlayer):
        return "scripted", player.function
    raise TypeError(
        "rollout.mode=async plays the opponents in the worker processes: expected a "
        f"NetworkPlayer, RandomPlayer or ScriptedPlayer, got a {type(player).__name__}"
    )


def _rebuild(kind: str, payload: Any, envs: MultiPlayerVecEnv, seed: int) -> Player:
    """In a worker: the opponent :func:`portable` described, playing ``envs``."""
    if kind == "network":
        net, deterministic = payload
        generator = torch.Generator()
        generator.manual_seed(seed)
        return NetworkPlayer(pickle.loads(net), generator, deterministic=deterministic)
    if kind == "random":
        return RandomPlayer(envs.action_space, seed)
    return ScriptedPlayer(payload, envs)


def _worker_game_rollout(
    envs: VecEnv,
    context: dict[str, Any],
    params: dict[str, npt.NDArray[Any]],
    state: npt.NDArray[np.float32] | None,
    steps: int,
    seed: int,
    owner: npt.NDArray[np.int64],
    opponents: list[Portable] | None,
) -> tuple[list[_Step], Any, npt.NDArray[np.float32] | None, list[GameResult]]:
    """In a worker: ``steps`` steps of its games, the learner (the policy of ``params``, from
    its ``state`` of the worker's rows) in the rows ``owner`` gives it (-1), the opponents in
    the others: ``opponents`` (None: those of the last rollout)."""
    assert isinstance(envs, MultiPlayerVecEnv), "the game pool runs games"
    agent = _worker_agent(context, params, state, seed)
    if opponents is not None:
        # Each worker's opponents draw from generators of their own.
        opponent_seed = int(np.random.SeedSequence(seed).generate_state(1, np.uint64)[0] >> 1)
        context["opponents"] = [
            _rebuild(kind, payload, envs, opponent_seed + k)
            for k, (kind, payload) in enumerate(opponents)
        ]
    states = context.setdefault("opponent_states", PlayerStates(envs.num_envs))
    seating = Seating(owner, context.get("opponents", []))
    taken, latest, results = play(agent, envs, envs.observation, steps, seating, states)
    return taken, latest, None if agent.state is None else agent.state.numpy(), results


class AsyncGameSampler(AsyncSampler, PlayerSampler):
    """:class:`AsyncSampler` for a batch of games in worker processes (a
    :class:`~entityrl.env.multiplayer_workers.ProcessPlayerVecEnv`): the learner's seats and the
    opponents are those of :class:`PlayerSampler` (``seat``, drawn when a rollout is requested;
    :meth:`take_results`), the games are played in the workers (see the module's docstring).

    With ``net.memory`` the workers carry the learner's states of their rows across rollouts
    (sent back and forth as for single-player environments) and the opponents' states (a
    network opponent's memory, a scripted player's rows) stay in the workers: this process's
    :attr:`opponent_states` is unused, and a checkpoint keeps no opponent memory (a resumed
    run's opponents start theirs afresh)."""

    _work = staticmethod(_worker_game_rollout)

    def __init__(
        self,
        env: MultiPlayerVecEnv,
        net: RogueNet,
        steps: int,
        rng: np.random.Generator,
        eval_rows: int,
        seat: Callable[[], Seating] | None = None,
        decisions: bool = False,
    ) -> None:
        if decisions:  # a game given as a class escapes check_async, which reads env.id
            raise refusal(f"env.decisions in a multi-player game ({env.name})")
        self._sent: list[Player] | None = None  # the opponents the workers hold
        super().__init__(env, net, steps, rng, eval_rows, seat=seat)

    def _requests(self) -> list[tuple[Any, ...]]:
        self.seating = seating = self.seat()
        opponents = None
        if self._sent is None or not _same(self._sent, seating.opponents):
            opponents = [portable(player) for player in seating.opponents]
            self._sent = list(seating.opponents)  # kept alive: compared by identity
        bounds = self.env.bounds
        return [
            (*request, seating.owner[bounds[k] : bounds[k + 1]], opponents)
            for k, request in enumerate(super()._requests())
        ]

    def _adopt(self, parts: list[tuple[Any, ...]]) -> Rollout:
        for *_, results in parts:
            self.results += results
        return super()._adopt([part[:3] for part in parts])  # type: ignore[misc]


def _same(sent: list[Player], opponents: list[Player]) -> bool:
    return len(sent) == len(opponents) and all(a is b for a, b in zip(sent, opponents, strict=True))
