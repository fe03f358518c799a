"""Behaviour cloning: fit the policy to recorded actions by maximum likelihood.

The loss of a minibatch is the negative log-likelihood of every recorded action under the
recorded masks, averaged over all actors of all action types (categorical, global and
select-entity alike: each actor's choice is one sample). The network scores the recorded
actions exactly as PPO's update does (:meth:`~entityrl.nn.RogueNet.evaluate`), so masked
choices get probability zero and never enter the loss.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from entityrl.algo.ppo import require_positive
from entityrl.nn.rogue_net import PolicyOutput


@dataclass
class BCConfig:
    """Behaviour cloning from recordings (algo=bc)."""

    demos: list[str] = field(default_factory=list)
    """Recordings to learn from (entityrl.recording files of the config's environment)."""
    epochs: int = 100
    """Passes over the training episodes at most."""
    val_fraction: float = 0.1
    """Share of the episodes held out to measure the validation loss (at least one)."""
    patience: int = 5
    """Stop after this many epochs without a better validation loss; the best epoch's weights
    are kept."""
    max_episodes: int | None = None
    """Use at most this many episodes of the recordings (the first ones; null: all)."""
    eval_episodes: int = 32
    """Episodes played in the environment after every epoch to log the policy's return
    (0: none)."""
    eval_envs: int = 16
    """Environments played side by side for those episodes."""

    def __post_init__(self) -> None:
        require_positive("bc", epochs=self.epochs, patience=self.patience, eval_envs=self.eval_envs)
        if not 0 < self.val_fraction < 1:
            raise ValueError(f"bc.val_fraction must be in (0, 1), got {self.val_fraction}")
        if self.max_episodes is not None:
            require_positive("bc", max_episodes=self.max_episodes)
        if self.eval_episodes < 0:
            raise ValueError(f"bc.eval_episodes must be >= 0, got {self.eval_episodes}")


@dataclass
class BCTerms:
    """A minibatch's negative log-likelihood: summed over its actors (``total``, with
    gradients) and per action type (plain floats, for the log), and the actor counts."""

    total: torch.Tensor
    per_action: dict[str, float]
    actors: dict[str, int]


def bc_terms(out: PolicyOutput) -> BCTerms:
    """Negative log-likelihood of the actions ``out`` scored (see :meth:`RogueNet.evaluate`),
    summed over actors; divide by the number of actors for the mean."""
    total = out.values.new_zeros(())
    per_action: dict[str, torch.Tensor] = {}
    actors: dict[str, int] = {}
    for name, head in out.heads.items():
        nll = -head.logprob.sum()
        total = total + nll
        per_action[name] = nll.detach()
        actors[name] = head.logprob.numel()
    # One transfer from the device for all the statistics.
    sums = torch.stack(list(per_action.values())).tolist() if per_action else []
    return BCTerms(total, dict(zip(per_action, sums, strict=True)), actors)
