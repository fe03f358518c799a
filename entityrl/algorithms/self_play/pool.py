"""Self-play's settings and its pool of opponents: frozen snapshots of the learner, rated by Elo.

Two modes (``selfplay.mode``): ``pool``, the learner against snapshots of itself, and
``magnet``, the learner in every seat with magnetic mirror descent
(:mod:`entityrl.algorithms.self_play.magnet`; its knobs ``magnet_coef`` and ``magnet_rate``).
The pool's knobs are ML-Agents' (``selfplay`` in the config): a snapshot of the learner every
``snapshot_every`` steps joins a pool of the latest ``window``; every ``swap_every`` steps the
opponent changes, to the latest snapshot with probability ``play_latest``, else to one drawn
uniformly from the pool. Each snapshot keeps the Elo rating the learner had when it was taken,
and games between the learner and a snapshot update both ratings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from entityrl.training.elo import update as elo_update

INITIAL_ELO = 1200.0
MODES = ("pool", "magnet")


@dataclass
class SelfPlayConfig:
    """Self-play (algo=selfplay): the learner against snapshots of itself, or against itself
    with magnetic mirror descent."""

    mode: str = "pool"
    """``pool``: the learner in one seat of each game, snapshots of it in the others (the
    knobs below; for games won or lost). ``magnet``: the learner in every seat, pulled towards
    a slowly moving copy of itself (``magnet_coef``, ``magnet_rate``): its policy converges to
    an equilibrium of a two-player zero-sum game, mixed ones included."""
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
        if self.elo_k <= 0:
            raise ValueError(f"selfplay.elo_k must be > 0, got {self.elo_k}")


class OpponentPool:
    """The learner's snapshots and the Elo ratings of the learner and of each snapshot."""

    def __init__(self, config: SelfPlayConfig) -> None:
        self.config = config
        self.snapshots: list[dict[str, torch.Tensor]] = []
        self.ratings: list[float] = []
        self.learner_elo = INITIAL_ELO
        self.current = -1  # index of the opponent being played

    def add(self, params: dict[str, torch.Tensor]) -> None:
        """Add a snapshot (rated as the learner now is); the oldest beyond the window leave."""
        self.snapshots.append({k: v.detach().clone() for k, v in params.items()})
        self.ratings.append(self.learner_elo)
        excess = len(self.snapshots) - self.config.window
        if excess > 0:
            del self.snapshots[:excess]
            del self.ratings[:excess]
            self.current = max(self.current - excess, 0)

    def fixed(self) -> None:
        """One opponent that never changes (rated as the learner starts)."""
        self.ratings = [INITIAL_ELO]
        self.current = 0

    def choose(self, rng: np.random.Generator) -> int:
        """Pick the next opponent (the latest with probability play_latest)."""
        latest = len(self.snapshots) - 1
        if rng.random() < self.config.play_latest:
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
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.snapshots = state["snapshots"]
        self.ratings = list(state["ratings"])
        self.learner_elo = float(state["learner_elo"])
        self.current = int(state["current"])
