"""Self-play's settings and its pool of opponents: frozen snapshots of the learner, rated by Elo.

Three modes (``selfplay.mode``): ``pool``, the learner against snapshots of itself,
``magnet``, the learner in every seat with magnetic mirror descent
(:mod:`entityrl.algorithms.self_play.magnet`; its knobs ``magnet_coef`` and ``magnet_rate``), and
``nfsp``, the learner against an average of its own play, fitted by supervised learning
(:mod:`entityrl.algorithms.self_play.nfsp`; its knobs ``nfsp_*``).
The pool's knobs are ML-Agents' (``selfplay`` in the config): a snapshot of the learner every
``snapshot_every`` steps joins a pool of the latest ``window``; every ``swap_every`` steps the
opponent changes, to the latest snapshot with probability ``play_latest``, else to one drawn
uniformly from the pool. With ``opponent_mix=nash`` the pool instead keeps a meta-game: every new
snapshot plays ``meta_games`` games against each snapshot it joins, their mean margins fill a
matrix of payoffs, and the opponent is drawn from that matrix game's Nash mixture
(:mod:`entityrl.algorithms.self_play.meta_nash`). Each snapshot keeps the Elo rating the learner had when it was taken,
and games between the learner and a snapshot update both ratings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from entityrl.algorithms.self_play.meta_nash import zero_sum_nash
from entityrl.training.elo import update as elo_update

INITIAL_ELO = 1200.0
MODES = ("pool", "magnet", "nfsp")
OPPONENT_MIXES = ("uniform", "nash")
META_TOLERANCE = 1e-6
"""The meta-game's Nash mixture is solved to this duality gap (times its largest payoff)."""


