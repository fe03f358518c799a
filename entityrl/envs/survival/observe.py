"""What the agent sees: entities within its vision, the paper's raw structured vector (its
Figure 6), or the paper's fixed-size states (its Figure 7).

Observation modes:

- ``entities``: one entity type per creature type (``dx, dy, hp, in_reach``), ``Item`` (stacks
  on the ground), ``Terrain`` (cells within ``observation.terrain_radius``) and ``Agent`` (the
  actor); the agent's meters, abilities, backpack, equipment, clock and buffs are global
  features.
- ``raw``: Figure 6's seven blocks, all as global features: the agent's meters, abilities and
  the result of its last action; the backpack as ``backpack_capacity`` slots of ``(id,
  durability)``; each equipment slot's ``(id, durability)``; one flag per buff; every creature
  in sight as ``(type, x, y, hp)`` and three reserved zeros, nearest first, one entry per
  creature slot of the world; every unit on the ground in sight as ``(type, x, y)``, nearest
  first, ``map.drop_slots`` entries; each cell of the largest vision window as ``(x, y,
  terrain, weather)``. Ids count from 1 (0: empty entry); positions are map coordinates.
- Fixed-size states, Figure 7's five blocks (agent state, backpack, arm, objects, materials):
  the agent's meters, abilities and last action result; the units of each item carried;
  whether each piece of equipment is worn; for each creature type the nearest creature
  (``dx, dy, hp``, all 0 when none is in sight); for each item the nearest stack on the
  ground (``dx, dy, count``). ``nearest1`` keeps one of each; ``nearest10_prey`` ten of the
  ``observation.prey`` type; ``nearest10`` ten of every creature type and of every item.

In every mode but ``entities`` the only entity is the ``Agent`` (the actor of the simple
actions).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from entityrl.env.spaces import Entity, ObsSpace
from entityrl.envs.survival.config import STATS, ItemKind, SurvivalConfigError
from entityrl.envs.survival.rules import (
    ATTACK_RANGE,
    REACH,
    VISION,
    BoolArray,
    IntArray,
    Rules,
)
from entityrl.envs.survival.state import WorldState
from entityrl.ragged import RaggedArray

OBSERVATION_MODES = ("entities", "raw", "nearest1", "nearest10_prey", "nearest10")
FIXED_MODES = ("nearest1", "nearest10_prey", "nearest10")
_RESERVED = 3  # zeros after each creature of the raw vector (Figure 6: 7 numbers per creature)
_FAR = 1 << 20  # distance of what is out of sight, larger than any map


@dataclass
class Sight:
    """What each copy's agent sees this step and what it could act on, with the index each
    seen creature and item stack has in the observation row."""

    creature_distance: IntArray  # (n, creature slots), Chebyshev
    creatures_seen: BoolArray
    drop_distance: IntArray  # (n, drop slots)
    drops_seen: BoolArray
    attackable: BoolArray  # (n, creature slots) targets of an attack now
    collectable: BoolArray
    pickable: BoolArray  # (n, drop slots)
    creature_index: IntArray  # position in the row where seen (entities mode)
    drop_index: IntArray
    entity_count: IntArray  # (n,) entities in the row


class Observer:
    """Builds one observation mode's features from a :class:`WorldState`."""

    def __init__(self, rules: Rules, mode: str = "entities") -> None:
        if mode not in OBSERVATION_MODES:
            raise ValueError(
                f"{rules.config.name}: unknown observation {mode!r}; expected one of "
                f"{', '.join(OBSERVATION_MODES)}"
            )
        if mode == "nearest10_prey" and rules.prey is None:
            raise SurvivalConfigError(
                f"{rules.config.name}: field observation.prey: observation 'nearest10_prey' needs "
                "the prey's creature type, got none"
            )
        self.rules = rules
        self.mode = mode
        table = rules.creatures
        self.slot_type = table.slot_type
        self.can_attack = table.attackable[self.slot_type]
        self.can_collect = table.collectable[self.slot_type]
        radius = rules.config.observation.terrain_radius
        self.terrain_offsets = _window(radius)
        # The raw vector's block 7 covers the widest vision the buffs allow.
        self.raw_window = _window(int(rules.stat_max[VISION]))
        self.global_names = self._global_names()
        self.obs_space = self._obs_space()

    # ---------------------------------------------------------------- declarations
    def _global_names(self) -> list[str]:
        if self.mode == "raw":
            return self._raw_names()
        if self.mode in FIXED_MODES:
            return self._fixed_names()
        r = self.rules
        items = r.items
        names = [m for m, used in zip(r.meter_names, r.meters_used, strict=True) if used]
        names += list(STATS)
        names += [f"carrying_{i}" for i in items.names] + ["load"]
        names += [f"wearing_{items.names[i]}" for i in items.of_kind(ItemKind.equipment)]
        names += [f"durability_{slot}" for slot in items.slot_names]
        names += ["night"] if r.has_night else []
        names += [f"season_{s}" for s in r.season_names]
        names += [f"weather_{w}" for w in r.weather_names]
        names += [f"buff_{b}" for b in r.buffs.names]
        names += [f"on_{t}" for t in r.terrain_names]
        return [*names, "x", "y", "time"]

    def _agent_names(self) -> list[str]:
        """Figure 6's block 1 and Figure 7's agent state: meters, abilities, action result."""
        r = self.rules
        meters = [m for m, used in zip(r.meter_names, r.meters_used, strict=True) if used]
        return [*meters, *STATS, "action_ok"]

    def _fixed_names(self) -> list[str]:
        r = self.rules
        items = r.items
        names = self._agent_names()
        names += [f"carrying_{i}" for i in items.names]
        names += [f"wearing_{items.names[i]}" for i in items.of_kind(ItemKind.equipment)]
        for k, creature in enumerate(r.creatures.names):
            for j in range(self._many_creatures(k)):
                names += [f"{creature}{j}_{f}" for f in ("dx", "dy", "hp")]
        for item in items.names:
            for j in range(self._many_items()):
                names += [f"{item}{j}_ground_{f}" for f in ("dx", "dy", "count")]
        return names

    def _many_creatures(self, kind: int) -> int:
        """How many of a creature type a fixed-size state lists."""
        if self.mode == "nearest10" or (self.mode == "nearest10_prey" and kind == self.rules.prey):
            return 10
        return 1

    def _many_items(self) -> int:
        return 10 if self.mode == "nearest10" else 1

    def _raw_names(self) -> list[str]:
        r = self.rules
        names = self._agent_names()
        for j in range(r.capacity):
            names += [f"backpack{j}_id", f"backpack{j}_durability"]
        for slot in r.items.slot_names:
            names += [f"{slot}_id", f"{slot}_durability"]
        names += [f"buff_{b}" for b in r.buffs.names]
        for j in range(r.creatures.slots):
            names += [f"object{j}_{f}" for f in ("type", "x", "y", "hp")]
            names += [f"object{j}_reserved{k}" for k in range(_RESERVED)]
        for j in range(r.config.map.drop_slots):
            names += [f"material{j}_{f}" for f in ("type", "x", "y")]
        for c in range(self.raw_window.shape[0]):
            names += [f"cell{c}_{f}" for f in ("x", "y", "terrain", "weather")]
        return names

    def _obs_space(self) -> ObsSpace:
        r = self.rules
        entities = {"Agent": Entity(["x", "y"])}
        if self.mode == "entities":
            for name in r.creatures.names:
                entities[name] = Entity(["dx", "dy", "hp", "in_reach"])
            entities["Item"] = Entity(["dx", "dy", "count", *(f"is_{i}" for i in r.items.names)])
            entities["Terrain"] = Entity(["dx", "dy", *(f"is_{t}" for t in r.terrain_names)])
        return ObsSpace(entities=entities, global_features=self.global_names)

    # ---------------------------------------------------------------- per step
    def sight(self, state: WorldState) -> Sight:
        s = state
        vision = s.stats[:, VISION][:, None]
        cdist = np.maximum(np.abs(s.creature_x - s.x[:, None]), np.abs(s.creature_y - s.y[:, None]))
        cseen = s.alive & (cdist <= vision)
        ddist = np.maximum(np.abs(s.drop_x - s.x[:, None]), np.abs(s.drop_y - s.y[:, None]))
        dseen = s.dropped & (ddist <= vision)
        reach = s.stats[:, REACH][:, None]
        room = s.backpack.sum(axis=1) < self.rules.capacity
        seen_creatures = cseen.sum(axis=1)
        if self.mode == "entities":
            creature_index = np.cumsum(cseen, axis=1)
            drop_index = seen_creatures[:, None] + np.cumsum(dseen, axis=1)
            entity_count = 1 + seen_creatures + dseen.sum(axis=1) + self._terrain_cells(s).sum(1)
        else:
            # Only the Agent is an entity: nothing else has a place in the row.
            creature_index = np.zeros_like(cdist)
            drop_index = np.zeros_like(ddist)
            entity_count = np.ones(s.x.shape[0], dtype=np.int64)
        return Sight(
            creature_distance=cdist,
            creatures_seen=cseen,
            drop_distance=ddist,
            drops_seen=dseen,
            attackable=cseen & self.can_attack & (cdist <= s.stats[:, ATTACK_RANGE][:, None]),
            collectable=cseen & self.can_collect & (cdist <= reach),
            pickable=dseen & (ddist <= reach) & room[:, None],
            creature_index=creature_index,
            drop_index=drop_index,
            entity_count=entity_count,
        )

    def _terrain_cells(self, s: WorldState) -> BoolArray:
        """Which of the terrain window's cells lie on the map, per copy."""
        r = self.rules
        x = s.x[:, None] + self.terrain_offsets[:, 0]
        y = s.y[:, None] + self.terrain_offsets[:, 1]
        return (x >= 0) & (x < r.width) & (y >= 0) & (y < r.height)

    def features(self, state: WorldState, sight: Sight) -> dict[str, RaggedArray]:
        s = state
        n = s.x.shape[0]
        ones = np.ones(n, dtype=np.int64)
        agent = np.stack([s.x, s.y], axis=1).astype(np.float32)
        out = {"Agent": RaggedArray(agent, ones)}
        if self.mode != "entities":
            return out
        table = self.rules.creatures
        rx = (s.creature_x - s.x[:, None]).astype(np.float32)
        ry = (s.creature_y - s.y[:, None]).astype(np.float32)
        in_reach = (sight.attackable | sight.collectable).astype(np.float32)
        all_features = np.stack([rx, ry, s.creature_hp.astype(np.float32), in_reach], axis=-1)
        for k, name in enumerate(table.names):
            block = slice(int(table.block_start[k]), int(table.block_end[k]))
            seen = sight.creatures_seen[:, block]
            out[name] = RaggedArray(all_features[:, block][seen], seen.sum(axis=1))
        out["Item"] = self._items(s, sight)
        out["Terrain"] = self._terrain(s)
        return out

    def _items(self, s: WorldState, sight: Sight) -> RaggedArray:
        seen = sight.drops_seen
        n_items = len(self.rules.items.names)
        item = s.drop_item[seen]
        data = np.zeros((item.shape[0], 3 + n_items), dtype=np.float32)
        data[:, 0] = (s.drop_x - s.x[:, None])[seen]
        data[:, 1] = (s.drop_y - s.y[:, None])[seen]
        data[:, 2] = s.drop_count[seen]
        data[np.arange(item.shape[0]), 3 + item] = 1.0
        return RaggedArray(data, seen.sum(axis=1))

    def _terrain(self, s: WorldState) -> RaggedArray:
        inside = self._terrain_cells(s)
        rows, cells = np.nonzero(inside)
        dx, dy = self.terrain_offsets[cells, 0], self.terrain_offsets[cells, 1]
        kinds = s.terrain[rows, s.y[rows] + dy, s.x[rows] + dx]
        data = np.zeros((rows.shape[0], 2 + len(self.rules.terrain_names)), dtype=np.float32)
        data[:, 0] = dx
        data[:, 1] = dy
        data[np.arange(rows.shape[0]), 2 + kinds] = 1.0
        return RaggedArray(data, inside.sum(axis=1))

    def global_features(self, state: WorldState, sight: Sight) -> npt.NDArray[np.float32]:
        if self.mode == "raw":
            parts = self._raw(state, sight)
        elif self.mode in FIXED_MODES:
            parts = self._fixed(state, sight)
        else:
            parts = self._entity_globals(state)
        return np.concatenate([np.asarray(p, dtype=np.float32) for p in parts], axis=1)

    def _entity_globals(self, s: WorldState) -> list[npt.NDArray[np.float64]]:
        r = self.rules
        n = s.x.shape[0]
        items = r.items
        parts = [
            (s.meters / r.meter_max)[:, r.meters_used],
            s.stats,
            s.backpack,
            s.backpack.sum(axis=1, keepdims=True) / r.capacity,
        ]
        equipment = items.of_kind(ItemKind.equipment)
        if equipment.size:
            full = np.maximum(items.durability[np.maximum(s.equipped, 0)], 1)
            parts += [self._wearing(s), np.where(s.equipped >= 0, s.durability / full, 0.0)]
        if r.has_night:
            parts.append(r.phase(s.t)[:, None])
        if r.season_names:
            parts.append(_one_hot(r.season(s.t), len(r.season_names)))
        if r.weather_names:
            parts.append(_one_hot(s.weather, len(r.weather_names)))
        parts += [
            s.buffs,
            _one_hot(s.terrain[np.arange(n), s.y, s.x], len(r.terrain_names)),
            np.stack([s.x / r.width, s.y / r.height, s.t / r.horizon], axis=1),
        ]
        return parts

    def _wearing(self, s: WorldState) -> npt.NDArray[np.float64]:
        """Whether each piece of equipment is worn, (n, equipment items)."""
        items = self.rules.items
        n = s.x.shape[0]
        wearing = np.zeros((n, len(items.names) + 1), dtype=np.float64)
        wearing[np.arange(n)[:, None], s.equipped] = 1.0  # -1 (nothing) lands in the last
        return wearing[:, items.of_kind(ItemKind.equipment)]

    # ---------------------------------------------------------------- Figure 7
    def _fixed(self, s: WorldState, sight: Sight) -> list[npt.NDArray[np.float64]]:
        r = self.rules
        table = r.creatures
        parts = [
            (s.meters / r.meter_max)[:, r.meters_used],
            s.stats,
            s.action_ok[:, None],
            s.backpack,
            self._wearing(s),
        ]
        slots = table.slots
        key = np.where(sight.creatures_seen, sight.creature_distance, _FAR) * slots
        key = key + np.arange(slots)  # ties broken by slot; the slot stays recoverable
        for k in range(len(table.names)):
            start, end = int(table.block_start[k]), int(table.block_end[k])
            nearest = _nearest(np.sort(key[:, start:end], axis=1), self._many_creatures(k), slots)
            parts.append(
                _gather(nearest, slots, s.creature_x - s.x[:, None], s.creature_y - s.y[:, None],
                        s.creature_hp)
            )  # fmt: skip
        drops = s.drop_x.shape[1]
        dkey = np.where(sight.drops_seen, sight.drop_distance, _FAR) * drops + np.arange(drops)
        for item in range(len(r.items.names)):
            mine = np.where(s.drop_item == item, dkey, _FAR * drops)
            nearest = _nearest(np.sort(mine, axis=1), self._many_items(), drops)
            parts.append(
                _gather(nearest, drops, s.drop_x - s.x[:, None], s.drop_y - s.y[:, None],
                        s.drop_count)
            )  # fmt: skip
        return parts

    # ---------------------------------------------------------------- Figure 6
    def _raw(self, s: WorldState, sight: Sight) -> list[npt.NDArray[np.float64]]:
        r = self.rules
        n = s.x.shape[0]
        rows = np.arange(n)[:, None]
        parts: list[npt.NDArray[np.float64]] = [
            s.meters[:, r.meters_used],
            s.stats,
            s.action_ok[:, None],
        ]
        # Block 2: the backpack unit by unit, items in order; a partly used unit comes first.
        ends = np.cumsum(s.backpack, axis=1)
        unit = np.arange(r.capacity)
        item = (unit[None, None, :] >= ends[:, :, None]).sum(axis=1)  # (n, capacity)
        held = unit[None, :] < ends[:, -1:]
        item = np.minimum(item, len(r.items.names) - 1)
        first = unit[None, :] == np.take_along_axis(ends - s.backpack, item, axis=1)
        worn = np.take_along_axis(s.worn, item, axis=1)
        durability = np.where(first & (worn > 0), worn, r.items.durability[item])
        parts.append(_pairs(np.where(held, item + 1, 0), np.where(held, durability, 0)))
        # Block 3: equipment; block 4: buffs.
        on = s.equipped >= 0
        parts += [_pairs(s.equipped + 1, np.where(on, s.durability, 0)), s.buffs]
        # Block 5: creatures in sight, nearest first.
        slots = r.creatures.slots
        key = np.where(sight.creatures_seen, sight.creature_distance, _FAR) * slots
        nearest = _nearest(np.sort(key + np.arange(slots), axis=1), slots, slots)
        kind = np.where(nearest >= 0, self.slot_type[np.maximum(nearest, 0)] + 1, 0)
        coords = _gather(nearest, slots, s.creature_x, s.creature_y, s.creature_hp)
        blocks = np.concatenate(
            [kind[..., None], coords.reshape(n, slots, 3), np.zeros((n, slots, _RESERVED))], -1
        )
        parts.append(blocks.reshape(n, -1))
        # Block 6: every unit on the ground in sight, nearest first (a stack gives one entry
        # per unit).
        drops = s.drop_x.shape[1]
        dkey = np.where(sight.drops_seen, sight.drop_distance, _FAR) * drops + np.arange(drops)
        order = np.argsort(dkey, axis=1)
        counts = np.take_along_axis(np.where(sight.drops_seen, s.drop_count, 0), order, axis=1)
        ends = np.cumsum(counts, axis=1)
        entry = np.arange(drops)
        stack = np.minimum((entry[None, None, :] >= ends[:, :, None]).sum(axis=1), drops - 1)
        present = entry[None, :] < ends[:, -1:]
        slot = np.take_along_axis(order, stack, axis=1)
        material = np.stack(
            [s.drop_item[rows, slot] + 1, s.drop_x[rows, slot], s.drop_y[rows, slot]], axis=-1
        )
        parts.append((material * present[..., None]).reshape(n, -1))
        # Block 7: each cell of the widest vision window: position, terrain, weather.
        x = s.x[:, None] + self.raw_window[:, 0]
        y = s.y[:, None] + self.raw_window[:, 1]
        inside = (x >= 0) & (x < r.width) & (y >= 0) & (y < r.height)
        inside &= np.abs(self.raw_window).max(axis=1) <= s.stats[:, VISION][:, None]
        terrain = s.terrain[rows, np.clip(y, 0, r.height - 1), np.clip(x, 0, r.width - 1)]
        weather_id = s.weather + 1 if r.weather_names else np.zeros_like(s.weather)
        weather = np.broadcast_to(weather_id[:, None], x.shape)
        cells = np.stack([x, y, terrain + 1, weather], axis=-1) * inside[..., None]
        parts.append(cells.reshape(n, -1))
        return parts


