"""An optimizer over a network's parameters packed into one flat tensor.

RogueNet's parameters are a few dozen small tensors (tens of thousands of values in all). On
CPUs, torch's multi-tensor paths for the optimizer step and for gradient clipping loop over the
tensors one by one: for such a network each took 130-150 us per minibatch, more than the
arithmetic. Here every parameter is a view into one flat tensor, so the optimizer steps one
tensor, the gradient norm is one reduction, clipping one multiplication, and a data-parallel
run sums one buffer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from entityrl.algo.reduce import Reducer


class FlatOptimizer:
    """``make([flat])`` (e.g. ``lambda ps: torch.optim.Adam(ps, lr=1e-3)``) stepping all of
    ``module``'s parameters, which become views into ``flat``.

    The module trains as before: gradients accumulate in each parameter's ``.grad``;
    :meth:`step` gathers them into the flat gradient. A parameter without gradient (a head
    that saw no actor in the minibatch) counts as zeros where torch's optimizers would skip it:
    an Adam step still moves it by its momentum, as it always did in data-parallel runs, where
    every process must step the same tensors. Do not replace the module's parameter tensors
    afterwards (``load_state_dict`` copies into them, which is fine).
    """

    def __init__(
        self, module: nn.Module, make: Callable[[list[nn.Parameter]], torch.optim.Optimizer]
    ) -> None:
        self.params = [p for p in module.parameters() if p.requires_grad]
        if not self.params:
            raise ValueError("FlatOptimizer: the module has no trainable parameters")
        self.flat = nn.Parameter(torch.cat([p.detach().reshape(-1) for p in self.params]))
        offset = 0
        for p in self.params:
            size = p.numel()
            p.data = self.flat.data[offset : offset + size].view_as(p)
            offset += size
        self.optimizer = make([self.flat])

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        return self.optimizer.param_groups

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def step(self, max_grad_norm: float, reducer: Reducer | None = None) -> float:
        """Sum the gradients over the processes, scale them to a norm of at most
        ``max_grad_norm`` and take an optimizer step. Returns the norm before scaling."""
        # A head that saw no actors has no gradient: it counts as zeros.
        self.flat.grad = torch.cat(
            [
                (p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)
                for p in self.params
            ]
        )
        if reducer is not None:
            reducer.sum_in_place(self.flat.grad)
        norm = torch.linalg.vector_norm(self.flat.grad)
        # As torch.nn.utils.clip_grad_norm_: scale by max / (norm + 1e-6), at most 1.
        self.flat.grad.mul_(torch.clamp(max_grad_norm / (norm + 1e-6), max=1.0))
        self.optimizer.step()
        return float(norm)

    def state_dict(self) -> dict[str, Any]:
        """The optimizer's state as if it stepped each parameter tensor on its own (the
        layout of a plain torch optimizer over ``module.parameters()``), so checkpoints do not
        depend on the packing."""
        return _unpack(self.optimizer.state_dict(), self.params)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(_pack(state, self.params))


# Per-parameter state tensors (Adam's moments) are split and joined along with the parameters;
# anything else (the step count) is the same for every parameter.
def _unpack(state: dict[str, Any], params: list[nn.Parameter]) -> dict[str, Any]:
    total = sum(p.numel() for p in params)
    packed = state["state"].get(0, {})
    per_param: dict[int, dict[str, Any]] = {i: {} for i in range(len(params))} if packed else {}
    for key, value in packed.items():
        if torch.is_tensor(value) and value.dim() == 1 and value.numel() == total:
            parts = torch.split(value, [p.numel() for p in params])
            for i, (part, p) in enumerate(zip(parts, params, strict=True)):
                per_param[i][key] = part.view_as(p)
        else:
            for entry in per_param.values():
                # Own copies: optimizers update their step counts in place.
                entry[key] = value.clone() if torch.is_tensor(value) else value
    group = {**state["param_groups"][0], "params": list(range(len(params)))}
    return {"state": per_param, "param_groups": [group]}


def _pack(state: dict[str, Any], params: list[nn.Parameter]) -> dict[str, Any]:
    groups = state.get("param_groups")
    ids = [i for group in groups or [] for i in group.get("params", [])]
    if not isinstance(groups, list) or len(groups) != 1 or len(ids) != len(params):
        raise ValueError(
            f"the optimizer state has {len(ids)} parameters in {len(groups or [])} groups; "
            f"expected {len(params)} parameters in 1 group"
        )
    entries = [state["state"].get(i, {}) for i in ids]
    packed: dict[str, Any] = {}
    for key in {key for entry in entries for key in entry}:
        values = [entry.get(key) for entry in entries]
        present = [(v, p) for v, p in zip(values, params, strict=True) if v is not None]
        if any(p.dim() for _, p in present) and all(
            torch.is_tensor(v) and v.shape == p.shape for v, p in present
        ):
            # A parameter that never had a gradient (a head that never saw an actor) has no
            # moments yet: zeros, as the optimizer would start them.
            packed[key] = torch.cat(
                [
                    (v if v is not None else torch.zeros_like(p)).reshape(-1)
                    for v, p in zip(values, params, strict=True)
                ]
            )
        else:
            first = present[0][0]
            packed[key] = first.clone() if torch.is_tensor(first) else first
    group = {**groups[0], "params": [0]}
    return {"state": {0: packed} if packed else {}, "param_groups": [group]}
