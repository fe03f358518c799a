"""Action and value heads: categorical per actor, select-entity, value.

The masked categorical distribution the action heads end in (``masked_categorical``, and its
``HeadOutput``) lives in :mod:`entityrl.nn.kernels.categorical` with the kernel that computes
it (and its torch fallback); it is re-exported here.
"""

from __future__ import annotations

import torch
from torch import nn

from entityrl.nn.kernels.categorical import HeadOutput, masked_categorical, select_logits
from entityrl.nn.layout import SelectLayout

__all__ = ["CategoricalHead", "HeadOutput", "SelectEntityHead", "ValueHead", "masked_categorical"]


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
        actors: torch.Tensor | None,
        legal: torch.Tensor | None,
        chosen: torch.Tensor | None = None,
        deterministic: bool = False,
        generator: torch.Generator | None = None,
    ) -> HeadOutput:
        """``actors``: the slots of ``x`` that act, None for all of them in order."""
        # index_select: several times faster than x[actors], forward and backward.
        acting = x if actors is None else x.index_select(0, actors)
        return masked_categorical(self.proj(acting), legal, chosen, deterministic, generator)


class SelectEntityHead(nn.Module):
    """Each actor scores the candidates of its row: query(actor) . key(candidate) / sqrt(d_qk).

    Computed as (W_k^T query) . candidate + query . b_k: the second term is the same for all of
    an actor's candidates, so the softmax ignores it (``key.bias`` never gets a gradient, and
    stays a parameter for checkpoints), and one ``d_model`` vector per actor replaces a
    projected key per candidate (candidates usually far outnumber actors; see
    :func:`entityrl.nn.kernels.categorical.select_logits`).
    """

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
        generator: torch.Generator | None = None,
    ) -> HeadOutput:
        queries = self.query(x.index_select(0, layout.actor_flat))
        scores = select_logits(
            x,
            queries @ self.key.weight,
            layout.pair_slot,
            layout.pair_actor,
            layout.pair_pos,
            (queries.shape[0], layout.max_actees),
            self.d_qk**-0.5,
        )
        return masked_categorical(scores, layout.legal, chosen, deterministic, generator)


class ValueHead(nn.Module):
    """State value from a row's pooled embedding."""

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.proj = nn.Linear(d_model, 1)
        nn.init.orthogonal_(self.proj.weight, gain=1.0)
        nn.init.zeros_(self.proj.bias)

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        return self.proj(pooled).squeeze(1)
