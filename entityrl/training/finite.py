"""Stopping a run whose numbers stopped being numbers.

The environments' default checks keep NaN and infinity out of observations and rewards; what
still gets through comes from the network (a diverging update, an overflowing loss). One NaN
poisons every parameter it touches at the next optimizer step, so the trainer checks the loss
terms and the parameters after every update and stops at the first non-finite one, before a
checkpoint could be written from it: the last good checkpoint stays on disk.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

from entityrl.training.checkpoint import first_non_finite


class NonFiniteError(RuntimeError):
    """A loss term or a parameter became NaN or infinite."""


def check_update(stats: Mapping[str, float], net: torch.nn.Module, step: int) -> None:
    """Raise :class:`NonFiniteError` naming the first non-finite loss term of ``stats`` (the
    update's averages, in the order the update reports them) or parameter of ``net``."""
    for name, value in stats.items():
        if not math.isfinite(value):
            raise NonFiniteError(
                f"training stopped at step {step:,}: the loss term {name} is {value} "
                f"(first non-finite term; {_others(stats, name)}); the parameters it updated "
                f"are discarded"
            )
    parameter = first_non_finite(dict(net.named_parameters()))
    if parameter is not None:
        raise NonFiniteError(
            f"training stopped at step {step:,}: parameter {parameter} holds non-finite "
            "numbers although every loss term was finite"
        )


def _others(stats: Mapping[str, float], name: str) -> str:
    others = [f"{k}={v:.4g}" for k, v in stats.items() if k != name]
    return ", ".join(others) if others else "no other terms"
