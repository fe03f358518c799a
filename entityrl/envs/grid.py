"""Helpers shared by the grid worlds: sampling free cells."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

Cell = tuple[int, int]


def sample_free_cells(
    rng: np.random.Generator, width: int, height: int, count: int, occupied: Iterable[Cell] = ()
) -> list[Cell]:
    """``count`` distinct cells of a ``width`` x ``height`` grid (x in [0, width), y in
    [0, height)), drawn uniformly among the cells not in ``occupied``."""
    taken = set(occupied)
    free = [(x, y) for y in range(height) for x in range(width) if (x, y) not in taken]
    if count > len(free):
        raise ValueError(
            f"cannot place {count} items on a {width}x{height} grid with {len(free)} free cells"
        )
    return [free[i] for i in rng.choice(len(free), count, replace=False).tolist()]
