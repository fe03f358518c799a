"""Matches and group evaluations count games fairly: short games end first, so counting the
first games to end would favour them; every game slot gives its first games instead."""

from __future__ import annotations

from entityrl.training.match import GameSlots


def test_a_slot_of_long_games_is_waited_for() -> None:
    tally = GameSlots[str](slots=2, games=4)
    for result in ("short 1", "short 2", "short 3"):  # slot 0's games end quickly
        tally.add(0, result)
    assert not tally.full()
    tally.add(1, "long 1")
    assert not tally.full()
    tally.add(1, "long 2")
    assert tally.full()
    assert tally.results() == ["short 1", "short 2", "long 1", "long 2"]


def test_fewer_games_than_slots_take_the_first_game_of_the_first_slots() -> None:
    tally = GameSlots[int](slots=8, games=3)
    tally.add(5, 50)
    tally.add(0, 0)
    tally.add(1, 10)
    assert not tally.full()  # slot 2 has not finished a game
    tally.add(2, 20)
    assert tally.full() and tally.results() == [0, 10, 20]


def test_games_not_divisible_by_slots_are_cut_from_the_last_slot() -> None:
    tally = GameSlots[int](slots=4, games=6)  # 2 games from each of 3 slots
    for slot in range(4):
        tally.add(slot, slot * 10)
        tally.add(slot, slot * 10 + 1)
    assert tally.full() and tally.results() == [0, 1, 10, 11, 20, 21]