def _window(radius: int) -> IntArray:
    """The offsets (dx, dy) of a square of cells around the agent, row by row."""
    span = np.arange(-radius, radius + 1)
    return np.stack(np.meshgrid(span, span, indexing="xy"), -1).reshape(-1, 2)


def _nearest(sorted_keys: IntArray, many: int, slots: int) -> IntArray:
    """The slots of the ``many`` nearest (keys sorted by distance * slots + slot), -1 for
    entries with nothing in sight."""
    n = sorted_keys.shape[0]
    keys = np.full((n, many), _FAR * slots, dtype=np.int64)
    take = min(many, sorted_keys.shape[1])
    keys[:, :take] = sorted_keys[:, :take]
    return np.where(keys < _FAR * slots, keys % slots, -1)


def _gather(nearest: IntArray, slots: int, *columns: npt.NDArray) -> npt.NDArray[np.float64]:
    """Each column's value at the chosen slots (0 where there is none), interleaved per slot."""
    rows = np.arange(nearest.shape[0])[:, None]
    slot = np.maximum(nearest, 0)
    values = [np.where(nearest >= 0, c[rows, slot], 0) for c in columns]
    return np.stack(values, axis=-1).reshape(nearest.shape[0], -1).astype(np.float64)


def _pairs(a: IntArray, b: IntArray) -> npt.NDArray[np.float64]:
    """Two (n, k) arrays interleaved as (n, 2k): a0, b0, a1, b1, ..."""
    return np.stack([a, b], axis=-1).reshape(a.shape[0], -1).astype(np.float64)


def _one_hot(index: IntArray, size: int) -> npt.NDArray[np.float64]:
    out = np.zeros((*index.shape, size), dtype=np.float64)
    np.put_along_axis(out, index[..., None], 1.0, axis=-1)
    return out
