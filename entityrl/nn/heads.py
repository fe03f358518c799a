"""Action and value heads: categorical per actor, select-entity, value."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from entityrl.nn.layout import SelectLayout


@dataclass
class HeadOutput:
    """Per actor: the action (sampled or given), its log-probability and the entropy."""

    actions: torch.Tensor  # (A,) int64
    logprob: torch.Tensor  # (A,)
    entropy: torch.Tensor  # (A,)


def masked_categorical(
    logits: torch.Tensor,
    legal: torch.Tensor | None,
    chosen: torch.Tensor | None = None,
    deterministic: bool = False,
) -> HeadOutput:
    """Sample (or score ``chosen``) from categorical distributions with illegal choices removed.

    Illegal choices get logit -inf, hence probability exactly 0: they are never sampled.
    """
    if legal is not None:
        logits = logits.masked_fill(~legal, float("-inf"))
    logp = torch.log_softmax(logits, dim=-1)
    if chosen is None:
        if deterministic:
            chosen = logits.argmax(dim=-1)
        else:
            # Gumbel-max: argmax(logits + Gumbel noise) is a sample of softmax(logits).
            u = torch.rand_like(logits)
            chosen = (logits - torch.log(-torch.log(u))).argmax(dim=-1)
    logprob = logp.gather(1, chosen.unsqueeze(1)).squeeze(1)
    # p * log p with p = 0 where illegal (log p = -inf there, so zero it first).
    safe_logp = logp if legal is None else logp.masked_fill(~legal, 0.0)
    entropy = -(logp.exp() * safe_logp).sum(dim=-1)
    return HeadOutput(chosen, logprob, entropy)


class CategoricalHead(nn.Module):
    """Logits over the choices of a categorical action, from each actor's embedding."""

    def __init__(self, d_model: int, choices: int) -> None:
        super().__init__()
        self.proj = nn.Linear(d_model, choices)
        # Near-uniform initial policy: small weights keep early exploration broad.
        nn.init.orthogonal_(self.proj.weight, gain=0.01)
        nn.init.zeros_(self.proj.bias)

    def forward(
        self,
        x: torch.Tensor,
        actors: torch.Tensor,
        legal: torch.Tensor | None,
        chosen: torch.Tensor | None = None,
        deterministic: bool = False,
    ) -> HeadOutput:
        return masked_categorical(self.proj(x[actors]), legal, chosen, deterministic)


class SelectEntityHead(nn.Module):
    """Each actor scores the candidates of its row: query(actor) . key(candidate) / sqrt(d_qk)."""

    def __init__(self, d_model: int, d_qk: int) -> None:
        super().__init__()
        self.d_qk = d_qk
        self.query = nn.Linear(d_model, d_qk)
        self.key = nn.Linear(d_model, d_qk)

    def forward(
        self,
        x: torch.Tensor,
        layout: SelectLayout,
        chosen: torch.Tensor | None = None,
        deterministic: bool = False,
    ) -> HeadOutput:
        queries = self.query(x[layout.actor_flat])
        keys = self.key(x[layout.actee_flat])
        rows, ma, me = layout.rows, layout.max_actors, layout.max_actees
        key_grid = keys.new_zeros(rows * me, self.d_qk).index_copy_(0, layout.actee_slot, keys)
        key_grid = key_grid.view(rows, me, self.d_qk)
        if ma == 1:
            # One actor per acting row (the common case): no query grid needed.
            scores = (key_grid @ queries.unsqueeze(2)).squeeze(2)
        else:
            query_grid = queries.new_zeros(rows * ma, self.d_qk)
            query_grid.index_copy_(0, layout.actor_slot, queries).view(rows, ma, self.d_qk)
            scores = (query_grid.view(rows, ma, self.d_qk) @ key_grid.transpose(1, 2)).view(
                rows * ma, me
            )[layout.actor_slot]
        return masked_categorical(scores * self.d_qk**-0.5, layout.legal, chosen, deterministic)


class ValueHead(nn.Module):
    """State value from a row's pooled embedding."""

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.proj = nn.Linear(d_model, 1)
        nn.init.orthogonal_(self.proj.weight, gain=1.0)
        nn.init.zeros_(self.proj.bias)

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        return self.proj(pooled).squeeze(1)
