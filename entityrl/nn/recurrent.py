"""Memory for RogueNet: a GRU state per row (``net.memory``).

Why per row and after pooling: a row is one environment's (or, in a multi-player game, one seat's) view, and
what must be remembered is about the situation, not about one entity: entities come and go
(their ids change, a cue vanishes), so a state per entity id would be lost exactly when it
matters. Each step, the row's pooled entity embedding advances the row's GRU state; the new
state, projected, is added to every entity embedding of the row before the action heads and
the value head, so every actor and the value read the memory.

During rollouts the state advances one step per call (:meth:`RowMemory.step`). During the
update, rows come as :class:`Sequences`: whole chunks of consecutive steps of one environment,
each started from the state stored when the chunk was collected and reset where an episode
ended inside it (truncated back-propagation through time over the chunk).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from entityrl.nn.layout import BatchLayout


@dataclass
class Sequences:
    """Rows of a minibatch as ``chunks`` chunks of ``length`` consecutive steps, chunk-major
    (row ``c * length + t`` is step ``t`` of chunk ``c``)."""

    initial: torch.Tensor
    """(chunks, state): the state each chunk starts from."""
    keep: torch.Tensor
    """(chunks, length) float: 0 where the state is reset before the step (an episode ended
    with the step before), else 1; the first column is 1 (``initial`` is already reset)."""

    @property
    def chunks(self) -> int:
        return self.keep.shape[0]

    @property
    def length(self) -> int:
        return self.keep.shape[1]

    def to(self, device: torch.device) -> Sequences:
        return Sequences(self.initial.to(device), self.keep.to(device))


def fresh_episodes(state: torch.Tensor, done: npt.NDArray[np.bool_]) -> torch.Tensor:
    """``state`` with the rows whose episode ended (``done``) reset to the initial (zero)
    state."""
    if not done.any():
        return state
    state = state.clone()
    state[torch.from_numpy(done)] = 0.0
    return state


class RowMemory(nn.Module):
    """The GRU cell and the projection of its state into the entity embeddings."""

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.size = d_model
        self.cell = nn.GRUCell(d_model, d_model)
        self.proj = nn.Linear(d_model, d_model)

    def initial_state(self, rows: int, device: torch.device | None = None) -> torch.Tensor:
        return torch.zeros(rows, self.size, device=device)

    def step(self, pooled: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """One step of every row: (rows, d) pooled embeddings and states -> new states."""
        return self.cell(pooled, state)

    def sequence(self, pooled: torch.Tensor, sequences: Sequences) -> torch.Tensor:
        """The state after every step of the chunks (rows chunk-major, as ``pooled``)."""
        steps = pooled.view(sequences.chunks, sequences.length, -1)
        state = sequences.initial
        states = []
        for t in range(sequences.length):
            state = self.cell(steps[:, t], state * sequences.keep[:, t, None])
            states.append(state)
        return torch.stack(states, dim=1).reshape(pooled.shape[0], -1)

    def broadcast(self, x: torch.Tensor, states: torch.Tensor, layout: BatchLayout) -> torch.Tensor:
        """``x`` (slots, d) with each row's projected state added to its slots (padding slots,
        whose row is ``num_rows``, get nothing)."""
        return x + layout.per_slot(self.proj(states).to(x.dtype))
