"""An optimizer over a network's parameters packed into one flat tensor.

RogueNet's parameters are a few dozen small tensors (tens of thousands of values in all). On
CPUs, torch's multi-tensor paths for the optimizer step and for gradient clipping loop over the
tensors one by one: for such a network each took 130-150 us per minibatch, more than the
arithmetic. Here every parameter is a view into one flat tensor, so the optimizer steps one
tensor, the gradient norm is one reduction, clipping one multiplication, and a data-parallel
run sums one buffer.

:class:`Adam` steps that one tensor with torch's Adam arithmetic in seven tensor operations.
It exists for memory: constructing any ``torch.optim`` optimizer imports ``torch._dynamo``,
which adds some 70 MB to the process (a third of a small training run's peak).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import nn

from entityrl.algorithms.common.checks import require_positive
from entityrl.algorithms.common.reduce import Reducer


@dataclass
class OptimConfig:
    """Adam optimizer and minibatches."""

    lr: float = 0.005
    """Learning rate (algo=ppo: 0.0005 unless set; docs/troubleshooting.md)."""
    anneal_lr: bool = True
    """Anneal the learning rate linearly to 0 over training."""
    warmup_steps: int = 0
    """Environment steps over which the learning rate ramps up linearly from 0."""
    bs: int = 1024
    """Minibatch size, in samples (one sample = one environment step; algo=ppo: 128 unless
    set)."""
    micro_bs: int | None = None
    """Accumulate gradients over micro-batches of this many samples (saves memory; same result)."""
    max_grad_norm: float = 2.0
    """Clip the gradient norm to this."""
    weight_decay: float = 0.0
    """Adam weight decay."""
    eps: float = 1e-5
    """Adam epsilon."""

    def __post_init__(self) -> None:
        require_positive(
            "optim", lr=self.lr, bs=self.bs, max_grad_norm=self.max_grad_norm, eps=self.eps
        )
        if self.micro_bs is not None:
            require_positive("optim", micro_bs=self.micro_bs)
            if self.bs % self.micro_bs:
                raise ValueError(
                    f"optim.micro_bs ({self.micro_bs}) must divide optim.bs ({self.bs})"
                )
        if self.warmup_steps < 0 or self.weight_decay < 0:
            raise ValueError("optim.warmup_steps and optim.weight_decay must be >= 0")


class Optimizer(Protocol):
    """What FlatOptimizer needs of an optimizer (torch's optimizers have it)."""

    param_groups: list[dict[str, Any]]

    def step(self) -> Any: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state_dict: dict[str, Any]) -> None: ...


class Adam:
    """Adam (Kingma and Ba) over tensors with gradients, as ``torch.optim.Adam`` computes it,
    with its state dict layout (so checkpoints load either way); no AMSGrad, no maximize."""

    def __init__(
        self,
        params: list[nn.Parameter],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ) -> None:
        self.params = list(params)
        self.param_groups = [
            {
                "lr": lr,
                "betas": tuple(betas),
                "eps": eps,
                "weight_decay": weight_decay,
                "amsgrad": False,
                "maximize": False,
                "params": self.params,
            }
        ]
        self.state: dict[int, dict[str, torch.Tensor]] = {}

    @torch.no_grad()
    def step(self) -> None:
        group = self.param_groups[0]
        beta1, beta2 = group["betas"]
        for i, param in enumerate(self.params):
            grad = param.grad
            if grad is None:
                continue
            state = self.state.get(i)
            if state is None:
                state = self.state[i] = {
                    "step": torch.zeros((), dtype=torch.float32),
                    "exp_avg": torch.zeros_like(param),
                    "exp_avg_sq": torch.zeros_like(param),
                }
            state["step"] += 1
            if group["weight_decay"]:
                grad = grad.add(param, alpha=group["weight_decay"])
            exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            step = float(state["step"])
            denom = (exp_avg_sq.sqrt() / math.sqrt(1 - beta2**step)).add_(group["eps"])
            param.addcdiv_(exp_avg, denom, value=-group["lr"] / (1 - beta1**step))

    def state_dict(self) -> dict[str, Any]:
        group = {**self.param_groups[0], "params": list(range(len(self.params)))}
        return {"state": dict(self.state), "param_groups": [group]}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        groups = state_dict["param_groups"]
        if len(groups) != 1 or len(groups[0]["params"]) != len(self.params):
            raise ValueError(
                f"the optimizer state does not fit {len(self.params)} parameters in 1 group"
            )
        self.param_groups[0].update({k: v for k, v in groups[0].items() if k != "params"})
        self.param_groups[0]["betas"] = tuple(self.param_groups[0]["betas"])
        self.state = {}
        for i, saved in state_dict["state"].items():
            missing = {"step", "exp_avg", "exp_avg_sq"} - set(saved)
            if missing:
                raise ValueError(
                    f"the optimizer state of parameter {i} is not Adam's: it lacks "
                    f"{sorted(missing)} (has {sorted(saved)})"
                )
            param = self.params[int(i)]
            self.state[int(i)] = {
                "step": torch.as_tensor(saved["step"], dtype=torch.float32).clone(),
                "exp_avg": saved["exp_avg"].to(param.device, param.dtype).clone(),
                "exp_avg_sq": saved["exp_avg_sq"].to(param.device, param.dtype).clone(),
            }


class FlatOptimizer:
    """``make([flat])`` (e.g. ``lambda ps: Adam(ps, lr=1e-3)``, or any torch optimizer)
    stepping all of ``module``'s parameters, which become views into ``flat``.

    The module trains as before: gradients accumulate in each parameter's ``.grad``;
    :meth:`step` gathers them into the flat gradient. A parameter without gradient (a head
    that saw no actor in the minibatch) counts as zeros where torch's optimizers would skip it:
    an Adam step still moves it by its momentum, as it always did in data-parallel runs, where
    every process must step the same tensors. Do not replace the module's parameter tensors
    afterwards (``load_state_dict`` copies into them, which is fine).
    """

    def __init__(self, module: nn.Module, make: Callable[[list[nn.Parameter]], Optimizer]) -> None:
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
def adam(net: nn.Module, optim: OptimConfig) -> FlatOptimizer:
    """Adam over ``net``'s flat parameters, with the config's learning rate, epsilon and weight
    decay (the optimizer every algorithm uses)."""
    return FlatOptimizer(
        net,
        lambda params: Adam(params, lr=optim.lr, eps=optim.eps, weight_decay=optim.weight_decay),
    )


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
                    (v.to(p.device) if v is not None else torch.zeros_like(p)).reshape(-1)
                    for v, p in zip(values, params, strict=True)
                ]
            )
        else:
            first = present[0][0]
            packed[key] = first.clone() if torch.is_tensor(first) else first
    group = {**groups[0], "params": [0]}
    return {"state": {0: packed} if packed else {}, "param_groups": [group]}
