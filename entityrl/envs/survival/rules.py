"""A checked :class:`WorldConfig` compiled into numpy lookup tables.

The simulation never looks at the configuration's dictionaries while it runs: every per-type
property becomes an array indexed by type number, so that a step is a handful of array
operations over all copies at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from entityrl.envs.survival.config import (
    METERS,
    PHASES,
    STATS,
    ItemKind,
    SurvivalConfigError,
    Wear,
    WorldConfig,
    meter_names,
)

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

SATIETY, THIRST, HP, TEMPERATURE = range(len(METERS))
VISION, ATTACK_RANGE, REACH, MOVE_SPEED, ATTACK, DEFENSE = range(len(STATS))


@dataclass
class CreatureTable:
    """Creature types (index ``k``) and the fixed block of slots each type's creatures live in."""

    names: list[str]
    glyphs: list[str]
    hp: FloatArray
    vision: IntArray
    move_speed: IntArray
    move_chance: FloatArray
    aggressive: BoolArray
    attack: FloatArray
    attackable: BoolArray
    collectable: BoolArray
    respawn: FloatArray
    block_start: IntArray
    block_end: IntArray
    kill_drops: IntArray  # (types, items)
    collect_drops: IntArray  # (types, items)

    @property
    def slots(self) -> int:
        return int(self.block_end[-1]) if len(self.names) else 0

    @property
    def slot_type(self) -> IntArray:
        return np.repeat(np.arange(len(self.names)), self.block_end - self.block_start)


@dataclass
class ItemTable:
    """Item types (index ``i``): what consuming gives, where and how long equipment is worn."""

    names: list[str]
    glyphs: list[str]
    kind: list[ItemKind]
    effects: FloatArray  # (items, meters)
    slot: IntArray  # equipment slot, -1 for other items
    durability: IntArray
    wear: list[Wear | None]
    slot_names: list[str]

    def of_kind(self, kind: ItemKind) -> IntArray:
        return np.array([i for i, k in enumerate(self.kind) if k is kind], dtype=np.int64)

    def worn_by(self, wear: Wear) -> BoolArray:
        return np.array([w is wear for w in self.wear], dtype=np.bool_)


@dataclass
class BuffTable:
    """Buffs (index ``b``): when each is active and what it changes.

    A buff is active when the phase, season, weather and terrain under the agent all allow it
    and, for equipment buffs, when one of its items is worn.
    """

    names: list[str]
    phase_ok: BoolArray  # (buffs, phases)
    season_ok: BoolArray  # (buffs, seasons)
    weather_ok: BoolArray  # (buffs, weathers)
    terrain_ok: BoolArray  # (buffs, terrains)
    needs_item: BoolArray  # (buffs,)
    given_by: BoolArray  # (items, buffs): wearing the item enables the buff
    meter_effects: FloatArray  # (buffs, meters): change per step
    stat_effects: FloatArray  # (buffs, stats): change while active


@dataclass
class Recipes:
    outputs: IntArray
    inputs: IntArray  # (recipes, items)
    delta: IntArray  # (recipes, items): backpack change


