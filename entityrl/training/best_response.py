"""An approximate best response: how exploitable a trained agent is in a two-player zero-sum (or
constant-sum) game too large, or too foreign, for an exact best response.

For each seat a **fresh learner** (the agent's own config, network included, unless
overridden) trains against the **frozen agent** in the other seat (``algo=selfplay
selfplay.opponent=<the agent's checkpoint> selfplay.learner_players=[<seat>]``) for ``steps``
environment steps. Then the trained responder plays that seat against the frozen agent over
``games`` games, taking its most probable action everywhere (a best response may be pure, and
a partly trained policy's most probable actions come closer to it than its samples: on Kuhn
poker against uniform play, NashConv/2 0.459 against 0.332 after 5,000 steps, seed 3, 4,000
games, the exact value being 0.458), and the frozen agent, sampling its actions as it does
throughout, plays itself over ``games`` games. With ``v_s(x, y)`` seat ``s``'s expected return
when ``x`` plays it and ``y`` the other:

- seat ``s``'s gain is ``v_s(BR_s, pi) - v_s(pi, pi)``;
- NashConv is the sum of the gains, ``sum_s v_s(BR_s, pi) - c``, where ``c`` is what the two
  returns of every game add up to (0 in a zero-sum game: ``v_0(pi, pi) + v_1(pi, pi) = c``
  exactly), so its interval comes from the responders' games alone;
- NashConv/2 is OpenSpiel's "exploitability".

The intervals are normal ones from the games' standard errors (1.96 of them, 95%). The
responder is a learned policy, at most a best response, so the estimate is a **lower bound**
of the true value, up to the sampling noise; a larger ``steps`` budget tightens it. A game
whose two returns do not add up to the same total in every game of the agent against itself is
refused (not zero- or constant-sum), as is a game of other than two players.
"""

from __future__ import annotations

import copy
import math
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from entityrl.algorithms.self_play.pool import SelfPlayConfig
from entityrl.env.multiplayer_vec import MultiPlayerVecEnv
from entityrl.training.agent import DEFAULT_MAX_EPISODE_STEPS, Agent, load_agent, make_eval_env
from entityrl.training.config import TrainConfig
from entityrl.training.match import GameResult, play_games
from entityrl.training.players import NetworkPlayer
from entityrl.training.run_dir import RUN_FILES

Z_95 = 1.959963984540054
"""The standard normal quantile of a two-sided 95% interval."""

CONSTANT_SUM_TOLERANCE = 1e-6
"""How far the two returns of a game may add up apart from game to game in a constant-sum
game (float rounding of the rewards)."""


@dataclass(frozen=True)
class Estimate:
    """A mean over games with its standard error."""

    mean: float
    stderr: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Estimate:
        data = np.asarray(values, dtype=np.float64)
        spread = float(data.std(ddof=1)) if data.size > 1 else 0.0
        return cls(float(data.mean()), spread / math.sqrt(data.size))

    def interval(self) -> tuple[float, float]:
        """The 95% normal interval, (low, high)."""
        return self.mean - Z_95 * self.stderr, self.mean + Z_95 * self.stderr


@dataclass(frozen=True)
class SeatResponse:
    """One seat's learned response: ``response`` is the seat's mean return with the responder
    in it against the frozen agent, ``agent`` with the agent in it against itself."""

    player: str
    steps: int
    """Environment steps the responder trained for."""
    seconds: float
    """Its training's wall time."""
    response: Estimate
    agent: Estimate

    @property
    def gain(self) -> Estimate:
        """What the responder gains over the agent in this seat (>= 0 for a best response)."""
        return Estimate(
            self.response.mean - self.agent.mean,
            math.hypot(self.response.stderr, self.agent.stderr),
        )


