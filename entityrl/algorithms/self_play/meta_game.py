"""The games that fill the pool's meta-game (``selfplay.opponent_mix=nash``): a new snapshot
against each snapshot it joins, ``selfplay.meta_games`` games a pair, on environments of their
own.

Each round (one new snapshot) plays on fresh environments seeded by the round's number and
samples both sides' actions from generators seeded the same way, so the margins depend on the
snapshots and the round alone: a resumed run measures what the uninterrupted one did, and the
training's environments and random generators are left alone. The steps these games take are
counted apart (``selfplay/meta_steps``): they are not the learner's and do not count towards
``total_timesteps``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from entityrl.env.multiplayer_vec import MultiPlayerVecEnv
from entityrl.env.vec_env import VecEnv
from entityrl.env.vec_obs import VecObs
from entityrl.nn.rogue_net import RogueNet
from entityrl.training.match import play_games
from entityrl.training.players import NetworkPlayer

SEED_OFFSET = 2_000_000
"""The meta-game's environments are seeded ``seed + SEED_OFFSET + round * games + i``."""

Params = Mapping[str, torch.Tensor]


class CountedSteps:
    """Games that count their steps as the run's steps are counted, one a game (every other
    call passes through)."""

    def __init__(self, env: MultiPlayerVecEnv) -> None:
        self.env = env
        self.steps = 0

    def act(self, actions: Any) -> VecObs:
        self.steps += self.env.num_games
        return self.env.act(actions)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)


class MetaGamePlayer:
    """Plays new snapshots against the pool's (two copies of the network, one per side);
    ``steps`` counts the steps of all its games (this process's)."""

    def __init__(
        self,
        net: RogueNet,
        make_env: Callable[[int, int], VecEnv],
        games: int,
        seed: int,
    ) -> None:
        self.nets = (copy.deepcopy(net), copy.deepcopy(net))
        for side in self.nets:
            side.requires_grad_(False)
        self.make_env = make_env
        self.games = games
        self.seed = seed
        self.steps = 0

    def margins(self, new: Params, others: Sequence[Params], round_: int) -> list[float]:
        """The mean margin (half the difference of the two sides' mean returns) of ``new``
        against each of ``others`` over ``games`` games, ``new`` taking each seat in turn."""
        if not others:
            return []
        offset = SEED_OFFSET + round_ * self.games
        batch = self.make_env(self.games, offset)
        assert isinstance(batch, MultiPlayerVecEnv), "self-play checked the game"
        env = CountedSteps(batch)
        generator = torch.Generator(self.nets[0].device)
        generator.manual_seed(self.seed + offset)
        mine, theirs = (NetworkPlayer(net, generator) for net in self.nets)
        mine.net.load_state_dict(new)
        result = []
        try:
            for other in others:
                theirs.net.load_state_dict(other)
                played = play_games(mine, theirs, env, self.games)  # type: ignore[arg-type]
                result.append(float(np.mean([(g.payoff - g.opponent_payoff) / 2 for g in played])))
        finally:
            env.close()
            self.steps += env.steps
        return result


def mixture_members(
    net: RogueNet, snapshots: Sequence[Params], mixture: Sequence[float], least: float = 1e-4
) -> tuple[list[RogueNet], list[float]]:
    """The pool's Nash mixture as networks (copies of ``net`` holding the snapshots) and their
    weights, leaving out the snapshots weighted below ``least``."""
    nets, weights = [], []
    for snapshot, weight in zip(snapshots, mixture, strict=True):
        if weight >= least:
            member = copy.deepcopy(net)
            member.load_state_dict(snapshot)
            nets.append(member)
            weights.append(float(weight))
    return nets, weights


def saved_mixture(
    net: RogueNet, checkpoint: Mapping[str, Any]
) -> tuple[list[RogueNet], list[float]]:
    """:func:`mixture_members` of a self-play checkpoint's pool (none for a run without
    ``selfplay.opponent_mix=nash``)."""
    saved = checkpoint.get("selfplay")
    pool = saved[0]["pool"] if saved else {}
    if not len(pool.get("mixture", [])):  # a uniform pool has snapshots, no mixture
        return [], []
    return mixture_members(net, pool["snapshots"], pool["mixture"])
