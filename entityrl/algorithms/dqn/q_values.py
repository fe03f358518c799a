"""Q-values of rows of entity observations, from RogueNet's per-actor choice scores.

Each actor of each discrete action (categorical, global categorical, select-entity) has one
score per choice, read as that actor's Q-value. A row's Q-value for a joint action is the sum
of its actors' Q-values of their choices (value decomposition, as VDN): a row with any number of
actors, and actors that come and go between steps, share one scalar target, and the greedy
joint action is every actor's own argmax. Illegal choices (masked, or padding of a
select-entity action's candidates) are never chosen and never bootstrapped from; an actor with
no legal choice takes choice 0 (what the environment receives) and adds nothing to the row.

With ``dueling``, a row's Q-value is ``V(s) + sum_i (A_i(a_i) - mean_legal A_i)``: each actor's
``Q_i = V / N + A_i - mean(A_i)`` over the row's ``N`` actors. The value is counted once per row
whatever its number of actors (so rows with 1 and with 20 actors have values of one scale, and a
row without actors still has its value to bootstrap from), and centering each actor's advantage
over its legal choices makes ``V`` identifiable as in Wang et al. (2016)'s mean form; each
actor's argmax is its advantage's, ``V`` being the same for all its choices.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from entityrl.env.vec_obs import VecObs
from entityrl.nn.heads import ChoiceScores
from entityrl.nn.rogue_net import RogueNet
from entityrl.ragged import RaggedArray


@dataclass
class RowQ:
    """A network's Q-values of a batch: per action, every actor's score of every choice (with
    its legal mask), and with ``dueling`` each row's value."""

    obs: VecObs
    scores: dict[str, ChoiceScores]
    values: torch.Tensor | None

    @staticmethod
    def of(net: RogueNet, obs: VecObs, dueling: bool) -> RowQ:
        scores = net.choice_scores(obs)
        # The value head reads the pooled embedding of the value's encoder; without
        # net.separate_value that is a second pass of the shared one (choice_scores does not
        # return its embedding).
        values = net.value_head(net.embed(obs)).float() if dueling else None
        return RowQ(obs, scores, values)

    def legal(self, name: str) -> torch.Tensor:
        s = self.scores[name]
        return torch.ones_like(s.scores, dtype=torch.bool) if s.legal is None else s.legal

    def advantages(self, name: str) -> torch.Tensor:
        """Each actor's Q-values (dueling: its advantages centered over its legal choices),
        illegal choices -inf."""
        legal = self.legal(name)
        q = self.scores[name].scores.float()
        if self.values is not None:
            mean = (q * legal).sum(1, keepdim=True) / legal.sum(1, keepdim=True).clamp(min=1)
            q = q - mean
        return q.masked_fill(~legal, -torch.inf)

    def greedy(self, name: str) -> torch.Tensor:
        """Each actor's best legal choice (0 for an actor without one)."""
        q = self.advantages(name)
        if q.shape[1] == 0:  # no candidates anywhere in the batch
            return torch.zeros(q.shape[0], dtype=torch.int64, device=q.device)
        return q.argmax(1)

    def row_sum(self, per_actor: dict[str, torch.Tensor]) -> torch.Tensor:
        """Per row, the sum of its actors' values (and with dueling, the row's value)."""
        device = next(iter(self.scores.values())).scores.device
        total = torch.zeros(self.obs.num_rows, device=device)
        for name, values in per_actor.items():
            lengths = self.obs.action_masks[name].actors.lengths
            rows = torch.from_numpy(np.repeat(np.arange(len(lengths)), lengths)).to(device)
            # An actor without a legal choice has a -inf best value: it adds nothing.
            total = total.index_add(0, rows, values.nan_to_num(0.0, neginf=0.0))
        return total if self.values is None else total + self.values

    def of_choices(self, chosen: dict[str, torch.Tensor]) -> torch.Tensor:
        """Each row's Q-value of the given choices (per action, one per actor)."""
        per_actor = {}
        for name, c in chosen.items():
            q = self.advantages(name)
            # A select-entity action none of whose actors has a candidate has no columns.
            per_actor[name] = (
                q.gather(1, c[:, None].to(q.device))[:, 0] if q.shape[1] else q[:, 0:0].sum(1)
            )
        return self.row_sum(per_actor)


def taken(actions: dict[str, RaggedArray], names: list[str]) -> dict[str, torch.Tensor]:
    """The stored choice of every actor, per discrete action."""
    return {name: torch.from_numpy(actions[name].data[:, 0]) for name in names}