class Rules:
    """Everything about a world that does not change while it runs, as arrays."""

    def __init__(self, config: WorldConfig) -> None:
        self.config = config
        self.width = config.map.width
        self.height = config.map.height
        self.horizon = config.horizon
        self.terrain_names = list(config.terrain)
        self.terrain_glyphs = [t.glyph for t in config.terrain.values()]
        weights = np.array([t.weight for t in config.terrain.values()], dtype=np.float64)
        self.terrain_weights = weights / weights.sum()
        self.items = self._items(config)
        self.creatures = self._creatures(config)
        self.spawn_density = np.array(
            [[t.spawns.get(c, 0.0) for c in self.creatures.names] for t in config.terrain.values()],
            dtype=np.float64,
        ).reshape(len(self.terrain_names), len(self.creatures.names))
        self.recipes = self._recipes(config)
        self.season_names = [s.name for s in config.seasons]
        self.season_lengths = np.array([s.length for s in config.seasons], dtype=np.int64)
        self.season_respawn = np.array(
            [s.respawn_multiplier for s in config.seasons] or [1.0], dtype=np.float64
        )
        self.weather_names = list(config.weather.kinds)
        probs = np.array(list(config.weather.kinds.values()) or [1.0], dtype=np.float64)
        self.weather_probs = probs / probs.sum()
        self.day_length = config.clock.day
        self.cycle = config.clock.day + config.clock.night
        self.has_night = config.clock.night > 0
        self.buffs = self._buffs(config)
        agent = config.agent
        added = list(config.meters.values())
        self.meter_names = meter_names(config)
        self.meter_max = np.array(
            [agent.life_limit, agent.life_limit, agent.hp, max(agent.temperature, 1)]
            + [m.max for m in added],
            dtype=np.float64,
        )
        self.meter_start = np.array(
            [
                *self.meter_max[: len(METERS)],
                *(m.max if m.start is None else m.start for m in added),
            ],
            dtype=np.float64,
        )
        self.meters_used = np.array([True, True, True, agent.temperature > 0] + [True] * len(added))
        # Loss per step whatever the buffs; which meters kill at zero.
        self.meter_decay = np.array([0.0] * len(METERS) + [m.decay for m in added])
        self.meter_death = self.meters_used & np.array(
            [True] * len(METERS) + [m.death for m in added]
        )
        self.stat_base = np.array([getattr(agent, s) for s in STATS], dtype=np.float64)
        raises = np.clip(self.buffs.stat_effects, 0, None).sum(axis=0)
        self.stat_max = np.floor(self.stat_base + raises).astype(np.int64)
        self.capacity = agent.backpack_capacity
        self.event_names = self._events()
        self.event_index = {name: e for e, name in enumerate(self.event_names)}
        for name, event in config.tasks.items():
            if event not in self.event_index:
                raise SurvivalConfigError(
                    f"{config.name}: field tasks.{name}: {event!r} cannot happen in this world; "
                    f"expected one of: {', '.join(self.event_names)}"
                )
        self.tasks = {name: self.event_index[event] for name, event in config.tasks.items()}
        prey = config.observation.prey
        self.prey = self.creatures.names.index(prey) if prey is not None else None

    # ---------------------------------------------------------------- builders
    @staticmethod
    def _items(config: WorldConfig) -> ItemTable:
        items = list(config.items.values())
        meters = meter_names(config)
        slot_names = list(dict.fromkeys(i.slot for i in items if i.kind is ItemKind.equipment))
        return ItemTable(
            names=list(config.items),
            glyphs=[i.glyph for i in items],
            kind=[i.kind for i in items],
            effects=np.array(
                [[i.effects.get(m, 0.0) for m in meters] for i in items], dtype=np.float64
            ).reshape(len(items), len(meters)),
            slot=np.array(
                [slot_names.index(i.slot) if i.kind is ItemKind.equipment else -1 for i in items],
                dtype=np.int64,
            ),
            durability=np.array([i.durability for i in items], dtype=np.int64),
            wear=[i.wear if i.kind is ItemKind.equipment else None for i in items],
            slot_names=slot_names,
        )

    def _creatures(self, config: WorldConfig) -> CreatureTable:
        specs = list(config.creatures.values())
        names = list(config.creatures)
        counts = np.array([c.max_count for c in specs], dtype=np.int64)
        ends = np.cumsum(counts)
        item_index = {name: i for i, name in enumerate(self.items.names)}

        def drops(action: str) -> IntArray:
            table = np.zeros((len(names), len(item_index)), dtype=np.int64)
            for k, name in enumerate(names):
                entry = config.drop_table.get(name)
                for item, count in (getattr(entry, action) if entry else {}).items():
                    table[k, item_index[item]] = count
            return table

        collect_drops = drops("collect")
        return CreatureTable(
            names=names,
            glyphs=[c.glyph for c in specs],
            hp=np.array([c.hp for c in specs], dtype=np.float64),
            vision=np.array([c.vision for c in specs], dtype=np.int64),
            move_speed=np.array([c.move_speed for c in specs], dtype=np.int64),
            move_chance=np.array([c.move_chance for c in specs], dtype=np.float64),
            aggressive=np.array([c.aggressive for c in specs], dtype=np.bool_),
            attack=np.array([c.attack for c in specs], dtype=np.float64),
            attackable=np.array([c.attackable for c in specs], dtype=np.bool_),
            collectable=collect_drops.sum(axis=1) > 0,
            respawn=np.array([c.respawn for c in specs], dtype=np.float64),
            block_start=ends - counts,
            block_end=ends,
            kill_drops=drops("kill"),
            collect_drops=collect_drops,
        )

    def _recipes(self, config: WorldConfig) -> Recipes:
        index = {name: i for i, name in enumerate(self.items.names)}
        n_items = len(index)
        inputs = np.zeros((len(config.recipes), n_items), dtype=np.int64)
        outputs = np.zeros((len(config.recipes), n_items), dtype=np.int64)
        for r, recipe in enumerate(config.recipes):
            for item, count in recipe.inputs.items():
                inputs[r, index[item]] = count
            outputs[r, index[recipe.output]] = recipe.count
        return Recipes(
            outputs=np.array([index[r.output] for r in config.recipes], dtype=np.int64),
            inputs=inputs,
            delta=outputs - inputs,
        )

    def _buffs(self, config: WorldConfig) -> BuffTable:
        specs = list(config.buffs.values())
        names = list(config.buffs)
        meters = meter_names(config)

        def allowed(chosen: list[list[str]], options: list[str]) -> BoolArray:
            table = np.ones((len(chosen), max(len(options), 1)), dtype=np.bool_)
            for b, subset in enumerate(chosen):
                if subset:
                    table[b] = [o in subset for o in options] or [False]
            return table

        given_by = np.zeros((len(self.items.names), len(names)), dtype=np.bool_)
        for i, item in enumerate(config.items.values()):
            for buff in item.buffs:
                given_by[i, names.index(buff)] = True
        return BuffTable(
            names=names,
            phase_ok=allowed([b.phases for b in specs], list(PHASES)),
            season_ok=allowed([b.seasons for b in specs], self.season_names),
            weather_ok=allowed([b.weather for b in specs], self.weather_names),
            terrain_ok=allowed([b.terrain for b in specs], self.terrain_names),
            needs_item=given_by.any(axis=0),
            given_by=given_by,
            meter_effects=np.array(
                [[b.effects.get(m, 0.0) for m in meters] for b in specs], dtype=np.float64
            ).reshape(len(specs), len(meters)),
            stat_effects=np.array(
                [[b.effects.get(s, 0.0) for s in STATS] for b in specs], dtype=np.float64
            ).reshape(len(specs), len(STATS)),
        )

    def _events(self) -> list[str]:
        items, creatures = self.items.names, self.creatures.names
        consumables = [items[i] for i in self.items.of_kind(ItemKind.consumable)]
        equipment = [items[i] for i in self.items.of_kind(ItemKind.equipment)]
        return [
            *(f"consume:{i}" for i in consumables),
            *(f"synthesize:{items[o]}" for o in self.recipes.outputs),
            *(f"equip:{i}" for i in equipment),
            *(f"pickup:{i}" for i in items),
            *(f"attack:{c}" for k, c in enumerate(creatures) if self.creatures.attackable[k]),
            *(f"kill:{c}" for k, c in enumerate(creatures) if self.creatures.attackable[k]),
            *(f"collect:{c}" for k, c in enumerate(creatures) if self.creatures.collectable[k]),
        ]

    def event_table(self, kind: str, names: list[str]) -> IntArray:
        """Event number of ``kind:name`` for each name (-1 where there is no such event)."""
        return np.array([self.event_index.get(f"{kind}:{n}", -1) for n in names], dtype=np.int64)

    # ---------------------------------------------------------------- time
    def phase(self, t: IntArray) -> IntArray:
        """0 by day, 1 by night."""
        if not self.has_night:
            return np.zeros_like(t)
        return ((t % self.cycle) >= self.day_length).astype(np.int64)

    def season(self, t: IntArray) -> IntArray:
        if not self.season_names:
            return np.zeros_like(t)
        year = int(self.season_lengths.sum())
        return np.searchsorted(np.cumsum(self.season_lengths), t % year, side="right")
