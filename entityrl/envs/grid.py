"""Helpers shared by the grid worlds: sampling free cells, moves, drawing."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

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


MOVES_OR_STAY: dict[str, Cell] = {
    "stay": (0, 0),
    "up": (0, 1),
    "down": (0, -1),
    "left": (-1, 0),
    "right": (1, 0),
}
"""The moves of the multi-player grid games, by label: the cell offset of each."""


def step_within(cell: Cell, move: str, width: int, height: int) -> Cell:
    """Where ``move`` (a label of :data:`MOVES_OR_STAY`) leads from ``cell``; a move off the
    grid stays."""
    dx, dy = MOVES_OR_STAY[move]
    x, y = cell[0] + dx, cell[1] + dy
    return (x, y) if 0 <= x < width and 0 <= y < height else cell


def draw_grid(width: int, height: int, symbols: Mapping[Cell, str]) -> str:
    """The grid as text, top row first: each cell's symbol, '.' where it has none."""
    return "\n".join(
        "".join(symbols.get((x, y), ".") for x in range(width)) for y in reversed(range(height))
    )
