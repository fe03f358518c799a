"""What the agent sees: entities within its vision, or the paper's fixed-size vectors.

Observation modes:

- ``entities``: one entity type per creature type (``dx, dy, hp, in_reach``), ``Item`` (stacks
  on the ground), ``Terrain`` (cells within ``observation.terrain_radius``) and ``Agent`` (the
  actor); the agent's meters, abilities, backpack, equipment, clock and buffs are global
  features.
- ``nearest1``: no entities but the agent; the global features add, for each creature type and
  each item type, the nearest one in sight (``present, dx, dy, hp`` or ``count``).
- ``nearest10_prey``: as ``nearest1`` but the 10 nearest of the ``observation.prey`` type.
- ``nearest10``: as ``nearest1`` but the 10 nearest creatures of any type (with their type).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from entityrl.env.spaces import Entity, ObsSpace
from entityrl.envs.survival.config import METERS, STATS, ItemKind, SurvivalConfigError
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

OBSERVATION_MODES = ("entities", "nearest1", "nearest10_prey", "nearest10")
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
        span = np.arange(-radius, radius + 1)
        self.terrain_offsets = np.stack(np.meshgrid(span, span, indexing="xy"), -1).reshape(-1, 2)
        self.global_names = self._global_names()
        self.obs_space = self._obs_space()

    # ---------------------------------------------------------------- declarations
    def _global_names(self) -> list[str]:
        r = self.rules
        items = r.items
        names = [m for m, used in zip(METERS, r.meters_used, strict=True) if used]
        names += list(STATS)
        names += [f"carrying_{i}" for i in items.names] + ["load"]
        names += [f"wearing_{items.names[i]}" for i in items.of_kind(ItemKind.equipment)]
        names += [f"durability_{slot}" for slot in items.slot_names]
        names += ["night"] if r.has_night else []
        names += [f"season_{s}" for s in r.season_names]
        names += [f"weather_{w}" for w in r.weather_names]
        names += [f"buff_{b}" for b in r.buffs.names]
        names += [f"on_{t}" for t in r.terrain_names]
        names += ["x", "y", "time"]
        return names + self._vector_names()

    def _vector_names(self) -> list[str]:
        r = self.rules
        creatures, items = r.creatures.names, r.items.names
        if self.mode == "entities":
            return []
        names: list[str] = []
        for k, creature in enumerate(creatures):
            many = 10 if (self.mode == "nearest10_prey" and k == r.prey) else 1
            if self.mode == "nearest10":
                continue
            for j in range(many):
                names += [f"{creature}{j}_{f}" for f in ("present", "dx", "dy", "hp")]
        if self.mode == "nearest10":
            for j in range(10):
                names += [f"creature{j}_{f}" for f in ("present", "dx", "dy", "hp")]
                names += [f"creature{j}_is_{c}" for c in creatures]
        for item in items:
            names += [f"{item}_ground_{f}" for f in ("present", "dx", "dy", "count")]
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
        s, r = state, self.rules
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
            wearing = np.zeros((n, len(items.names) + 1), dtype=np.float64)
            wearing[np.arange(n)[:, None], s.equipped] = 1.0
            full = np.maximum(items.durability[np.maximum(s.equipped, 0)], 1)
            parts += [wearing[:, equipment], np.where(s.equipped >= 0, s.durability / full, 0.0)]
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
        if self.mode != "entities":
            parts += self._vectors(s, sight)
        return np.concatenate([np.asarray(p, dtype=np.float32) for p in parts], axis=1)

    # ---------------------------------------------------------------- fixed-size vectors
    def _vectors(self, s: WorldState, sight: Sight) -> list[npt.NDArray[np.float64]]:
        r = self.rules
        table = r.creatures
        n = s.x.shape[0]
        slots = table.slots
        distance = np.where(sight.creatures_seen, sight.creature_distance, _FAR)
        # Sorting by distance * slots + slot breaks ties by slot and keeps the slot recoverable.
        key = distance * slots + np.arange(slots)
        parts: list[npt.NDArray[np.float64]] = []
        for k in range(len(table.names)):
            if self.mode == "nearest10":
                break
            start, end = int(table.block_start[k]), int(table.block_end[k])
            many = 10 if (self.mode == "nearest10_prey" and k == r.prey) else 1
            parts.append(self._slots(s, np.sort(key[:, start:end], axis=1), many, slots))
        if self.mode == "nearest10":
            nearest = np.sort(key, axis=1)
            parts.append(self._slots(s, nearest, 10, slots, with_type=True))
        drop_slots = s.drop_x.shape[1]
        ddist = np.where(sight.drops_seen, sight.drop_distance, _FAR)
        dkey = ddist * drop_slots + np.arange(drop_slots)
        for item in range(len(r.items.names)):
            best = np.where(s.drop_item == item, dkey, _FAR * drop_slots).min(axis=1)
            present = best < _FAR * drop_slots
            slot = np.where(present, best % drop_slots, 0)
            rows = np.arange(n)
            parts.append(
                np.stack(
                    [
                        present,
                        np.where(present, s.drop_x[rows, slot] - s.x, 0),
                        np.where(present, s.drop_y[rows, slot] - s.y, 0),
                        np.where(present, s.drop_count[rows, slot], 0),
                    ],
                    axis=1,
                )
            )
        return parts

    def _slots(
        self,
        s: WorldState,
        sorted_keys: IntArray,
        many: int,
        slots: int,
        with_type: bool = False,
    ) -> npt.NDArray[np.float64]:
        """Features of the ``many`` nearest creatures given keys sorted by distance."""
        n = s.x.shape[0]
        keys = np.full((n, many), _FAR * slots, dtype=np.int64)
        take = min(many, sorted_keys.shape[1])
        keys[:, :take] = sorted_keys[:, :take]
        present = keys < _FAR * slots
        slot = np.where(present, keys % slots, 0)
        rows = np.arange(n)[:, None]
        columns = [
            present,
            np.where(present, s.creature_x[rows, slot] - s.x[:, None], 0),
            np.where(present, s.creature_y[rows, slot] - s.y[:, None], 0),
            np.where(present, s.creature_hp[rows, slot], 0),
        ]
        if with_type:
            kinds = len(self.rules.creatures.names)
            onehot = _one_hot(self.slot_type[slot], kinds).reshape(n, many, kinds)
            columns += list(np.moveaxis(onehot * present[..., None], -1, 0))
        return np.stack(columns, axis=-1).reshape(n, -1)


def _one_hot(index: IntArray, size: int) -> npt.NDArray[np.float64]:
    out = np.zeros((*index.shape, size), dtype=np.float64)
    np.put_along_axis(out, index[..., None], 1.0, axis=-1)
    return out
