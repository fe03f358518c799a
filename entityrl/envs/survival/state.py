"""The state of every copy of a survival world, as arrays with the copy on the first axis."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from entityrl.envs.survival.config import STATS
from entityrl.envs.survival.rules import BoolArray, FloatArray, IntArray, Rules


@dataclass
class WorldState:
    """All copies' state. Creatures live in fixed slots (one block of slots per type); item
    stacks lying on the ground live in ``drop_*`` slots."""

    terrain: IntArray  # (n, height, width) terrain type of each cell
    x: IntArray  # (n,) agent position
    y: IntArray
    meters: FloatArray  # (n, meters)
    stats: IntArray  # (n, stats) current abilities, buffs included
    buffs: BoolArray  # (n, buffs) which buffs are active
    backpack: IntArray  # (n, items) units carried
    worn: IntArray  # (n, items) durability left of the one partly used unit carried (0: none)
    equipped: IntArray  # (n, slots) item worn in each slot, -1 for none
    durability: IntArray  # (n, slots) durability left of the worn items
    t: IntArray  # (n,) steps since the episode started
    weather: IntArray  # (n,)
    creature_x: IntArray  # (n, creature slots)
    creature_y: IntArray
    creature_hp: FloatArray
    alive: BoolArray
    drop_x: IntArray  # (n, drop slots)
    drop_y: IntArray
    drop_item: IntArray
    drop_count: IntArray
    drop_age: IntArray
    dropped: BoolArray  # which drop slots hold a stack
    event_counts: IntArray  # (n, events) how often each event happened this episode
    action_ok: BoolArray  # (n,) whether the last action was carried out in full

    @classmethod
    def allocate(cls, rules: Rules, n: int) -> WorldState:
        items = len(rules.items.names)
        slots = rules.creatures.slots
        drops = rules.config.map.drop_slots

        def ints(*shape: int) -> IntArray:
            return np.zeros((n, *shape), dtype=np.int64)

        return cls(
            terrain=ints(rules.height, rules.width),
            x=ints(),
            y=ints(),
            meters=np.zeros((n, len(rules.meter_max)), dtype=np.float64),
            stats=ints(len(STATS)),
            buffs=np.zeros((n, len(rules.buffs.names)), dtype=np.bool_),
            backpack=ints(items),
            worn=ints(items),
            equipped=np.full((n, len(rules.items.slot_names)), -1, dtype=np.int64),
            durability=ints(len(rules.items.slot_names)),
            t=ints(),
            weather=ints(),
            creature_x=ints(slots),
            creature_y=ints(slots),
            creature_hp=np.zeros((n, slots), dtype=np.float64),
            alive=np.zeros((n, slots), dtype=np.bool_),
            drop_x=ints(drops),
            drop_y=ints(drops),
            drop_item=ints(drops),
            drop_count=ints(drops),
            drop_age=ints(drops),
            dropped=np.zeros((n, drops), dtype=np.bool_),
            event_counts=ints(len(rules.event_names)),
            action_ok=np.ones(n, dtype=np.bool_),
        )
