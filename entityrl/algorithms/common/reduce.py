"""How the processes of a data-parallel run combine what each computed.

An algorithm written against :class:`Reducer` runs unchanged in one process (this identity
reducer) or in several (``entityrl.training.distributed.ProcessGroupReducer``, where every sum
covers all processes and every process ends with the same gradients).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import torch


class Reducer:
    """The single-process reducer: sums and gathers over one process are the values themselves."""

    world_size = 1
    rank = 0

    def sum(self, values: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Element-wise sum over all processes."""
        return np.asarray(values, dtype=np.float64)

    def sum_in_place(self, tensor: torch.Tensor) -> None:
        """Replace ``tensor``'s values (a flat gradient) by their sums over all processes."""

    def gather(self, value: Any) -> list[Any]:
        """Every process's ``value``, in rank order."""
        return [value]
