"""Self-play: PPO for the learner's seats of a multi-player game, frozen snapshots of the
learner in the others (:mod:`entityrl.algorithms.self_play.pool` for the pool and its settings).

Every rollout, each game gives the learner one seat (drawn among ``selfplay.learner_players``)
and the current opponent every other seat. The learner is snapshotted into the pool every
``selfplay.snapshot_every`` steps and the opponent changes every ``selfplay.swap_every``;
finished games update the Elo ratings, logged as ``selfplay/elo``.

With ``net.memory`` the opponent keeps its own state of every row, as the learner does
(:class:`~entityrl.training.players.PlayerStates`); a new opponent starts with none, and the
checkpoint keeps the current one's, so a resumed run continues exactly.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch

from entityrl.algorithms.base import Context, Iteration
from entityrl.algorithms.ppo.algorithm import PPO
from entityrl.algorithms.self_play.pool import OpponentPool, SelfPlayConfig
from entityrl.env.multiplayer_vec import PlayerVecEnv
from entityrl.env.vec_obs import VecObs
from entityrl.training.agent import AgentError
from entityrl.training.checkpoint import CheckpointError
from entityrl.training.config import ConfigError
from entityrl.training.match import load_opponent
from entityrl.training.player_sampler import PlayerSampler
from entityrl.training.players import NetworkPlayer, Player, Seating, random_seats


class SelfPlay(PPO):
    """PPO against a pool of the learner's past selves."""

    name = "selfplay"
    Settings = SelfPlayConfig
    one_process = True
    sampler: PlayerSampler

    def __init__(self, ctx: Context) -> None:
        env = ctx.env
        if not isinstance(env, PlayerVecEnv):
            raise ConfigError(
                f"algo=selfplay needs a multi-player environment; {ctx.config.env.id} has "
                "one player (a MultiPlayerEnvironment declares several)"
            )
        config = ctx.config.selfplay
        unknown = [p for p in config.learner_players if p not in env.players]
        if unknown:
            raise ConfigError(
                f"selfplay.learner_players: unknown players {unknown}; the game's players: "
                f"{env.players}"
            )
        if len(env.players) < 2:
            raise ConfigError(f"algo=selfplay needs 2 or more players, {env.name} has 1")
        names = config.learner_players or env.players
        self.learner_players = [env.players.index(p) for p in names]
        self.pool = OpponentPool(config)
        self.opponent = NetworkPlayer(copy.deepcopy(ctx.net), torch.Generator(ctx.net.device))
        self.fixed: Player | None = None
        if config.opponent:
            try:
                self.fixed = load_opponent(config.opponent, env, ctx.config.seed)
            except (ValueError, CheckpointError, AgentError) as err:
                raise ConfigError(f"selfplay.opponent: {err}") from None
            self.pool.fixed()
        self.last_snapshot = self.last_swap = 0
        self.step = 0
        self.saved_opponent_memory: torch.Tensor | None = None  # see load_state_dict
        super().__init__(ctx)

    def make_sampler(self) -> PlayerSampler:
        ctx = self.ctx
        return PlayerSampler(
            ctx.env,  # type: ignore[arg-type]
            ctx.net,
            ctx.config.rollout.steps,
            ctx.generator,
            seat=self.seat,
        )

    def seat(self) -> Seating:
        """This rollout's seats: one per game for the learner, the rest for the opponent."""
        env: PlayerVecEnv = self.ctx.env  # type: ignore[assignment]
        learner = random_seats(
            env.num_games, len(env.players), self.learner_players, 1, self.ctx.rng
        )
        owner = np.where(learner, -1, 0)
        if self.fixed is not None:
            return Seating(owner, [self.fixed])
        if not self.pool.snapshots:  # the first rollout: play against the starting policy
            self.pool.add(self.ctx.net.state_dict())
            self.swap()
        # Drawn from the run's random generator, so a resumed run plays the same games.
        self.opponent.generator.manual_seed(int(self.ctx.rng.integers(2**63)))
        return Seating(owner, [self.opponent])

    def swap(self) -> None:
        """Play the next opponent from the pool."""
        chosen = self.pool.choose(self.ctx.rng)
        # A new player (the same network, reloaded), so the sampler gives it a memory of its
        # own: the last snapshot's state would mean nothing to this one.
        self.opponent = NetworkPlayer(self.opponent.net, self.opponent.generator)
        self.opponent.net.load_state_dict(self.pool.snapshots[chosen])

    @property
    def current_opponent(self) -> Player:
        """The player in the opponent's seats: the fixed opponent, or the current snapshot."""
        return self.fixed if self.fixed is not None else self.opponent

    def iterate(self, step: int, lr: float) -> Iteration:
        config = self.ctx.config.selfplay
        if self.fixed is None and step - self.last_snapshot >= config.snapshot_every:
            self.pool.add(self.ctx.net.state_dict())
            self.last_snapshot = step
        if self.fixed is None and step - self.last_swap >= config.swap_every:
            self.swap()
            self.last_swap = step
        iteration = super().iterate(step, lr)
        results = self.sampler.take_results()
        for result in results:
            self.pool.record(result.score)
        iteration.metrics["selfplay/elo"] = self.pool.learner_elo
        iteration.metrics["selfplay/opponent_elo"] = self.pool.ratings[self.pool.current]
        if self.fixed is None:
            iteration.metrics["selfplay/pool"] = float(len(self.pool.snapshots))
        if results:
            iteration.metrics["selfplay/score"] = float(np.mean([r.score for r in results]))
        return iteration

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        memory = self.sampler.opponent_states.get(self.current_opponent)
        state["selfplay"] = {
            "pool": self.pool.state_dict(),
            "last_snapshot": self.last_snapshot,
            "last_swap": self.last_swap,
            # A network's memory; other players' states (a scripted player's rows) are rebuilt.
            "opponent_memory": memory if isinstance(memory, torch.Tensor) else None,
        }
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        saved = state["selfplay"]
        self.pool.load_state_dict(saved["pool"])
        self.last_snapshot = int(saved["last_snapshot"])
        self.last_swap = int(saved["last_swap"])
        if self.pool.snapshots:
            self.opponent.net.load_state_dict(self.pool.snapshots[self.pool.current])
        # Like the learner's memory, used once the environments are back where they were.
        self.saved_opponent_memory = saved.get("opponent_memory")

    def restore_environments(self, obs: VecObs) -> None:
        super().restore_environments(obs)
        if self.saved_opponent_memory is not None:
            self.sampler.opponent_states.set(self.current_opponent, self.saved_opponent_memory)