@dataclass
class SelfPlayConfig:
    """Self-play (algo=selfplay): the learner against snapshots of itself, or against itself
    with magnetic mirror descent."""

    mode: str = "pool"
    """``pool``: the learner in one seat of each game, snapshots of it in the others (the
    knobs below; for games won or lost). ``magnet``: the learner in every seat, pulled towards
    a slowly moving copy of itself (``magnet_coef``, ``magnet_rate``): its policy converges to
    an equilibrium of a two-player zero-sum game, mixed ones included. ``nfsp``: neural
    fictitious self-play, the learner (a best response) in one seat of each game against an
    average policy fitted to its past actions (``nfsp_*``), which is the run's agent at the end.
    """
    magnet_coef: float = 0.5
    """mode=magnet: the weight of KL(policy || magnet), a penalty on the reward per step."""
    magnet_rate: float = 0.2
    """mode=magnet: the fraction of the way the magnet's parameters move to the policy's after
    every update."""
    average_rate: float = 0.0
    """Above 0: keep a Polyak average of the learner's parameters, moved this fraction of the
    way to them after every update, and make it the run's agent at the end (the checkpoint's
    ``model``, what ``load_agent``, ``entityrl eval`` and export use; the last iterate stays in
    the checkpoint for resuming). 0: no average, the agent is the last iterate."""
    nfsp_eta: float = 0.1
    """mode=nfsp: the anticipatory parameter, the probability that an opponent plays an
    episode with the learner's policy (the best response) rather than the average policy."""
    nfsp_reservoir: int = 200_000
    """mode=nfsp: the learner's decisions kept (a uniform sample of all of them) for the
    average policy to fit."""
    nfsp_lr: float = 0.001
    """mode=nfsp: the average policy's learning rate (constant)."""
    nfsp_batches: int = 4
    """mode=nfsp: cross-entropy steps of the average policy after every update."""
    nfsp_bs: int = 512
    """mode=nfsp: decisions per cross-entropy step."""
    nfsp_recency: float = 0.0
    """mode=nfsp: 0, the reservoir is a uniform sample of all the learner's decisions
    (fictitious play's average); ``p`` > 0, a sample weighted by each decision's age to the
    power ``p`` (1: linear averaging, weights growing with time as CFR+'s), so the average
    forgets the early, poorer best responses faster."""
    nfsp_polyak: float = 0.0
    """mode=nfsp, above 0: a Polyak average of the average policy's parameters, moved this
    fraction of the way to them after every fit, is the run's agent at the end instead of the
    fitted network (which the opponents still play): it filters out the fit's step-to-step
    noise. 0: off, the agent is the fitted network."""
    average_start: int = 0
    """average_rate > 0: steps before which the average just copies the parameters (it then
    averages only the iterates after this step)."""
    snapshot_every: int = 20_000
    """Steps between snapshots of the learner added to the pool."""
    window: int = 10
    """Snapshots kept in the pool (the latest ones)."""
    swap_every: int = 10_000
    """Steps between changes of opponent."""
    play_latest: float = 0.5
    """Probability that the new opponent is the latest snapshot (else uniform from the pool)."""
    opponent_mix: str = "uniform"
    """How the next opponent is drawn from the pool. ``uniform``: ML-Agents' (the latest with
    probability ``play_latest``, else uniformly). ``nash``: PSRO's (Lanctot et al. 2017): each
    new snapshot plays ``meta_games`` games against every snapshot in the pool (steps outside
    total_timesteps, logged as ``selfplay/meta_steps``), and the opponent is drawn from the Nash
    mixture of the zero-sum game of their mean margins, so snapshots that others beat are not
    played. For two-player games, the learner in every seat."""
    meta_games: int = 256
    """opponent_mix=nash: games each new snapshot plays against each snapshot in the pool
    (half of them in each seat of a two-player game)."""
    learner_players: list[str] = field(default_factory=list)
    """The players the learner may play (empty: any; a seat is drawn per game, so a symmetric
    game is learned from both sides). Name one side to learn an asymmetric role."""
    elo_k: float = 16.0
    """Elo's K factor: how far one game moves the ratings."""
    opponent: str = ""
    """Instead of snapshots, always play this opponent: ``random``, a scripted player
    ``module:function``, or a trained agent's run directory (its rating stays at the start's)."""

    def __post_init__(self) -> None:
        for name in ("snapshot_every", "window", "swap_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"selfplay.{name} must be >= 1, got {getattr(self, name)}")
        if not 0.0 <= self.play_latest <= 1.0:
            raise ValueError(f"selfplay.play_latest must be in [0, 1], got {self.play_latest}")
        if self.mode not in MODES:
            raise ValueError(f"selfplay.mode must be one of {list(MODES)}, got {self.mode!r}")
        if self.magnet_coef <= 0:
            raise ValueError(f"selfplay.magnet_coef must be > 0, got {self.magnet_coef}")
        if not 0.0 < self.magnet_rate < 1.0:
            raise ValueError(
                "selfplay.magnet_rate must be in (0, 1) (at 1 the magnet is the policy and "
                f"pulls nowhere), got {self.magnet_rate}"
            )
        if not 0.0 <= self.average_rate <= 1.0:
            raise ValueError(
                f"selfplay.average_rate must be in [0, 1] (0: off), got {self.average_rate}"
            )
        if self.average_start < 0:
            raise ValueError(f"selfplay.average_start must be >= 0, got {self.average_start}")
        if not 0.0 <= self.nfsp_eta <= 1.0:
            raise ValueError(f"selfplay.nfsp_eta must be in [0, 1], got {self.nfsp_eta}")
        for name in ("nfsp_reservoir", "nfsp_batches", "nfsp_bs"):
            if getattr(self, name) < 1:
                raise ValueError(f"selfplay.{name} must be >= 1, got {getattr(self, name)}")
        if self.nfsp_recency < 0:
            raise ValueError(
                f"selfplay.nfsp_recency must be >= 0 (0: uniform), got {self.nfsp_recency}"
            )
        if not 0.0 <= self.nfsp_polyak <= 1.0:
            raise ValueError(
                f"selfplay.nfsp_polyak must be in [0, 1] (0: off), got {self.nfsp_polyak}"
            )
        if self.nfsp_lr <= 0:
            raise ValueError(f"selfplay.nfsp_lr must be > 0, got {self.nfsp_lr}")
        if self.mode == "nfsp" and self.average_rate > 0:
            raise ValueError(
                "selfplay.mode=nfsp's agent is its average policy: a Polyak average "
                f"(selfplay.average_rate) would replace it; set 0, got {self.average_rate}"
            )
        if self.elo_k <= 0:
            raise ValueError(f"selfplay.elo_k must be > 0, got {self.elo_k}")
        if self.opponent_mix not in OPPONENT_MIXES:
            raise ValueError(
                f"selfplay.opponent_mix must be one of {list(OPPONENT_MIXES)}, got "
                f"{self.opponent_mix!r}"
            )
        if self.meta_games < 2:
            raise ValueError(f"selfplay.meta_games must be >= 2, got {self.meta_games}")
        if self.opponent_mix == "nash" and self.mode != "pool":
            raise ValueError(
                "selfplay.opponent_mix=nash draws opponents from the pool: it needs "
                f"selfplay.mode=pool, got {self.mode!r}"
            )
        if self.opponent_mix == "nash" and self.play_latest > 0:
            raise ValueError(
                "selfplay.opponent_mix=nash draws every opponent from the meta-game's Nash "
                f"mixture: set selfplay.play_latest=0, got {self.play_latest}"
            )


class OpponentPool:
    """The learner's snapshots and the Elo ratings of the learner and of each snapshot; with
    ``opponent_mix=nash``, their meta-game: ``payoffs[i, j]``, the mean margin (half the
    difference of the two sides' returns) of snapshot ``i`` against ``j``, and its Nash
    ``mixture``."""

    def __init__(self, config: SelfPlayConfig) -> None:
        self.config = config
        self.snapshots: list[dict[str, torch.Tensor]] = []
        self.ratings: list[float] = []
        self.learner_elo = INITIAL_ELO
        self.current = -1  # index of the opponent being played
        self.payoffs = np.zeros((0, 0))
        self.mixture = np.zeros(0)
        self.meta_gap = 0.0  # the duality gap the mixture was solved to

    @property
    def staying(self) -> int:
        """The index of the oldest snapshot that stays in the pool when one more joins."""
        return max(len(self.snapshots) + 1 - self.config.window, 0)

    def add(self, params: dict[str, torch.Tensor], margins: list[float] | None = None) -> None:
        """Add a snapshot (rated as the learner now is); the oldest beyond the window leave.
        With ``opponent_mix=nash``, ``margins`` are its mean margins against the snapshots
        that stay (those from :attr:`staying` on), and the meta-game is solved again."""
        nash = self.config.opponent_mix == "nash"
        stay = len(self.snapshots) - self.staying
        if nash and (margins is None or len(margins) != stay):
            raise ValueError(
                f"opponent_mix=nash: a new snapshot needs its margins against the {stay} "
                f"snapshots that stay, got {None if margins is None else len(margins)}"
            )
        self.snapshots.append({k: v.detach().clone() for k, v in params.items()})
        self.ratings.append(self.learner_elo)
        excess = len(self.snapshots) - self.config.window
        if excess > 0:
            del self.snapshots[:excess]
            del self.ratings[:excess]
            self.current = max(self.current - excess, 0)
        if nash:
            assert margins is not None
            kept = self.payoffs[excess:, excess:] if excess > 0 else self.payoffs
            row = np.asarray(margins, dtype=np.float64)
            self.payoffs = np.block([[kept, -row[:, None]], [row[None, :], np.zeros((1, 1))]])
            solved = zero_sum_nash(self.payoffs, META_TOLERANCE)
            # The column player's: the mixture the learner, in the rows, plays against.
            self.mixture, self.meta_gap = solved.column, solved.gap

    def fixed(self) -> None:
        """One opponent that never changes (rated as the learner starts)."""
        self.ratings = [INITIAL_ELO]
        self.current = 0

    def choose(self, rng: np.random.Generator) -> int:
        """Pick the next opponent (the latest with probability play_latest; with
        opponent_mix=nash, from the meta-game's Nash mixture)."""
        latest = len(self.snapshots) - 1
        if self.config.opponent_mix == "nash":
            self.current = int(rng.choice(len(self.snapshots), p=self.mixture))
        elif rng.random() < self.config.play_latest:
            self.current = latest
        else:
            self.current = int(rng.integers(len(self.snapshots)))
        return self.current

    def record(self, score: float) -> None:
        """A game of the learner against the current opponent (1 win, 0.5 draw, 0 loss)."""
        self.learner_elo, self.ratings[self.current] = elo_update(
            self.learner_elo, self.ratings[self.current], score, self.config.elo_k
        )

    def state_dict(self) -> dict[str, Any]:
        return {
            "snapshots": self.snapshots,
            "ratings": list(self.ratings),
            "learner_elo": self.learner_elo,
            "current": self.current,
            "payoffs": self.payoffs.tolist(),
            "mixture": self.mixture.tolist(),
            "meta_gap": self.meta_gap,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.snapshots = state["snapshots"]
        self.ratings = list(state["ratings"])
        self.learner_elo = float(state["learner_elo"])
        self.current = int(state["current"])
        # Checkpoints of runs before the meta-game have none.
        payoffs = np.array(state.get("payoffs", []), dtype=np.float64)
        self.payoffs = payoffs if payoffs.size else np.zeros((0, 0))
        self.mixture = np.array(state.get("mixture", []), dtype=np.float64)
        self.meta_gap = float(state.get("meta_gap", 0.0))
