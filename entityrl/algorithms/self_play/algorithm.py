"""Self-play: PPO for the learner's seats of a multi-player game, frozen snapshots of the
learner in the others (:mod:`entityrl.algorithms.self_play.pool` for the pool and its settings).

Every rollout, each game gives the learner one seat (drawn among ``selfplay.learner_players``)
and the current opponent every other seat. The learner is snapshotted into the pool every
``selfplay.snapshot_every`` steps and the opponent changes every ``selfplay.swap_every``;
finished games update the Elo ratings, logged as ``selfplay/elo``.

With ``selfplay.opponent_mix=nash`` every new snapshot first plays ``selfplay.meta_games`` games
against each snapshot it joins (:mod:`entityrl.algorithms.self_play.meta_game`, on environments
of their own, their steps logged as ``selfplay/meta_steps`` and not counted in the run's steps),
and the opponents are drawn from the Nash mixture of the pool's meta-game
(:mod:`entityrl.algorithms.self_play.meta_nash`): the pool of policy-space response oracles
(PSRO, Lanctot et al. 2017), the learner's PPO standing in for their best response.

With ``selfplay.mode=magnet`` there is no pool: the learner plays every seat of every game
(both sides of an asymmetric game, told apart by what each seat observes) and each step's
reward is lowered by how far the policy's action leaves a slowly moving copy of it
(:mod:`entityrl.algorithms.self_play.magnet`), so the policy settles at a mixed equilibrium
where the pool's best responses would cycle around it.

With ``selfplay.mode=nfsp`` there is no pool either: the learner (the best response) plays one
seat of each game and the others are played by an average of its past play, a second network
fitted to the learner's decisions (:mod:`entityrl.algorithms.self_play.nfsp`), or with
probability ``selfplay.nfsp_eta`` per episode by the learner's policy; the average policy is
the run's agent when it ends (with ``selfplay.nfsp_polyak``, a Polyak average of that
network's parameters), as the Polyak average is below.

With ``selfplay.average_rate`` > 0 a Polyak average of the learner's parameters follows them
(:mod:`entityrl.algorithms.self_play.average`) and becomes the run's agent when it ends: the
final checkpoint's network is the average, and the last iterate is kept beside it, put back in
the network when the run is resumed (so resuming continues exactly, even from the end).

With ``net.memory`` the opponent keeps its own state of every row, as the learner does
(:class:`~entityrl.training.players.PlayerStates`); a new opponent starts with none, and the
checkpoint keeps the current one's, so a resumed run continues exactly.

In a data-parallel run (``world_size`` > 1) every process plays its own games, and the pool
stays the same in all of them: the snapshots are of the network, which they share; rank 0's
draw picks the next opponent for all; and every process rates the finished games of all of
them, in rank order. Rank 0 alone plays the meta-game's games and gives the others its margins.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import torch

from entityrl.algorithms.base import Context, Iteration
from entityrl.algorithms.common.rollout import Rollout
from entityrl.algorithms.ppo.algorithm import PPO
from entityrl.algorithms.self_play.average import ParameterAverage
from entityrl.algorithms.self_play.magnet import Magnet
from entityrl.algorithms.self_play.meta_game import MetaGamePlayer
from entityrl.algorithms.self_play.nfsp import AnticipatoryPlayer, AveragePolicy
from entityrl.algorithms.self_play.pool import OpponentPool, SelfPlayConfig
from entityrl.env.multiplayer_vec import MultiPlayerVecEnv
from entityrl.env.vec_obs import VecObs
from entityrl.training.agent import AgentError
from entityrl.training.async_games import AsyncGameSampler
from entityrl.training.checkpoint import CheckpointError
from entityrl.training.config import ConfigError, TrainConfig
from entityrl.training.match import load_opponent
from entityrl.training.player_sampler import PlayerSampler
from entityrl.training.players import NetworkPlayer, Player, Seating, random_seats


class SelfPlay(PPO):
    """PPO against a pool of the learner's past selves."""

    name = "selfplay"
    Settings = SelfPlayConfig
    # Not PPO's: on games the dataclasses' values did better (connect four by self-play, 0.82
    # against 0.69 in benchmarks/robustness.py).
    defaults: ClassVar[Mapping[str, Any]] = {}
    sampler: PlayerSampler

    @classmethod
    def check(cls, config: TrainConfig) -> None:
        super().check(config)
        settings = config.selfplay
        if settings.opponent_mix == "nash" and (settings.opponent or settings.learner_players):
            raise ConfigError(
                "selfplay.opponent_mix=nash solves the symmetric meta-game of the learner's "
                "snapshots in every seat: selfplay.opponent and selfplay.learner_players must be "
                f"empty, got {settings.opponent!r} and {list(settings.learner_players)}"
            )
        if settings.mode == "nfsp":
            cls.check_nfsp(config)
        if settings.mode != "magnet":
            return
        if config.net.memory:
            raise ConfigError(
                "selfplay.mode=magnet scores whole rollouts without a recurrent state: it "
                "cannot train net.memory (set net.memory=false or selfplay.mode=pool)"
            )
        if settings.opponent or settings.learner_players:
            raise ConfigError(
                "selfplay.mode=magnet plays the learner in every seat: selfplay.opponent and "
                f"selfplay.learner_players must be empty, got {settings.opponent!r} and "
                f"{list(settings.learner_players)}"
            )

    @staticmethod
    def check_nfsp(config: TrainConfig) -> None:
        """What selfplay.mode=nfsp does not support, refused in one line each."""
        if config.net.memory:
            raise ConfigError(
                "selfplay.mode=nfsp fits its average policy to single decisions, without a "
                "recurrent state: set net.memory=false"
            )
        if config.selfplay.opponent:
            raise ConfigError(
                "selfplay.mode=nfsp plays the average policy in the opponents' seats: "
                f"selfplay.opponent must be empty, got {config.selfplay.opponent!r}"
            )
        if config.world_size > 1:
            raise ConfigError(
                "selfplay.mode=nfsp keeps one reservoir in one process: set world_size=1, "
                f"got {config.world_size}"
            )

    def __init__(self, ctx: Context) -> None:
        env = ctx.env
        if not isinstance(env, MultiPlayerVecEnv):
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
        self.meta_game: MetaGamePlayer | None = None
        if config.opponent_mix == "nash":
            if len(env.players) != 2:
                raise ConfigError(
                    "selfplay.opponent_mix=nash solves a two-player meta-game; "
                    f"{env.name} has {len(env.players)} players"
                )
            if ctx.make_env is None:
                raise ConfigError(
                    "selfplay.opponent_mix=nash plays its meta-game on environments of its own: "
                    "expected a loop that gives them (Context.make_env), got none"
                )
            self.meta_game = MetaGamePlayer(
                ctx.net, ctx.make_env, config.meta_games, ctx.config.seed
            )
        self.meta_rounds = 0  # snapshots that joined the meta-game
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
        self.magnet: Magnet | None = None
        self.magnet_mode = config.mode == "magnet"  # make_sampler runs before the magnet exists
        self.magnet_kl = 0.0  # the latest rollout's mean KL(policy || magnet) estimate
        self.learner_params: dict[str, torch.Tensor] | None = None  # while the net is the average
        self.nfsp: AveragePolicy | None = None
        self.saved_nfsp_draws: torch.Tensor | None = None  # see load_state_dict
        super().__init__(ctx)
        self.average: ParameterAverage | None = None
        if config.average_rate > 0:
            self.average = self.own("average", ParameterAverage(ctx.net, config.average_rate))
        if self.magnet_mode:
            self.magnet = self.own(
                "magnet", Magnet(ctx.net, config.magnet_coef, config.magnet_rate)
            )
        if config.mode == "nfsp":
            self.nfsp = self.own(
                "nfsp",
                AveragePolicy(
                    ctx.net,
                    ctx.config.optim,
                    config.nfsp_lr,
                    env.choices,
                    config.nfsp_reservoir,
                    config.nfsp_batches,
                    config.nfsp_bs,
                    config.nfsp_polyak,
                    config.nfsp_recency,
                ),
            )
            generator = self.opponent.generator
            self.anticipatory = AnticipatoryPlayer(
                NetworkPlayer(ctx.net, generator),
                NetworkPlayer(self.nfsp.net, generator),
                config.nfsp_eta,
            )

    def make_sampler(self) -> PlayerSampler:
        ctx = self.ctx
        if ctx.config.rollout.mode == "async":  # the games played in the workers
            return AsyncGameSampler(
                ctx.env, ctx.net, ctx.config.rollout.steps, ctx.rng, ctx.config.optim.bs,
                seat=self.seat, decisions=ctx.config.env.decisions.enabled,
            )  # fmt: skip
        return PlayerSampler(
            ctx.env,  # type: ignore[arg-type]
            ctx.net,
            ctx.config.rollout.steps,
            ctx.generator,
            seat=None if self.magnet_mode else self.seat,
            decisions=ctx.config.env.decisions.enabled,
        )

    def begin(self, resumed: bool, pretrained: bool) -> None:
        super().begin(resumed, pretrained)
        if self.magnet is not None and not resumed:
            self.magnet.reset(self.ctx.net)
        if self.average is not None and not resumed:
            self.average.reset(self.ctx.net)
        if self.nfsp is not None and not resumed:
            self.nfsp.reset(self.ctx.net)

    def task_rewards(self, rollout: Rollout) -> npt.NDArray[np.float32]:
        """The task's rewards; with the magnet, less its penalty for leaving the magnet."""
        rewards = super().task_rewards(rollout)
        if self.magnet is None:
            return rewards
        penalty = self.magnet.penalty(rollout)
        self.magnet_kl = float(penalty.mean()) / self.magnet.coef
        return rewards - penalty

    def learn_more(self, rollout: Rollout, step: int, lr: float) -> dict[str, float]:
        """With mode=nfsp, also the average policy's fit to the learner's decisions."""
        metrics = super().learn_more(rollout, step, lr)
        if self.nfsp is not None:
            metrics.update(self.nfsp.learn(rollout, self.ctx.net, self.ctx.rng))
        return metrics

    def seat(self) -> Seating:
        """This rollout's seats: one per game for the learner, the rest for the opponent."""
        env: MultiPlayerVecEnv = self.ctx.env  # type: ignore[assignment]
        learner = random_seats(
            env.num_games, len(env.players), self.learner_players, 1, self.ctx.rng
        )
        owner = np.where(learner, -1, 0)
        if self.fixed is not None:
            return Seating(owner, [self.fixed])
        if self.nfsp is not None:
            # Drawn from the run's random generator, so a resumed run plays the same games.
            self.opponent.generator.manual_seed(int(self.ctx.rng.integers(2**63)))
            self.anticipatory.rng = np.random.default_rng(int(self.ctx.rng.integers(2**63)))
            return Seating(owner, [self.anticipatory])
        if not self.pool.snapshots:  # the first rollout: play against the starting policy
            self.add_snapshot()
            self.swap()
        # Drawn from the run's random generator, so a resumed run plays the same games.
        self.opponent.generator.manual_seed(int(self.ctx.rng.integers(2**63)))
        return Seating(owner, [self.opponent])

    def add_snapshot(self) -> None:
        """Snapshot the learner into the pool (with opponent_mix=nash, after its games against
        the snapshots that stay: rank 0's, for the pool to stay the same in all processes)."""
        params = self.ctx.net.state_dict()
        if self.meta_game is None:
            self.pool.add(params)
            return
        margins = None
        if self.ctx.reducer.rank == 0:
            others = self.pool.snapshots[self.pool.staying :]
            margins = self.meta_game.margins(params, others, self.meta_rounds)
        if self.ctx.reducer.world_size > 1:
            margins = self.ctx.reducer.gather(margins)[0]
        self.meta_rounds += 1
        self.pool.add(params, margins)

    def swap(self) -> None:
        """Play the next opponent from the pool."""
        chosen = self.pool.choose(self.ctx.rng)
        if self.ctx.reducer.world_size > 1:  # rank 0's draw, for the pool to stay the same
            chosen = self.pool.current = int(self.ctx.reducer.gather(chosen)[0])
        # A new player (the same network, reloaded), so the sampler gives it a memory of its
        # own: the last snapshot's state would mean nothing to this one.
        self.opponent = NetworkPlayer(self.opponent.net, self.opponent.generator)
        self.opponent.net.load_state_dict(self.pool.snapshots[chosen])

    @property
    def current_opponent(self) -> Player:
        """The player in the opponent's seats: the fixed opponent, NFSP's mixture of the best
        response and the average policy, or the current snapshot."""
        if self.fixed is not None:
            return self.fixed
        return self.anticipatory if self.nfsp is not None else self.opponent

    def iterate(self, step: int, lr: float) -> Iteration:
        iteration = self.iterate_learner(step, lr)
        if self.average is not None:
            if step >= self.ctx.config.selfplay.average_start:
                self.average.follow(self.ctx.net)
            else:
                self.average.reset(self.ctx.net)
        return iteration

    def finish(self) -> None:
        """With an average (Polyak's or NFSP's), the network becomes it (the last iterate is
        kept for resuming)."""
        super().finish()
        if self.average is not None:
            agent = self.average.net
        elif self.nfsp is not None:
            agent = self.nfsp.agent
        else:
            return
        if self.learner_params is None:
            self.learner_params = {
                k: v.detach().clone() for k, v in self.ctx.net.state_dict().items()
            }
            self.ctx.net.load_state_dict(agent.state_dict())

    def iterate_learner(self, step: int, lr: float) -> Iteration:
        """One iteration of the learner (and of the magnet or the pool)."""
        if self.magnet is not None:
            iteration = super().iterate(step, lr)
            self.magnet.follow(self.ctx.net)
            iteration.metrics["selfplay/magnet_kl"] = self.magnet_kl
            return iteration
        if self.nfsp is not None:
            iteration = super().iterate(step, lr)
            scores = [r.score for r in self.sampler.take_results()]
            if scores:  # against the opponents' mixture
                iteration.metrics["selfplay/score"] = float(np.mean(scores))
            return iteration
        config = self.ctx.config.selfplay
        if self.fixed is None and step - self.last_snapshot >= config.snapshot_every:
            self.add_snapshot()
            self.last_snapshot = step
        if self.fixed is None and step - self.last_swap >= config.swap_every:
            self.swap()
            self.last_swap = step
        iteration = super().iterate(step, lr)
        # Every process's games, in rank order, so that all of them rate alike.
        scores = [
            score
            for part in self.ctx.reducer.gather([r.score for r in self.sampler.take_results()])
            for score in part
        ]
        for score in scores:
            self.pool.record(score)
        iteration.metrics["selfplay/elo"] = self.pool.learner_elo
        iteration.metrics["selfplay/opponent_elo"] = self.pool.ratings[self.pool.current]
        if self.fixed is None:
            iteration.metrics["selfplay/pool"] = float(len(self.pool.snapshots))
        if self.meta_game is not None:
            iteration.metrics.update(self.meta_metrics())
        if scores:
            iteration.metrics["selfplay/score"] = float(np.mean(scores))
        return iteration

    def meta_metrics(self) -> dict[str, float]:
        """The meta-game's figures for the log: the steps its games took so far (this
        process's; outside the run's steps), the support and largest weight of the Nash
        mixture, the current opponent's weight, and the duality gap it was solved to."""
        assert self.meta_game is not None
        mixture = self.pool.mixture
        return {
            "selfplay/meta_steps": float(self.meta_game.steps),
            "selfplay/meta_support": float((mixture > 1e-3).sum()),
            "selfplay/meta_max_weight": float(mixture.max()),
            "selfplay/meta_opponent_weight": float(mixture[self.pool.current]),
            "selfplay/meta_gap": self.pool.meta_gap,
        }

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        # With async workers the opponent's memory stays in the workers (AsyncGameSampler).
        async_workers = isinstance(self.sampler, AsyncGameSampler)
        memory = None if async_workers else self.sampler.opponent_states.get(self.current_opponent)
        state["selfplay"] = {
            "pool": self.pool.state_dict(),
            "last_snapshot": self.last_snapshot,
            "last_swap": self.last_swap,
            "meta_rounds": self.meta_rounds,
            "meta_steps": 0 if self.meta_game is None else self.meta_game.steps,
            # A network's memory; other players' states (a scripted player's rows) are rebuilt.
            "opponent_memory": memory if isinstance(memory, torch.Tensor) else None,
            # mode=nfsp: per row, whether its opponent plays this episode as the best response.
            "nfsp_draws": torch.from_numpy(memory.copy())
            if isinstance(memory, np.ndarray) and self.nfsp is not None
            else None,
            # The last iterate, when the network holds the average (a finished run's).
            "learner": self.learner_params,
        }
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        saved = state["selfplay"]
        self.pool.load_state_dict(saved["pool"])
        self.last_snapshot = int(saved["last_snapshot"])
        self.last_swap = int(saved["last_swap"])
        self.meta_rounds = int(saved.get("meta_rounds", 0))
        if self.meta_game is not None:
            self.meta_game.steps = int(saved.get("meta_steps", 0))
        learner = saved.get("learner")
        if learner is not None:  # the checkpoint's network is the average: train the learner
            self.ctx.net.load_state_dict(learner)
        self.learner_params = None
        if self.pool.snapshots:
            self.opponent.net.load_state_dict(self.pool.snapshots[self.pool.current])
        # Like the learner's memory, used once the environments are back where they were.
        self.saved_opponent_memory = saved.get("opponent_memory")
        self.saved_nfsp_draws = saved.get("nfsp_draws")

    def restore_environments(self, obs: VecObs) -> None:
        super().restore_environments(obs)
        if self.saved_opponent_memory is not None:
            self.sampler.opponent_states.set(self.current_opponent, self.saved_opponent_memory)
        if self.saved_nfsp_draws is not None:
            self.sampler.opponent_states.set(
                self.current_opponent, self.saved_nfsp_draws.numpy().copy()
            )
