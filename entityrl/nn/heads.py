"""Action and value heads, and the registry of action heads by action space class.

Each kind of action (:mod:`entityrl.env.actions`) has its network part here: a head module
that prepares its inputs from the batched mask (numpy, on the CPU), turns the actors'
embeddings into a distribution, samples or scores it, and reads the values a rollout stored
back into the tensor it scores. :func:`head_for` builds the head of an action space.

The masked categorical distribution the categorical and select-entity heads end in
(``masked_categorical``, and its ``HeadOutput``) lives in
:mod:`entityrl.nn.kernels.categorical` with the kernel that computes it (and its torch
fallback); it is re-exported here. The Gaussian head of continuous actions is in
:mod:`entityrl.nn.gaussian`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import nn

from entityrl.env.spaces import (
    CategoricalActionSpace,
    ContinuousActionSpace,
    GlobalCategoricalActionSpace,
    GlobalContinuousActionSpace,
    SelectEntityActionSpace,
)
from entityrl.nn.gaussian import GaussianHead
from entityrl.nn.kernels.categorical import HeadOutput, masked_categorical, select_logits
from entityrl.nn.layout import ActorInputs, BatchLayout, SelectLayout, actor_inputs, select_layout
from entityrl.ragged import RaggedArray

__all__ = [
    "ActionHead",
    "CategoricalHead",
    "ChoiceScores",
    "GaussianHead",
    "HeadOutput",
    "SelectEntityHead",
    "ValueHead",
    "head_for",
    "masked_categorical",
    "register_head",
]


class ActionHead(Protocol):
    """What RogueNet asks of the head of every action."""

    def prepare(self, mask: Any, layout: BatchLayout) -> Any:
        """The head's inputs from a batched mask (an object with ``to(device)``), on the
        CPU."""

    def __call__(
        self,
        x: torch.Tensor,
        inputs: Any,
        chosen: torch.Tensor | None,
        deterministic: bool,
        generator: torch.Generator | None,
    ) -> HeadOutput:
        """Sample (or score ``chosen``): per actor its action, log-probability and entropy."""

    def chosen(self, values: RaggedArray) -> torch.Tensor:
        """The values of a batch of actions (as a VecEnv took them) as the tensor to score."""


@dataclass
class ChoiceScores:
    """A discrete action's score of every choice, per actor: the logits of the policy's
    distribution, or, for a value-based method, the Q-values the head is trained as."""

    scores: torch.Tensor
    """(actors, choices) float; a select-entity action's choices are its row's candidates, in
    order, padded to the most of any row."""
    legal: torch.Tensor | None
    """(actors, choices) bool: the choice exists and the mask allows it (None: all do)."""


def chosen_indices(values: RaggedArray) -> torch.Tensor:
    """One int64 per actor (a choice, or a candidate's position)."""
    return torch.from_numpy(values.data[:, 0])


class CategoricalHead(nn.Module):
    """Logits over the choices of a categorical action, from each actor's embedding."""

    def __init__(self, d_model: int, choices: int) -> None:
        super().__init__()
        self.proj = nn.Linear(d_model, choices)
        # Near-uniform initial policy: small weights keep early exploration broad.
        nn.init.orthogonal_(self.proj.weight, gain=0.01)
        nn.init.zeros_(self.proj.bias)

    def prepare(self, mask: Any, layout: BatchLayout) -> ActorInputs:
        return actor_inputs(mask, layout.row_slot, layout.num_slots)

    chosen = staticmethod(chosen_indices)

    def forward(
        self,
        x: torch.Tensor,
        inputs: ActorInputs,
        chosen: torch.Tensor | None = None,
        deterministic: bool = False,
        generator: torch.Generator | None = None,
    ) -> HeadOutput:
        if inputs.empty:
            return no_actors(x.device)
        scores = self.scores(x, inputs)
        return masked_categorical(scores.scores, scores.legal, chosen, deterministic, generator)

    def scores(self, x: torch.Tensor, inputs: ActorInputs) -> ChoiceScores:
        """Every choice's logit, per actor."""
        actors = inputs.actors
        # index_select: several times faster than x[actors], forward and backward.
        acting = x if actors is None else x.index_select(0, actors)
        return ChoiceScores(self.proj(acting), inputs.legal)


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

    def prepare(self, mask: Any, layout: BatchLayout) -> SelectLayout:
        return select_layout(mask, layout.row_slot)

    chosen = staticmethod(chosen_indices)

    def forward(
        self,
        x: torch.Tensor,
        layout: SelectLayout,
        chosen: torch.Tensor | None = None,
        deterministic: bool = False,
        generator: torch.Generator | None = None,
    ) -> HeadOutput:
        if layout.actor_flat.shape[0] == 0:
            return no_actors(x.device)
        scores = self.scores(x, layout)
        return masked_categorical(scores.scores, scores.legal, chosen, deterministic, generator)

    def scores(self, x: torch.Tensor, layout: SelectLayout) -> ChoiceScores:
        """Every candidate's logit, per actor (``(actors, max_actees)``, padding illegal)."""
        if layout.actor_flat.shape[0] == 0:
            return ChoiceScores(x.new_zeros((0, layout.max_actees)), layout.legal)
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
        return ChoiceScores(scores, layout.legal)


class ValueHead(nn.Module):
    """State value from a row's pooled embedding."""

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.proj = nn.Linear(d_model, 1)
        nn.init.orthogonal_(self.proj.weight, gain=1.0)
        nn.init.zeros_(self.proj.bias)

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        return self.proj(pooled).squeeze(1)


def no_actors(device: torch.device) -> HeadOutput:
    """The output of a categorical or select-entity head that nobody in the batch takes."""
    empty = torch.zeros(0, device=device)
    return HeadOutput(torch.zeros(0, dtype=torch.int64, device=device), empty, empty)


HeadFactory = Callable[[Any, int, int], nn.Module]
"""Builds an action head from (action space, d_model, d_qk)."""

_HEADS: dict[type, HeadFactory] = {
    CategoricalActionSpace: lambda space, d_model, _d_qk: CategoricalHead(d_model, len(space)),
    GlobalCategoricalActionSpace: lambda space, d_model, _d_qk: CategoricalHead(
        d_model, len(space)
    ),
    SelectEntityActionSpace: lambda _space, d_model, d_qk: SelectEntityHead(d_model, d_qk),
    ContinuousActionSpace: lambda space, d_model, _d_qk: GaussianHead(d_model, space),
    GlobalContinuousActionSpace: lambda space, d_model, _d_qk: GaussianHead(d_model, space),
}


def register_head(space: type, factory: HeadFactory) -> None:
    """Make ``factory`` build the heads of actions of the space class ``space``."""
    _HEADS[space] = factory


def head_for(name: str, space: Any, d_model: int, d_qk: int) -> nn.Module:
    """The head of the action ``name`` of ``space``."""
    factory = _HEADS.get(type(space))
    if factory is None:
        known = ", ".join(s.__name__ for s in _HEADS)
        raise TypeError(
            f"action {name!r}: expected an action space with a head ({known}), "
            f"got {type(space).__name__}"
        )
    return factory(space, d_model, d_qk)
