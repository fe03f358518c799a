"""A warning when training looks stuck, naming what to try.

:class:`StuckDetector` is a :class:`~entityrl.training.callbacks.Callback` the runner adds to
every run that learns from the environment's episodes (on- and off-policy algorithms). It
reads each iteration's metrics and warns, once per sign, when

* no episode has finished after ``stuck.no_episode_updates`` updates (nothing to learn from
  yet: episodes longer than the rollouts of many environments);
* the value function's explained variance stayed below ``stuck.explained_variance_below`` for
  ``stuck.explained_variance_updates`` updates in a row while the episodes' return is no
  higher than at first (it predicts nothing of the returns, often because they are far
  larger than 1; tasks whose returns are pure chance, such as a one-step bandit, learn with a
  value function that explains nothing, so a rising return silences this sign);
* the policy's entropy (when it starts positive: a categorical policy's) fell below
  ``stuck.entropy_fraction`` of its first update's within the first ``stuck.entropy_within``
  of the run while the episodes' return is no higher than at first (it stopped exploring
  early, before it found anything better).
* after ``stuck.horizon_updates`` updates, nearly all episodes (90%) were cut off by a time
  limit after fewer than half the steps the discount looks ahead (``1 / (1 - gamma)``) and
  the return has fallen: the values bootstrapped at the cut-off are still far from their
  level, so states near it look better than they are (docs/troubleshooting.md, section 4).

Each warning is a :class:`StuckTrainingWarning` (Python's ``warnings``: printed to stderr
above the progress output, or turned into an error with ``-W error::...``) and a
``warning/<sign>`` record of 1 in the run's log. Setting a count or fraction to 0 turns its
sign off.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

from entityrl.env.vec_env import CUT_OFF_METRIC
from entityrl.training.callbacks import Callback

if TYPE_CHECKING:
    from entityrl.training.runner import Trainer

TROUBLESHOOTING = "docs/troubleshooting.md"
CUT_OFF_KEY = f"episode/{CUT_OFF_METRIC}"


class StuckTrainingWarning(UserWarning):
    """Training shows a sign that it is not learning (see :mod:`entityrl.training.stuck`)."""


@dataclass
class StuckConfig:
    """When to warn that training looks stuck (each sign once per run; 0 turns it off)."""

    no_episode_updates: int = 30
    """Warn when no episode has finished after this many updates."""
    explained_variance_updates: int = 50
    """Warn when the value function's explained variance stays below
    explained_variance_below for this many updates in a row."""
    explained_variance_below: float = 0.05
    """The explained variance under which the value function counts as predicting nothing."""
    entropy_fraction: float = 0.05
    """Warn when the policy's entropy falls below this fraction of its first update's..."""
    entropy_within: float = 0.25
    """... within this share of the run's steps."""
    horizon_updates: int = 10
    """Warn, from this many updates on, when nearly all episodes are cut off by a time limit
    far sooner than the discount looks ahead and the return has fallen."""

    def __post_init__(self) -> None:
        for name in ("no_episode_updates", "explained_variance_updates", "horizon_updates"):
            if getattr(self, name) < 0:
                raise ValueError(f"stuck.{name} must be >= 0 (0: off), got {getattr(self, name)}")
        for name in ("entropy_fraction", "entropy_within"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(
                    f"stuck.{name} must be between 0 and 1 (0: off), got {getattr(self, name)}"
                )


CUT_OFF_SHARE = 0.9
"""The share of episodes cut off by a time limit from which the horizon sign may fire."""
FALL = 0.05
"""How far (a share of its size) the return must fall below its first value to count."""


class StuckDetector(Callback):
    """Warns once per sign that training of ``budget`` steps looks stuck (see the module);
    ``discount``: the gamma the algorithm learns with (None: no horizon sign)."""

    def __init__(self, config: StuckConfig, budget: int, discount: float | None = None) -> None:
        self.config = config
        self.budget = budget
        self.discount = discount
        # Episodes that reported whether a time limit cut them off: their count, how many
        # were, and the sum of their lengths.
        self.timed_episodes = 0.0
        self.cut_off = 0.0
        self.timed_steps = 0.0
        self.updates = 0
        self.episodes = 0.0
        self.low_variance_updates = 0
        self.first_entropy: float | None = None
        self.first_return: float | None = None
        self.last_return: float | None = None
        self.warned: set[str] = set()

    def on_iteration(self, trainer: Trainer, metrics: dict[str, float]) -> None:
        for sign, message in self.check(trainer.step, metrics).items():
            warnings.warn(StuckTrainingWarning(message), stacklevel=2)
            if trainer.log is not None:
                trainer.log.log(trainer.step, {f"warning/{sign}": 1.0})

    def check(self, step: int, metrics: dict[str, float]) -> dict[str, str]:
        """Account one iteration (at ``step``, with its ``metrics``); the signs seen for the
        first time, each with its message."""
        cfg = self.config
        self.updates += 1
        self.episodes += metrics.get("episodes", 0.0)
        signs: dict[str, str] = {}
        if cfg.no_episode_updates and self.updates >= cfg.no_episode_updates and not self.episodes:
            signs["no_episode"] = (
                f"no episode has finished after {self.updates} updates ({step:,} steps), so "
                "nothing has been learned about how episodes end. Try longer rollouts with "
                "fewer environments (rollout.steps, rollout.num_envs) or a time limit on the "
                "episodes"
            )
        episode_return = metrics.get("episode/episode_return")
        if episode_return is not None:
            self.last_return = episode_return
            if self.first_return is None:
                self.first_return = episode_return
        variance = metrics.get("loss/explained_variance")
        if variance is not None:
            low = variance < cfg.explained_variance_below
            self.low_variance_updates = self.low_variance_updates + 1 if low else 0
            if (
                cfg.explained_variance_updates
                and self.low_variance_updates >= cfg.explained_variance_updates
                and not self.return_rose()
            ):
                signs["explained_variance"] = (
                    "the value function's explained variance stayed below "
                    f"{cfg.explained_variance_below} for {self.low_variance_updates} updates: it "
                    "predicts nothing of the returns. Try longer rollouts (rollout.steps), "
                    "a lower optim.lr, or ppo.norm_reward=true if you turned reward scaling off"
                )
        entropy = metrics.get("loss/entropy")
        if entropy is not None:
            if self.first_entropy is None:
                self.first_entropy = entropy
            early = step <= cfg.entropy_within * self.budget
            collapsed = entropy < cfg.entropy_fraction * self.first_entropy
            # Only an entropy that starts positive can collapse towards 0: a Gaussian
            # policy's (differential) entropy has no floor and is often negative from the start.
            positive = self.first_entropy > 0
            if early and collapsed and positive and self.returns_seen() and not self.return_rose():
                signs["entropy"] = (
                    f"the policy's entropy fell to {entropy:.3g} from {self.first_entropy:.3g} "
                    f"within the first {step:,} of {self.budget:,} steps while the episode "
                    f"return did not rise ({self.first_return:.3g} at first, now "
                    f"{self.last_return:.3g}): it stopped exploring early. Try a larger "
                    "ppo.ent_coef or a lower optim.lr"
                )
        horizon = self.horizon_sign(metrics)
        if horizon is not None:
            signs["horizon"] = horizon
        fresh = {sign: message for sign, message in signs.items() if sign not in self.warned}
        self.warned.update(fresh)
        return {
            sign: f"training looks stuck: {message} (see {TROUBLESHOOTING})"
            for sign, message in fresh.items()
        }

    def horizon_sign(self, metrics: dict[str, float]) -> str | None:
        """Account the iteration's cut-off episodes; the horizon sign's message, if it shows."""
        cut, length = metrics.get(CUT_OFF_KEY), metrics.get("episode/episode_length")
        if cut is not None and length is not None:
            count = metrics.get("episodes", 0.0)
            self.timed_episodes += count
            self.cut_off += cut * count
            self.timed_steps += length * count
        if not (
            self.config.horizon_updates
            and self.discount is not None
            and self.discount < 1
            and self.updates >= self.config.horizon_updates
            and self.timed_episodes
            and self.returns_seen()
        ):
            return None
        share, steps = self.cut_off / self.timed_episodes, self.timed_steps / self.timed_episodes
        ahead = 1 / (1 - self.discount)
        first, last = self.first_return, self.last_return
        fell = last < first - FALL * abs(first)  # type: ignore[operator]
        if share < CUT_OFF_SHARE or ahead <= 2 * steps or not fell:
            return None
        shorter = min(max(0.5, 1 - 5 / steps), self.discount)
        return (
            f"{share:.0%} of the episodes were cut off by a time limit, after {steps:.0f} steps "
            f"on average, while gamma={self.discount:g} looks about {ahead:.0f} steps ahead, "
            f"and the return fell ({first:.3g} at first, now {last:.3g}): the values "
            "bootstrapped at the cut-off are still far from their level, so states near it "
            f"look better than they are. Try a horizon of a fraction of the episodes' length, e.g. "
            f"ppo.gamma={shorter:.2f}"
        )

    def returns_seen(self) -> bool:
        """Whether finished episodes have reported a return yet."""
        return self.first_return is not None and self.last_return is not None

    def return_rose(self) -> bool:
        """Whether the episodes' return is higher now than at first (a run that improves is
        not stuck, whatever its value function or entropy say)."""
        return self.returns_seen() and self.last_return > self.first_return  # type: ignore[operator]


__all__ = ["StuckConfig", "StuckDetector", "StuckTrainingWarning"]
