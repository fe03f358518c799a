"""Simulation state as plain data: what a checkpoint stores instead of a pickle."""

from __future__ import annotations

import datetime
import enum
import io
import random
import sys
from collections import OrderedDict, defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import pytest
import torch
from vec_env_checks import assert_plain

from entityrl.env import plain_state, signing
from entityrl.env.plain_state import NotPlainError, PickleRefusedError, StateError


class Suit(enum.Enum):
    HEARTS = 1
    SPADES = 2


class Cell(NamedTuple):
    x: int
    y: int


@dataclass
class Piece:
    cell: Cell
    suit: Suit
    owner: Any = None


class Slotted:
    __slots__ = ("a", "b")

    def __init__(self) -> None:
        self.a = np.float32(1.5)
        self.b = [1, 2]


class OwnHooks:
    """Keeps a handle that is not data; rebuilds it from plain data."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.handle = lambda: n

    def __getstate__(self) -> dict[str, int]:
        return {"n": self.n}

    def __setstate__(self, state: dict[str, int]) -> None:
        self.n = state["n"]
        self.handle = lambda: self.n


@dataclass
class World:
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(3))
    pieces: list[Piece] = field(default_factory=list)
    board: dict[Cell, Piece] = field(default_factory=dict)
    seen: set[Cell] = field(default_factory=set)
    recent: deque[int] = field(default_factory=lambda: deque([1, 2], maxlen=3))
    by_suit: defaultdict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    order: OrderedDict[str, int] = field(default_factory=OrderedDict)
    heights: np.ndarray = field(default_factory=lambda: np.arange(6, dtype=np.int16).reshape(2, 3))
    records: np.ndarray = field(
        default_factory=lambda: np.zeros(2, dtype=[("x", "<i4"), ("w", "<f8")])
    )
    py_rng: random.Random = field(default_factory=lambda: random.Random(5))
    slotted: Slotted = field(default_factory=Slotted)
    hooks: OwnHooks = field(default_factory=lambda: OwnHooks(4))
    suits: type[Suit] = Suit  # a class held as a value
    rule: Callable[[int], int] = abs  # replaced by a module-level function below
    dtype: np.dtype = field(default_factory=lambda: np.dtype("<f4"))
    blob: bytes = b"\x00\xff\x80raw"
    big: int = 2**100
    nan: float = float("nan")


def double(n: int) -> int:
    return 2 * n


def a_world() -> World:
    world = World(rule=double)
    for x in range(3):
        piece = Piece(Cell(x, x + 1), Suit.SPADES if x else Suit.HEARTS)
        world.pieces.append(piece)
        world.board[piece.cell] = piece  # shared with the list
        world.seen.add(piece.cell)
    world.pieces[0].owner = world  # a cycle
    world.by_suit["spades"].append(7)
    world.order["b"] = 2
    world.order["a"] = 1
    world.records["x"] = [3, 4]
    world.rng.random(5)
    return world


def through_a_checkpoint(tree: Any) -> Any:
    """``tree`` saved and loaded as checkpoints are: ``torch.load(weights_only=True)``."""
    buffer = io.BytesIO()
    torch.save({"env_state": tree}, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)["env_state"]


def test_a_simulation_round_trips_as_plain_data() -> None:
    world = a_world()
    tree = plain_state.capture(world)
    assert_plain(tree)
    back = plain_state.restore(World(), through_a_checkpoint(tree))

    assert back is not world and type(back) is World
    assert [(p.cell, p.suit) for p in back.pieces] == [(p.cell, p.suit) for p in world.pieces]
    assert back.board.keys() == world.board.keys() and back.seen == world.seen
    assert back.board[Cell(1, 2)] is back.pieces[1]  # shared objects stay shared
    assert back.pieces[0].owner is back  # and cycles stay cycles
    assert type(back.pieces[0].cell) is Cell and back.pieces[2].suit is Suit.SPADES
    assert back.recent == deque([1, 2], maxlen=3) and back.recent.maxlen == 3
    assert back.by_suit["hearts"] == [] and back.by_suit["spades"] == [7]  # still a defaultdict
    assert list(back.order) == ["b", "a"] and type(back.order) is OrderedDict
    np.testing.assert_array_equal(back.heights, world.heights)
    assert back.heights.dtype == np.int16 and back.records.dtype == world.records.dtype
    np.testing.assert_array_equal(back.records, world.records)
    assert type(back.slotted.a) is np.float32 and back.slotted.b == [1, 2]
    assert back.hooks.n == 4 and back.hooks.handle() == 4  # rebuilt by its own hook
    assert back.suits is Suit and back.rule is double and back.dtype == np.float32
    assert back.blob == world.blob and back.big == 2**100 and np.isnan(back.nan)
    # The random generators continue exactly where they were.
    np.testing.assert_array_equal(back.rng.random(4), world.rng.random(4))
    assert back.py_rng.random() == world.py_rng.random()


def test_a_value_that_is_not_data_is_named_where_it_is() -> None:
    world = a_world()
    world.pieces[1].owner = lambda: None
    with pytest.raises(NotPlainError, match=r"state\.pieces\[1\]\.owner: a builtins:function"):
        plain_state.capture(world)
    world.pieces[1].owner = io.StringIO()
    with pytest.raises(
        NotPlainError, match=r"pieces\[1\]\.owner: a _io:StringIO is not plain data"
    ):
        plain_state.capture(world)


def test_pickled_parts_load_only_when_allowed_and_signed_here(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(signing.KEY_FILE_VARIABLE, str(tmp_path / "key"))
    world = a_world()
    world.pieces[0].owner = datetime.date(2026, 1, 2)  # a compiled class: pickled on request
    with pytest.raises(NotPlainError, match="date"):
        plain_state.capture(world)
    tree = plain_state.capture(world, allow_pickle=True)
    assert_plain(tree)

    with pytest.raises(PickleRefusedError, match=r"1 pickled part.*not allowed"):
        plain_state.restore(World(), tree)
    assert plain_state.restore(World(), tree, allow_pickle=True).pieces[0].owner == (
        datetime.date(2026, 1, 2)
    )
    monkeypatch.setenv(signing.KEY_FILE_VARIABLE, str(tmp_path / "another user's key"))
    with pytest.raises(PickleRefusedError, match="not written by this user"):
        plain_state.restore(World(), tree, allow_pickle=True)


def test_a_crafted_state_can_neither_import_nor_build_other_classes() -> None:
    tree = plain_state.capture(a_world())
    assert "antigravity" not in sys.modules
    for name in ("antigravity:Anything", "subprocess:Popen", "builtins:type"):
        tree["attrs"]["pieces"]["items"][0]["class"] = name
        with pytest.raises(StateError, match="a class the freshly built environments do not use"):
            plain_state.restore(World(), tree)
    assert "antigravity" not in sys.modules


@pytest.mark.parametrize(
    "tree",
    [
        b"a pickle",
        {"t": "no such kind", "id": 0},
        {"t": "ref", "id": 7},
        {"t": "list", "id": 0},
        {"t": "ndarray", "id": 0, "dtype": "'|O'", "shape": [1], "data": ""},
        {
            "t": "generator",
            "id": 0,
            "state": {"t": "dict", "id": 1, "items": [["bit_generator", "os"]]},
        },
    ],
    ids=["bytes", "kind", "ref", "list", "objects", "generator"],
)
def test_what_is_not_a_state_is_refused_by_name(tree: Any) -> None:
    with pytest.raises(StateError, match="not a saved state"):
        plain_state.restore(World(), tree)