@dataclass(frozen=True)
class ApproximateNashConv:
    """Both seats' learned responses and the NashConv they imply, a lower bound of the true
    one up to sampling noise."""

    seats: list[SeatResponse]
    constant_sum: float
    """What the two seats' returns add up to in every game (0 in a zero-sum game)."""
    games: int
    """Games per match."""

    @property
    def nash_conv(self) -> Estimate:
        """The sum of the seats' gains: their responses' returns less the constant sum."""
        total = sum(seat.response.mean for seat in self.seats) - self.constant_sum
        return Estimate(total, math.sqrt(sum(seat.response.stderr**2 for seat in self.seats)))

    @property
    def half(self) -> Estimate:
        """NashConv / 2, OpenSpiel's "exploitability"."""
        total = self.nash_conv
        return Estimate(total.mean / 2, total.stderr / 2)

    def summary(self) -> str:
        """Per seat gains and NashConv, with 95% intervals, in lines."""
        lines = [
            f"as {seat.player!r}: the responder ({seat.steps:,} steps, {seat.seconds:.0f} s) "
            f"returns {seat.response.mean:+.4f}, the agent against itself "
            f"{seat.agent.mean:+.4f}: gain {_with_interval(seat.gain)}"
            for seat in self.seats
        ]
        lines.append(
            f"approximate NashConv {_with_interval(self.nash_conv)}; NashConv/2 "
            f"{_with_interval(self.half)} (95% intervals over {self.games:,} games per match; "
            "a learned response is at most a best response, so this is a lower bound of the "
            "true value up to that noise)"
        )
        return "\n".join(lines)


def _with_interval(estimate: Estimate) -> str:
    low, high = estimate.interval()
    return f"{estimate.mean:.4f} (95% interval {low:.4f} to {high:.4f})"


def response_config(
    agent: Agent,
    player: str,
    steps: int,
    seed: int,
    run_dir: Path,
    *,
    device: str | None = None,
    progress: bool = False,
) -> TrainConfig:
    """The config of a fresh learner in seat ``player`` against the frozen ``agent``: the
    agent's own (environment, network, PPO settings) with self-play against the agent's
    checkpoint, for ``steps`` steps, written to ``run_dir``."""
    assert agent.config is not None and agent.path is not None, "a loaded agent"
    config = copy.deepcopy(agent.config)
    config.algo = "selfplay"
    config.selfplay = SelfPlayConfig(opponent=str(agent.path), learner_players=[player])
    config.total_timesteps = steps
    config.seed = seed
    config.init_from = None
    config.world_size = 1
    config.target_return = None
    config.eval.interval = 0
    config.log.run_dir = str(run_dir)
    config.log.tensorboard = False
    config.log.wandb_project = None
    config.log.progress = progress
    # A best response may well be a pure strategy: its entropy falling is no sign of trouble.
    config.stuck.entropy_fraction = 0.0
    if device is not None:
        config.device = device
    return config


def approximate_nash_conv(
    agent: Agent | str | Path,
    steps: int,
    games: int = 2000,
    *,
    seed: int = 0,
    overrides: Sequence[str] = (),
    work_dir: str | Path | None = None,
    num_envs: int = 64,
    train_device: str | None = None,
    progress: bool = False,
    report: Callable[[str], None] | None = None,
    max_steps: int = DEFAULT_MAX_EPISODE_STEPS,
    greedy: bool = True,
) -> ApproximateNashConv:
    """The approximate NashConv of a trained agent (an :class:`Agent` loaded from its
    checkpoint, or its run directory or checkpoint) in its two-player zero- or constant-sum
    game: a fresh learner trained ``steps`` steps against it in each seat, and matches of
    ``games`` games (``num_envs`` at a time; see the module's description).

    ``overrides`` change the responders' config (``ppo.ent_coef=0.01``, ``net.d_model=64``);
    ``work_dir`` keeps their run directories (``response_<player>``), a temporary directory
    (removed) by default; ``train_device`` is where they train (the agent's config's by default);
    ``progress`` shows the trainer's progress bar; ``report`` is told, a line at a time, which
    seat is training; ``greedy``: the responders play their most probable actions (else
    sampled ones). Raises ValueError naming what was expected and what came.
    """
    if steps < 1:
        raise ValueError(f"approximate best response: steps must be >= 1, got {steps}")
    if games < 2:
        raise ValueError(
            f"approximate best response: games must be >= 2 (an interval needs two), got {games}"
        )
    if isinstance(agent, str | Path):
        agent = load_agent(agent, seed=seed)
    if agent.config is None or agent.path is None:
        raise ValueError(
            "approximate best response: expected a trained agent loaded from its checkpoint "
            "(load_agent, or a run directory), got an agent without a config or checkpoint "
            "path; the responders play against the checkpoint"
        )
    name = agent.config.env.id
    env = make_eval_env(agent, min(num_envs, games), seed)
    with env:
        if not isinstance(env, MultiPlayerVecEnv) or len(env.players) != 2:
            count = len(env.players) if isinstance(env, MultiPlayerVecEnv) else 1
            raise ValueError(
                f"approximate best response: expected a two-player zero-sum game, got {name} "
                f"with {count} player{'s' if count != 1 else ''}"
            )
        with tempfile.TemporaryDirectory(prefix="entityrl-br-") as scratch:
            responses = _Responses(
                agent, env, steps, games, seed, Path(work_dir or scratch), overrides,
                train_device, progress, report, max_steps, greedy,
            )  # fmt: skip
            responses.check_free()
            device = agent.net.device
            itself = play_games(
                NetworkPlayer(agent.net, _generator(seed, device)),
                NetworkPlayer(agent.net, _generator(seed + 1, device)),
                env,
                games,
                [0],
                max_steps,
            )
            constant_sum = _constant_sum(itself, name)
            values = [
                Estimate.of([r.payoff for r in itself]),
                Estimate.of([r.opponent_payoff for r in itself]),
            ]
            seats = [responses.respond(seat, values[seat]) for seat in range(2)]
    return ApproximateNashConv(seats, constant_sum, games)


