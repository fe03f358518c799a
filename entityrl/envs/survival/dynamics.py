"""One step of every copy of a survival world: the agent's action, the creatures, the clock, the
buffs. Every rule is an array operation over the copies concerned; nothing loops over copies.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from entityrl.envs.survival.config import Wear
from entityrl.envs.survival.rules import (
    ATTACK,
    DEFENSE,
    HP,
    BoolArray,
    FloatArray,
    IntArray,
    Rules,
)
from entityrl.envs.survival.state import WorldState
from entityrl.envs.survival.worldgen import generate, random_cells

# The eight neighbouring cells and staying put, for creatures wandering at random.
_WANDER = np.array([(dx, dy) for dx in (-1, 0, 1) for dy in (-1, 0, 1)], dtype=np.int64)


class Verb(enum.IntEnum):
    """What the agent does in a step."""

    IDLE = 0
    MOVE = 1
    ATTACK = 2
    COLLECT = 3
    PICKUP = 4
    CONSUME = 5
    SYNTHESIZE = 6
    EQUIP = 7
    UNEQUIP = 8
    DISCARD = 9


@dataclass
class Intent:
    """The action of every copy, already checked legal: ``verb``; its item, recipe or slot
    (``param``); the creature or drop slot it aims at (``target``); the move (``dx``, ``dy``);
    how many units to consume, pick up or discard, or how many times to craft (``count``, the
    second parameter of the paper's Figure 9; ``None``: one, and a pickup takes the whole
    stack)."""

    verb: IntArray
    param: IntArray
    target: IntArray
    dx: IntArray
    dy: IntArray
    count: IntArray | None = None


@dataclass
class StepOutcome:
    """What happened in a step: the event of each copy (-1 for none, see Rules.event_names),
    meters refilled by consuming, and which agents died."""

    events: IntArray
    gained: FloatArray
    died: BoolArray

    @classmethod
    def nothing(cls, n: int, meters: int) -> StepOutcome:
        return cls(
            np.full(n, -1, dtype=np.int64),
            np.zeros((n, meters), dtype=np.float64),
            np.zeros(n, dtype=np.bool_),
        )


class Simulation:
    """Applies the world's rules to a :class:`WorldState`."""

    def __init__(self, rules: Rules, state: WorldState, rng: np.random.Generator) -> None:
        self.rules = rules
        self.state = state
        self.rng = rng
        table = rules.creatures
        slot_type = table.slot_type
        self.slot_type = slot_type
        self.mobile = np.flatnonzero(table.move_speed[slot_type] > 0)
        self.mobile_type = slot_type[self.mobile]
        self.respawning = np.flatnonzero(table.respawn > 0)
        items = rules.items
        self.wear_step = items.worn_by(Wear.step)
        self.wear_attack = items.worn_by(Wear.attack)
        self.wear_hit = items.worn_by(Wear.hit)
        self.consume_event = rules.event_table("consume", items.names)
        self.equip_event = rules.event_table("equip", items.names)
        self.pickup_event = rules.event_table("pickup", items.names)
        self.synth_event = rules.event_table(
            "synthesize", [items.names[o] for o in rules.recipes.outputs]
        )
        self.attack_event = rules.event_table("attack", table.names)
        self.kill_event = rules.event_table("kill", table.names)
        self.collect_event = rules.event_table("collect", table.names)

    # ---------------------------------------------------------------- episodes
    def reset(self, envs: IntArray, rng: np.random.Generator | None = None) -> None:
        """New episodes in copies ``envs``, their worlds drawn from ``rng`` (by default the
        simulation's generator)."""
        generate(self.rules, self.state, envs, self.rng if rng is None else rng)
        self.refresh(envs)

    def step(self, intent: Intent) -> StepOutcome:
        n = intent.verb.shape[0]
        events = np.full(n, -1, dtype=np.int64)
        gained = np.zeros((n, len(self.rules.meter_max)), dtype=np.float64)
        s, r = self.state, self.rules
        s.action_ok[:] = True
        self._act(intent, events, gained)
        self._advance_clock()
        if self.wear_step.any():
            self._wear(np.arange(n), self.wear_step, 1)
        # Buffs and abilities as of the new time, equipment and place, before the creatures act.
        self.refresh(np.arange(n))
        self._creatures_act()
        change = s.buffs.astype(np.float64) @ r.buffs.meter_effects - r.meter_decay
        np.clip(s.meters + change, 0, r.meter_max, out=s.meters)
        happened = np.flatnonzero(events >= 0)
        s.event_counts[happened, events[happened]] += 1
        died = ((s.meters <= 0) & r.meter_death).any(axis=1)
        return StepOutcome(events, gained, died)

    # ---------------------------------------------------------------- the agent's action
    def _act(self, intent: Intent, events: IntArray, gained: FloatArray) -> None:
        verb = intent.verb
        present = np.bincount(verb, minlength=len(Verb))
        handlers = {
            Verb.MOVE: self._move,
            Verb.ATTACK: self._attack,
            Verb.COLLECT: self._collect,
            Verb.PICKUP: self._pickup,
            Verb.CONSUME: self._consume,
            Verb.SYNTHESIZE: self._synthesize,
            Verb.EQUIP: self._equip,
            Verb.UNEQUIP: self._unequip,
            Verb.DISCARD: self._discard,
        }
        for v, handler in handlers.items():
            if present[v]:
                envs = np.flatnonzero(verb == v)
                handler(envs, intent, events, gained)

    def _move(self, envs: IntArray, intent: Intent, events: IntArray, gained: FloatArray) -> None:
        s, r = self.state, self.rules
        s.x[envs] = np.clip(s.x[envs] + intent.dx[envs], 0, r.width - 1)
        s.y[envs] = np.clip(s.y[envs] + intent.dy[envs], 0, r.height - 1)

    def _attack(self, envs: IntArray, intent: Intent, events: IntArray, gained: FloatArray) -> None:
        s = self.state
        slots = intent.target[envs]
        kinds = self.slot_type[slots]
        s.creature_hp[envs, slots] -= s.stats[envs, ATTACK]
        killed = s.creature_hp[envs, slots] <= 0
        events[envs] = np.where(killed, self.kill_event[kinds], self.attack_event[kinds])
        dead, dead_slots = envs[killed], slots[killed]
        s.alive[dead, dead_slots] = False
        self._drop(
            dead,
            s.creature_x[dead, dead_slots],
            s.creature_y[dead, dead_slots],
            self.rules.creatures.kill_drops[kinds[killed]],
        )
        self._wear(envs, self.wear_attack, 1)

    def _collect(
        self, envs: IntArray, intent: Intent, events: IntArray, gained: FloatArray
    ) -> None:
        s = self.state
        kinds = self.slot_type[intent.target[envs]]
        events[envs] = self.collect_event[kinds]
        self._drop(envs, s.x[envs], s.y[envs], self.rules.creatures.collect_drops[kinds])

    def _pickup(self, envs: IntArray, intent: Intent, events: IntArray, gained: FloatArray) -> None:
        s = self.state
        slots = intent.target[envs]
        items = s.drop_item[envs, slots]
        room = self.rules.capacity - s.backpack[envs].sum(axis=1)
        # Without a count, the whole stack (as far as the backpack has room).
        wanted = self._count(envs, intent, s.drop_count[envs, slots])
        taken = np.minimum(np.minimum(s.drop_count[envs, slots], room), wanted)
        s.action_ok[envs] = taken == wanted
        s.backpack[envs, items] += taken
        s.drop_count[envs, slots] -= taken
        s.dropped[envs, slots] = s.drop_count[envs, slots] > 0
        events[envs] = self.pickup_event[items]

    def _consume(
        self, envs: IntArray, intent: Intent, events: IntArray, gained: FloatArray
    ) -> None:
        s, r = self.state, self.rules
        items = intent.param[envs]
        units = self._take(envs, items, self._count(envs, intent))
        before = s.meters[envs]
        after = np.clip(before + r.items.effects[items] * units[:, None], None, r.meter_max)
        s.meters[envs] = after
        gained[envs] = np.clip(after - before, 0, None)
        events[envs] = self.consume_event[items]

    def _synthesize(
        self, envs: IntArray, intent: Intent, events: IntArray, gained: FloatArray
    ) -> None:
        s, r = self.state, self.rules
        recipes = intent.param[envs]
        wanted = self._count(envs, intent)
        # As many times as asked, as the inputs allow and as the output fits (legal once).
        inputs = r.recipes.inputs[recipes]
        held = np.where(inputs > 0, s.backpack[envs] // np.maximum(inputs, 1), wanted[:, None])
        growth = r.recipes.delta[recipes].sum(axis=1)
        room = r.capacity - s.backpack[envs].sum(axis=1)
        fits = np.where(growth > 0, room // np.maximum(growth, 1), wanted)
        times = np.minimum(np.minimum(held.min(axis=1), fits), wanted)
        s.backpack[envs] += r.recipes.delta[recipes] * times[:, None]
        s.action_ok[envs] = times == wanted
        events[envs] = self.synth_event[recipes]

    def _equip(self, envs: IntArray, intent: Intent, events: IntArray, gained: FloatArray) -> None:
        s, items = self.state, self.rules.items
        new = intent.param[envs]
        slots = items.slot[new]
        # Whatever the slot held goes back to the backpack first.
        holding = s.equipped[envs, slots] >= 0
        self._unequip_slots(envs[holding], slots[holding])
        worn = s.worn[envs, new]
        s.durability[envs, slots] = np.where(worn > 0, worn, items.durability[new])
        s.worn[envs, new] = 0
        s.backpack[envs, new] -= 1
        s.equipped[envs, slots] = new
        events[envs] = self.equip_event[new]

    def _unequip(
        self, envs: IntArray, intent: Intent, events: IntArray, gained: FloatArray
    ) -> None:
        self._unequip_slots(envs, intent.param[envs])

    def _unequip_slots(self, envs: IntArray, slots: IntArray) -> None:
        s, items = self.state, self.rules.items
        old = s.equipped[envs, slots]
        left = s.durability[envs, slots]
        # At most one partly used unit of a type exists: equipping takes it first.
        s.worn[envs, old] = np.where(left < items.durability[old], left, 0)
        s.backpack[envs, old] += 1
        s.equipped[envs, slots] = -1

    def _discard(
        self, envs: IntArray, intent: Intent, events: IntArray, gained: FloatArray
    ) -> None:
        self._take(envs, intent.param[envs], self._count(envs, intent))

    @staticmethod
    def _count(envs: IntArray, intent: Intent, default: IntArray | int = 1) -> IntArray:
        """The units (or times) the action asks for; ``default`` when it gives no count."""
        if intent.count is None:
            return np.broadcast_to(np.asarray(default, dtype=np.int64), envs.shape)
        return np.maximum(intent.count[envs], 1)

    def _take(self, envs: IntArray, items: IntArray, wanted: IntArray) -> IntArray:
        """Take up to ``wanted`` units of ``items`` out of the backpack (full units before a
        worn one); returns how many were taken and flags a shortfall as a failed action."""
        s = self.state
        units = np.minimum(s.backpack[envs, items], wanted)
        s.backpack[envs, items] -= units
        s.worn[envs, items] = np.where(s.backpack[envs, items] > 0, s.worn[envs, items], 0)
        s.action_ok[envs] = units == wanted
        return units

    # ---------------------------------------------------------------- items on the ground
    def _drop(self, envs: IntArray, x: IntArray, y: IntArray, counts: IntArray) -> None:
        """Leave ``counts[j, item]`` units at (x[j], y[j]) in copy ``envs[j]``, on a stack of
        the same item in that cell if there is one (lost if every drop slot is taken)."""
        if not envs.size:
            return
        s = self.state
        for item in np.flatnonzero(counts.any(axis=0)):
            some = counts[:, item] > 0
            e, ex, ey = envs[some], x[some], y[some]
            same = (
                s.dropped[e]
                & (s.drop_item[e] == item)
                & (s.drop_x[e] == ex[:, None])
                & (s.drop_y[e] == ey[:, None])
            )
            stacked = same.any(axis=1)
            free = ~s.dropped[e]
            slot = np.where(stacked, same.argmax(axis=1), free.argmax(axis=1))
            placed = stacked | free.any(axis=1)
            e, slot, ex, ey = e[placed], slot[placed], ex[placed], ey[placed]
            fresh = ~stacked[placed]
            s.drop_count[e, slot] = (
                np.where(fresh, 0, s.drop_count[e, slot]) + counts[some][placed, item]
            )
            s.drop_item[e, slot] = item
            s.drop_x[e, slot] = ex
            s.drop_y[e, slot] = ey
            s.drop_age[e, slot] = np.where(fresh, 0, s.drop_age[e, slot])
            s.dropped[e, slot] = True

    # ---------------------------------------------------------------- equipment
    def _wear(self, envs: IntArray, by: BoolArray, amount: IntArray | int) -> None:
        """Use up durability of the items worn in copies ``envs`` that ``by`` marks; worn-out
        items break."""
        s = self.state
        equipped = s.equipped[envs]
        affected = (equipped >= 0) & by[equipped]
        if not affected.any():
            return
        amount_per_slot = np.broadcast_to(np.asarray(amount).reshape(-1, 1), affected.shape)
        durability = s.durability[envs] - np.where(affected, amount_per_slot, 0)
        s.durability[envs] = durability
        s.equipped[envs] = np.where(affected & (durability <= 0), -1, equipped)

    # ---------------------------------------------------------------- creatures
    def _creatures_act(self) -> None:
        s, r = self.state, self.rules
        table = r.creatures
        if self.mobile.size:
            self._creatures_move()
        hostile = s.alive & table.aggressive[self.slot_type]
        if not hostile.any():
            return
        near = hostile & (np.abs(s.creature_x - s.x[:, None]) <= 1)
        near &= np.abs(s.creature_y - s.y[:, None]) <= 1
        hits = near.sum(axis=1)
        if not hits.any():
            return
        strength = (near * table.attack[self.slot_type]).sum(axis=1)
        damage = np.clip(strength - hits * s.stats[:, DEFENSE], 0, None)
        s.meters[:, HP] -= damage
        envs = np.flatnonzero(hits)
        self._wear(envs, self.wear_hit, hits[envs])

    def _creatures_move(self) -> None:
        """Creatures that see the agent flee from it or, if aggressive, close in on it; the
        others wander. Each moves only with its type's move chance."""
        s, r = self.state, self.rules
        table = r.creatures
        cols, kinds = self.mobile, self.mobile_type
        n = s.x.shape[0]
        cx, cy = s.creature_x[:, cols], s.creature_y[:, cols]
        rx, ry = cx - s.x[:, None], cy - s.y[:, None]
        distance = np.maximum(np.abs(rx), np.abs(ry))
        sees = distance <= table.vision[kinds]
        aggressive = table.aggressive[kinds]
        # Away from the agent for prey; toward it for hunters, which stop next to it.
        hunting = sees & aggressive
        away = np.where(aggressive, -1, 1)
        wander = _WANDER[self.rng.integers(0, len(_WANDER), size=(n, cols.size))]
        dx = np.where(sees, away * np.sign(rx), wander[..., 0])
        dy = np.where(sees, away * np.sign(ry), wander[..., 1])
        moves = s.alive[:, cols] & (self.rng.random((n, cols.size)) < table.move_chance[kinds])
        step = table.move_speed[kinds] * moves
        step_x = np.where(hunting, np.minimum(step, np.maximum(np.abs(rx) - 1, 0)), step)
        step_y = np.where(hunting, np.minimum(step, np.maximum(np.abs(ry) - 1, 0)), step)
        s.creature_x[:, cols] = np.clip(cx + dx * step_x, 0, r.width - 1)
        s.creature_y[:, cols] = np.clip(cy + dy * step_y, 0, r.height - 1)

    # ---------------------------------------------------------------- time and buffs
    def _advance_clock(self) -> None:
        s, r = self.state, self.rules
        n = s.t.shape[0]
        s.t += 1
        if r.weather_names and r.config.weather.change_chance > 0:
            change = self.rng.random(n) < r.config.weather.change_chance
            if change.any():
                s.weather[change] = self.rng.choice(
                    len(r.weather_probs), size=int(change.sum()), p=r.weather_probs
                )
        if self.respawning.size:
            self._respawn()
        lifetime = r.config.map.drop_lifetime
        if lifetime:
            s.drop_age += s.dropped
            s.dropped &= s.drop_age < lifetime

    def _respawn(self) -> None:
        s, r = self.state, self.rules
        table = r.creatures
        multiplier = r.season_respawn[r.season(s.t)]
        chance = table.respawn[self.respawning][None, :] * multiplier[:, None]
        spawn = self.rng.random(chance.shape) < chance
        for column in np.flatnonzero(spawn.any(axis=0)):
            k = int(self.respawning[column])
            start, end = int(table.block_start[k]), int(table.block_end[k])
            envs = np.flatnonzero(spawn[:, column])
            free = ~s.alive[envs, start:end]
            x, y, found = random_cells(r, s, envs, k, self.rng)
            ok = found & free.any(axis=1)
            envs, slot = envs[ok], start + free[ok].argmax(axis=1)
            s.creature_x[envs, slot] = x[ok]
            s.creature_y[envs, slot] = y[ok]
            s.creature_hp[envs, slot] = table.hp[k]
            s.alive[envs, slot] = True

    def refresh(self, envs: IntArray) -> None:
        """Recompute which buffs are active and the agent's abilities in copies ``envs``."""
        s, r = self.state, self.rules
        b = r.buffs
        t = s.t[envs]
        active = (
            b.phase_ok[:, r.phase(t)]
            & b.season_ok[:, r.season(t)]
            & b.weather_ok[:, s.weather[envs]]
            & b.terrain_ok[:, s.terrain[envs, s.y[envs], s.x[envs]]]
        ).T
        if b.needs_item.any():
            equipped = s.equipped[envs]
            wearing = np.zeros((envs.shape[0], b.given_by.shape[0] + 1), dtype=np.bool_)
            wearing[np.arange(envs.shape[0])[:, None], equipped] = True  # -1 lands in the last
            given = wearing[:, :-1].astype(np.int64) @ b.given_by.astype(np.int64) > 0
            active &= given | ~b.needs_item
        s.buffs[envs] = active
        stats = r.stat_base + active.astype(np.float64) @ b.stat_effects
        s.stats[envs] = np.clip(np.floor(stats), 0, None).astype(np.int64)
