"""Neural fictitious self-play's average policy (Heinrich & Silver 2016), for ``selfplay.mode=nfsp``.

Fictitious play plays a best response to the opponents' *average* strategy; in a two-player
zero-sum game that average converges to an equilibrium even where the best responses cycle
(the snapshot pool's trouble on Leduc poker). NFSP makes both halves neural: the learner (PPO
here, DQN in the paper) is the best response, and a second network, the average policy, is
fitted by supervised learning (cross-entropy) to the actions the best response took, kept in a
reservoir (every action ever taken has the same chance to be in it, so the fit is to the
average over all of training, not the recent past). The opponents play the average policy, or,
with the anticipatory probability ``eta``, the best response itself: drawn per episode, so the
learner best-responds to ``eta * best response + (1 - eta) * average``, which lets the average
track the best response's change (the paper's "anticipatory dynamics").

The average policy, not the best response, is what converges: it is the run's agent at the end.
With ``selfplay.nfsp_polyak`` the agent is a Polyak average of the fitted network's parameters
instead: the fit's stochastic steps move the fitted policy by more, from one update to the next,
than the reservoir's average moves (on Leduc poker its exploitability swung by 0.05-0.09 between
points 250k steps apart), and an average over many fits keeps the part they agree on.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from entityrl.algorithms.bc.loss import bc_step
from entityrl.algorithms.common.optimizer import OptimConfig, adam
from entityrl.algorithms.common.replay import _plain, _restore
from entityrl.algorithms.common.rollout import Rollout
from entityrl.algorithms.self_play.average import ParameterAverage
from entityrl.env.vec_obs import VecObs
from entityrl.nn.rogue_net import RogueNet
from entityrl.ragged import RaggedArray
from entityrl.training.players import Actions, NetworkPlayer, merge_actions


class Reservoir:
    """At most ``capacity`` (observation, actions) rows, a uniform sample of every row ever
    added (reservoir sampling, Vitter's algorithm R): the ``n``-th row added replaces a random
    one with probability ``capacity / n`` once the reservoir is full.

    With ``recency`` ``p`` > 0 that probability is ``(1 + p) * capacity / n`` (at most 1): the
    ``i``-th row of ``N`` offered is then still held with a probability proportional to
    ``(i / N) ** p``, so the sample is of every row weighted by its age to the power ``p`` (1:
    linear averaging, as CFR+ weighs its iterates), and early rows fade."""

    def __init__(self, capacity: int, choices: dict[str, int], recency: float = 0.0) -> None:
        self.capacity = capacity
        self.choices = choices  # each categorical action's size, to concatenate masks
        self.recency = recency
        self.seen = 0  # rows ever added
        self.obs: VecObs | None = None
        self.actions: Actions = {}

    def __len__(self) -> int:
        return 0 if self.obs is None else self.obs.num_rows

    def add(self, obs: VecObs, actions: Actions, rng: np.random.Generator) -> None:
        """Offer the rows of ``obs`` and ``actions`` (in order), drawing with ``rng``."""
        held, count = len(self), obs.num_rows
        fill = min(self.capacity - held, count)  # rows that go in while there is room
        # Row i of the batch is the (seen + i + 1)-th ever offered.
        offered = self.seen + np.arange(fill, count) + 1
        keep = (1 + self.recency) * self.capacity / offered
        kept = fill + np.flatnonzero(rng.random(count - fill) < keep)
        slots = rng.integers(self.capacity, size=kept.shape[0])
        self.seen += count
        if not fill and not kept.size:
            return
        # Positions in [stored rows..., this batch's rows...]; a later row offered to a slot
        # replaces an earlier one, so each slot takes its last row.
        index = np.concatenate([np.arange(held), held + np.arange(fill)])
        last = slots.shape[0] - 1 - np.unique(slots[::-1], return_index=True)[1]
        index[slots[last]] = held + kept[last]
        if self.obs is None:
            joined_obs, joined_actions = obs, actions
        else:
            joined_obs = VecObs.concat([self.obs, obs], self.choices)
            joined_actions = {
                name: RaggedArray.concat([a, actions[name]]) for name, a in self.actions.items()
            }
        self.obs = joined_obs.take(index)
        self.actions = {name: a.take(index) for name, a in joined_actions.items()}

    def sample(self, n: int, rng: np.random.Generator) -> tuple[VecObs, Actions]:
        """``n`` rows drawn uniformly with replacement."""
        if self.obs is None:
            raise ValueError("Reservoir.sample: the reservoir is empty")
        rows = rng.integers(len(self), size=n)
        return self.obs.take(rows), {name: a.take(rows) for name, a in self.actions.items()}

    def state_dict(self) -> dict[str, Any]:
        """Tensors and plain data (loadable with ``torch.load(weights_only=True)``)."""
        return {"seen": self.seen, "obs": _plain(self.obs), "actions": _plain(self.actions)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.seen = int(state["seen"])
        self.obs = _restore(state["obs"])
        self.actions = _restore(state["actions"]) or {}
        if len(self) > self.capacity:
            raise ValueError(
                f"the checkpoint's NFSP reservoir holds {len(self)} rows, more than this run's "
                f"selfplay.nfsp_reservoir ({self.capacity}): resume with the size it was "
                "trained with"
            )


class AveragePolicy:
    """The average policy's network, its optimizer (the run's settings, learning rate ``lr``,
    not annealed: the reservoir's average keeps moving) and its reservoir of the best
    response's actions; :meth:`learn` adds a rollout's and fits the network to the reservoir.
    With ``polyak`` > 0 a Polyak average of the network follows it after every fit, and that
    (:attr:`agent`) is the run's agent; the opponents play the fitted network either way."""

    def __init__(
        self,
        net: RogueNet,
        optim: OptimConfig,
        lr: float,
        choices: dict[str, int],
        capacity: int,
        batches: int,
        batch_size: int,
        polyak: float = 0.0,
        recency: float = 0.0,
    ) -> None:
        self.net = copy.deepcopy(net)
        self.optimizer = adam(self.net, dataclasses.replace(optim, lr=lr))
        self.reservoir = Reservoir(capacity, choices, recency)
        self.batches = batches
        self.batch_size = batch_size
        self.max_grad_norm = optim.max_grad_norm
        self.smoothed = ParameterAverage(net, polyak) if polyak > 0 else None
        self.smoothed_fits = 0  # fits the Polyak average has followed

    @property
    def agent(self) -> RogueNet:
        """The network that is the run's agent: the Polyak average, else the fitted one."""
        return self.net if self.smoothed is None else self.smoothed.net

    def reset(self, net: RogueNet) -> None:
        """Start from ``net``'s parameters (a run's start: the best response's initial policy)."""
        self.net.load_state_dict(net.state_dict())
        if self.smoothed is not None:
            self.smoothed.reset(net)
            self.smoothed_fits = 0

    def learn(
        self, rollout: Rollout, learner: RogueNet, rng: np.random.Generator
    ) -> dict[str, float]:
        """Add the rollout's decisions to the reservoir, then :meth:`fit` the network."""
        rows = _decisions(rollout)
        if rows.size:
            actions = {name: a.take(rows) for name, a in rollout.actions.items()}
            self.reservoir.add(rollout.obs.take(rows), actions, rng)
        return self.fit(learner, rng)

    def fit(self, learner: RogueNet, rng: np.random.Generator) -> dict[str, float]:
        """``batches`` cross-entropy steps on the reservoir; the mean negative log-likelihood
        and the reservoir's size, for the log (nothing while it is empty)."""
        if not len(self.reservoir):
            return {}
        # The same input statistics as the best response, whose observations these are.
        with torch.no_grad():
            for mine, theirs in zip(self.net.buffers(), learner.buffers(), strict=True):
                mine.copy_(theirs)
        nll, actors = 0.0, 0
        for _ in range(self.batches):
            terms = bc_step(
                self.net,
                self.optimizer,
                *self.reservoir.sample(self.batch_size, rng),
                self.max_grad_norm,
            )
            nll += sum(terms.per_action.values())
            actors += sum(terms.actors.values())
        if self.smoothed is not None:
            # It starts at the first fit: the initial network is no average of anything.
            if self.smoothed_fits:
                self.smoothed.follow(self.net)
            else:
                self.smoothed.reset(self.net)
            self.smoothed_fits += 1
        return {
            "loss/nfsp_nll": nll / max(actors, 1),
            "selfplay/nfsp_reservoir": float(len(self.reservoir)),
        }

    def state_dict(self) -> dict[str, Any]:
        state = {
            "net": self.net.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "reservoir": self.reservoir.state_dict(),
        }
        if self.smoothed is not None:  # absent without it: such checkpoints stay as they were
            state["smoothed"] = self.smoothed.state_dict()
            state["smoothed_fits"] = self.smoothed_fits
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.net.load_state_dict(state["net"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.reservoir.load_state_dict(state["reservoir"])
        if self.smoothed is not None:
            if "smoothed" not in state:
                raise ValueError(
                    "selfplay.nfsp_polyak > 0, but the checkpoint's NFSP average policy has no "
                    "Polyak average (trained with nfsp_polyak=0): resume with the setting it was "
                    "trained with"
                )
            self.smoothed.load_state_dict(state["smoothed"])
            self.smoothed_fits = int(state["smoothed_fits"])


def _decisions(rollout: Rollout) -> npt.NDArray[np.int64]:
    """The rollout's rows where the learner chose an action (and was in play)."""
    acting = np.sum([a.lengths for a in rollout.actions.values()], axis=0) > 0
    learned = rollout.learned()
    return np.flatnonzero(acting if learned is None else acting & learned)


class AnticipatoryPlayer:
    """An opponent that plays, for a whole episode of a row, the best response with probability
    ``eta``, else the average policy. Its state is each row's draw (True: the best response),
    made where the row's episode starts."""

    def __init__(self, best: NetworkPlayer, average: NetworkPlayer, eta: float) -> None:
        self.best = best
        self.average = average
        self.eta = eta
        self.rng = np.random.default_rng(0)  # reseeded every rollout by the algorithm

    def initial_state(self, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        return self.rng.random(rows.shape[0]) < self.eta

    def act(
        self, obs: VecObs, state: npt.NDArray[np.bool_]
    ) -> tuple[Actions, npt.NDArray[np.bool_]]:
        parts = []
        for player, rows in (
            (self.best, np.flatnonzero(state)),
            (self.average, np.flatnonzero(~state)),
        ):
            if rows.size:
                # Without net.memory (refused in this mode) a network player's state is None.
                parts.append((rows, player.act(obs.take(rows), None)[0]))
        return merge_actions(parts, obs.num_rows), state
