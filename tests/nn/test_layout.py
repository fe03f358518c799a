"""Batch layout: slot counts are rounded to few shapes, padding stays out of every row."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from entityrl.env import Batcher, CategoricalActionMask, CategoricalActionSpace, Entity, ObsSpace
from entityrl.env.observation import Observation
from entityrl.nn.layout import actor_inputs, build_layout, padded_slots


@given(st.integers(0, 10**7))
def test_padded_slots_rounds_up_by_at_most_a_sixteenth(n: int) -> None:
    padded = padded_slots(n)
    assert n <= padded <= max(n + 15, n + n // 16)
    assert padded_slots(padded) == padded


def test_batches_of_similar_size_share_a_few_shapes() -> None:
    sizes = {padded_slots(n) for n in range(24_000, 28_000)}
    assert len(sizes) <= 5


SPACE = ObsSpace({"A": Entity(["x"]), "B": Entity(["y", "z"])})
BATCHER = Batcher(SPACE, {"go": CategoricalActionSpace(["l", "r"])})


@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), min_size=1, max_size=60))
def test_padding_slots_belong_to_no_row(counts: list[tuple[int, int]]) -> None:
    obs = BATCHER.batch(
        [
            Observation(
                features={"A": np.zeros((a, 1)), "B": np.zeros((b, 2))},
                actions={"go": CategoricalActionMask(actor_types=["A"])},
            )
            for a, b in counts
        ]
    )
    for grids in (False, True):
        layout = build_layout(obs, ["A", "B"], global_token=False, grids=grids)
        entities = sum(a + b for a, b in counts)
        assert layout.num_slots == padded_slots(layout.num_slots) >= entities
        slot_row = layout.slot_row.numpy()
        # Every row's entities, and nothing else, map to the row; the rest to the extra row.
        assert np.array_equal(
            np.bincount(slot_row, minlength=len(counts) + 1)[:-1], [a + b for a, b in counts]
        )
        for r, start in enumerate(layout.row_slot):
            assert (slot_row[start : start + layout.lengths[r]] == r).all()
        if grids:
            assert sum(b.rows * b.width for b in layout.buckets) == layout.num_slots
        # Sole type: the one type's entities are the slots, in order (the embedding then skips
        # placing them); claimed for every packed unpadded batch of one type, never otherwise.
        for names in (["A"], ["B"], ["A", "B"]):
            for token in (False, True):
                layout = build_layout(obs, names, global_token=token, grids=grids)
                one_type = len(names) == 1 and not token
                assert layout.sole_type == (one_type and not grids and not layout.padded)
                if layout.sole_type:
                    positions = layout.type_positions[names[0]].numpy()
                    assert np.array_equal(positions, np.arange(layout.num_slots))
        # Slot per row: slot i is row i (row means are then the slots themselves).
        layout = build_layout(obs, ["A", "B"], global_token=False, grids=grids)
        one_each = [a + b for a, b in counts] == [1] * len(counts)
        assert layout.slot_per_row == (one_each and not grids and not layout.padded)
        if layout.slot_per_row:
            assert np.array_equal(layout.slot_row.numpy(), np.arange(len(counts)))


def test_slot_per_row_when_every_row_has_one_entity_and_no_padding() -> None:
    def obs(counts: list[tuple[int, int]]):  # type: ignore[no-untyped-def]
        return BATCHER.batch(
            [
                Observation(
                    features={"A": np.zeros((a, 1)), "B": np.zeros((b, 2))},
                    actions={"go": CategoricalActionMask(actor_types=["A"])},
                )
                for a, b in counts
            ]
        )

    one_each = [(i % 2, 1 - i % 2) for i in range(32)]  # 32 rows: no padding slots
    assert build_layout(obs(one_each), ["A", "B"], False, grids=False).slot_per_row
    assert not build_layout(obs(one_each), ["A", "B"], False, grids=True).slot_per_row
    assert not build_layout(obs(one_each[:30]), ["A", "B"], False, grids=False).slot_per_row
    assert not build_layout(obs(one_each), ["A", "B"], True, grids=False).slot_per_row
    # 32 entities in 32 rows, no padding, but one row empty and one with two.
    uneven = [*one_each[:-2], (0, 0), (1, 1)]
    assert not build_layout(obs(uneven), ["A", "B"], False, grids=False).slot_per_row


def test_categorical_actors_need_no_gather_only_when_every_slot_acts_in_order() -> None:
    def actors(counts: list[tuple[int, int]], actor_types: list[str]):  # type: ignore[no-untyped-def]
        obs = BATCHER.batch(
            [
                Observation(
                    features={"A": np.zeros((a, 1)), "B": np.zeros((b, 2))},
                    actions={"go": CategoricalActionMask(actor_types=actor_types)},
                )
                for a, b in counts
            ]
        )
        layout = build_layout(obs, ["A", "B"], False, grids=False)
        index = actor_inputs(obs.action_masks["go"], layout.row_slot, layout.num_slots).actors
        return None if index is None else index.tolist()

    assert actors([(1, 0)] * 32, ["A"]) is None  # slot i, row i, acts
    assert actors([(2, 0)] * 16, ["A"]) is None  # every slot acts, in order
    assert actors([(1, 1)] * 16, ["A"]) == list(range(0, 32, 2))  # B entities do not act
    assert actors([(1, 0)] * 30, ["A"]) == list(range(30))  # 30 rows, 32 slots (padding)