@dataclass
class _Responses:
    """What every seat's response shares: the frozen agent, its game and the budgets."""

    agent: Agent
    env: MultiPlayerVecEnv
    steps: int
    games: int
    seed: int
    root: Path
    overrides: Sequence[str]
    device: str | None
    progress: bool
    report: Callable[[str], None] | None
    max_steps: int
    greedy: bool

    def run_dir(self, seat: int) -> Path:
        return self.root / f"response_{self.env.players[seat]}"

    def check_free(self) -> None:
        """Refuse, before any training, a work directory that holds responses already."""
        for seat in range(2):
            found = [name for name in RUN_FILES if (self.run_dir(seat) / name).exists()]
            if found:
                raise ValueError(
                    f"approximate best response: expected a new directory for the responses, "
                    f"got {self.run_dir(seat)} holding a run already ({', '.join(found)}); "
                    "choose another work directory (--br-dir) or remove it"
                )

    def respond(self, seat: int, agent_value: Estimate) -> SeatResponse:
        """Train a fresh learner in ``seat`` against the frozen agent and play it there."""
        from entityrl.training.runner import train

        agent, player = self.agent, self.env.players[seat]
        if self.report is not None:
            self.report(
                f"training a best response as {player!r} against {agent.path} for "
                f"{self.steps:,} steps"
            )
        config = response_config(
            agent, player, self.steps, self.seed + 1 + seat, self.run_dir(seat),
            device=self.device, progress=self.progress,
        )  # fmt: skip
        started = time.perf_counter()
        result = train(config=config, overrides=self.overrides)
        seconds = time.perf_counter() - started
        if result.interrupted:  # Ctrl-C: the trainer stopped early; so does the estimate
            raise KeyboardInterrupt
        device = agent.net.device
        responder = load_agent(result.checkpoint, device=str(device))
        played = play_games(
            NetworkPlayer(
                responder.net, _generator(self.seed + 2 + seat, device), deterministic=self.greedy
            ),
            NetworkPlayer(agent.net, _generator(self.seed + 4 + seat, device)),
            self.env,
            self.games,
            [seat],
            self.max_steps,
        )
        _constant_sum(played, config.env.id)
        return SeatResponse(
            player, result.steps, seconds, Estimate.of([r.payoff for r in played]), agent_value
        )


def _constant_sum(results: list[GameResult], name: str) -> float:
    """What the two returns of every game add up to; a ValueError if they add up differently
    from game to game (a game that is not zero- or constant-sum)."""
    sums = np.array([r.payoff + r.opponent_payoff for r in results])
    low, high = float(sums.min()), float(sums.max())
    if high - low > CONSTANT_SUM_TOLERANCE * max(1.0, abs(low), abs(high)):
        raise ValueError(
            f"approximate best response: expected a two-player zero-sum (or constant-sum) game, "
            f"got {name} whose two returns add up to between {low:.4g} and {high:.4g} from game "
            "to game"
        )
    return float(sums.mean())


def _generator(seed: int, device: torch.device) -> torch.Generator:
    generator = torch.Generator(device)
    generator.manual_seed(seed)
    return generator
