"""The three reward modes of the survival world.

- ``dense``: a little for every step alive, the share of a meter refilled by consuming, and a
  bonus for each useful event (attack, kill, collect, pickup, synthesize, equip); a penalty at
  death. Weights: ``rewards.dense``.
- ``sparse``: only for consuming the items listed in ``rewards.sparse`` (meat and water); with
  ``rewards.sparse_when_full: false`` only when the meal refilled some meter.
- ``very_sparse``: only ``rewards.very_sparse`` (negative) when the agent dies. Reaching the
  horizon alive is not penalized.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from entityrl.envs.survival.dynamics import StepOutcome
from entityrl.envs.survival.rules import Rules

REWARD_MODES = ("dense", "sparse", "very_sparse")


class Rewarder:
    """Turns what happened in a step into each copy's reward."""

    def __init__(self, rules: Rules, mode: str) -> None:
        if mode not in REWARD_MODES:
            raise ValueError(
                f"{rules.config.name}: unknown reward {mode!r}; expected one of "
                f"{', '.join(REWARD_MODES)}"
            )
        self.mode = mode
        cfg = rules.config.rewards
        dense = cfg.dense
        kinds = [name.partition(":")[0] for name in rules.event_names]
        # One extra entry at the end so that "no event" (-1) indexes a zero.
        self.event_reward = np.zeros(len(kinds) + 1, dtype=np.float64)
        if mode == "dense":
            self.event_reward[:-1] = [
                getattr(dense, k, 0.0) if k != "consume" else 0.0 for k in kinds
            ]
        elif mode == "sparse":
            for item, value in cfg.sparse.items():
                event = rules.event_index.get(f"consume:{item}")
                if event is not None:
                    self.event_reward[event] = value
        self.gain_weight = np.where(rules.meters_used, dense.meter_gain / rules.meter_max, 0.0)
        self.alive = dense.alive
        self.pay_when_full = mode != "sparse" or cfg.sparse_when_full
        self.death = (
            dense.death if mode == "dense" else cfg.very_sparse if mode == "very_sparse" else 0.0
        )

    def __call__(self, outcome: StepOutcome) -> npt.NDArray[np.float32]:
        reward = self.event_reward[outcome.events] + self.death * outcome.died
        if not self.pay_when_full:
            reward = np.where(outcome.gained.sum(axis=1) > 0, reward, 0.0)
        if self.mode == "dense":
            reward += outcome.gained @ self.gain_weight + self.alive * ~outcome.died
        return reward.astype(np.float32)
