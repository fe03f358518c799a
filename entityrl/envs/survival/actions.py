"""The agent's actions, their masks, and their translation into an :class:`Intent`.

Two action modes:

- ``full``: the categorical ``act`` of the Agent entity picks a verb (idle, a move by an offset,
  attack, collect, pickup, consume / synthesize / equip / discard an item, unequip a slot);
  ``attack``, ``collect`` and ``pickup`` are select-entity actions whose candidates are the
  creatures and item stacks in range, and whose choice is used when the verb asks for it.
  With ``max_count`` > 1 a ``count`` action gives the units (or times) a consume, pickup,
  discard or craft asks for: the paper's Figure 9.
- ``simple``: the paper's nine global actions, each aimed automatically (attack the nearest
  prey, collect what the backpack lacks most, move toward the nearest prey, ...), some of them
  optionally expanded into explicit choices (:data:`EXPANSIONS`, the paper's Figure 10).

Masks offer only legal actions, so the simulation never has to reject one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from entityrl.env.spaces import (
    ActionSpace,
    CategoricalActionSpace,
    GlobalCategoricalActionSpace,
    SelectEntityActionSpace,
)
from entityrl.env.vec_obs import VecActionMask, VecCategoricalMask, VecSelectEntityMask
from entityrl.envs.survival.config import ItemKind
from entityrl.envs.survival.dynamics import Intent, Verb
from entityrl.envs.survival.observe import Sight
from entityrl.envs.survival.rules import MOVE_SPEED, BoolArray, IntArray, Rules
from entityrl.envs.survival.state import WorldState
from entityrl.ragged import RaggedArray

ACTION_MODES = ("full", "simple")
SIMPLE_CHOICES = (
    "idle",
    "move",
    "attack",
    "collect",
    "pickup",
    "consume",
    "synthesize",
    "equip",
    "discard",
)
_SIMPLE_VERBS = (
    Verb.IDLE,
    Verb.MOVE,
    Verb.ATTACK,
    Verb.COLLECT,
    Verb.PICKUP,
    Verb.CONSUME,
    Verb.SYNTHESIZE,
    Verb.EQUIP,
    Verb.DISCARD,
)
_FAR = 1 << 20
_TARGETED = {"attack": Verb.ATTACK, "collect": Verb.COLLECT, "pickup": Verb.PICKUP}


@dataclass
class Legal:
    """Which item-related actions each copy may take, by column of its kind."""

    moves: BoolArray  # (n, offsets)
    consume: BoolArray  # (n, consumables)
    synthesize: BoolArray  # (n, recipes)
    equip: BoolArray  # (n, equipment items)
    unequip: BoolArray  # (n, slots)
    discard: BoolArray  # (n, items)


class ActionRules:
    """What both action modes share: the move offsets and the legality of every action."""

    def __init__(self, rules: Rules) -> None:
        self.rules = rules
        items = rules.items
        reach = int(rules.stat_max[MOVE_SPEED])
        self.offsets = np.array(
            [
                (dx, dy)
                for dy in range(-reach, reach + 1)
                for dx in range(-reach, reach + 1)
                if (dx, dy) != (0, 0)
            ],
            dtype=np.int64,
        ).reshape(-1, 2)
        self.offset_speed = np.abs(self.offsets).max(axis=1, initial=0)
        self.consumables = items.of_kind(ItemKind.consumable)
        self.equipment = items.of_kind(ItemKind.equipment)
        self.recipe_growth = rules.recipes.delta.sum(axis=1)

    def legal(self, s: WorldState) -> Legal:
        r = self.rules
        x = s.x[:, None] + self.offsets[:, 0]
        y = s.y[:, None] + self.offsets[:, 1]
        moves = (self.offset_speed <= s.stats[:, MOVE_SPEED][:, None]) & (x >= 0) & (y >= 0)
        moves &= (x < r.width) & (y < r.height)
        load = s.backpack.sum(axis=1)
        has = s.backpack > 0
        craftable = (s.backpack[:, None, :] >= r.recipes.inputs).all(axis=2)
        craftable &= (load[:, None] + self.recipe_growth) <= r.capacity
        slot_of = r.items.slot[self.equipment]
        equip = has[:, self.equipment] & (s.equipped[:, slot_of] != self.equipment)
        return Legal(
            moves=moves,
            consume=has[:, self.consumables],
            synthesize=craftable,
            equip=equip,
            unequip=(s.equipped >= 0) & (load < r.capacity)[:, None],
            discard=has,
        )


class FullActions:
    """The full action space: a verb per step plus select-entity targets, and with
    ``max_count`` > 1 a ``count`` (1 to ``max_count``: units to consume, pick up or discard,
    times to craft), the second parameter of the paper's Figure 9."""

    def __init__(self, rules: Rules, max_count: int = 1) -> None:
        if max_count < 1:
            raise ValueError(f"{rules.config.name}: max_count must be >= 1, got {max_count}")
        self.rules = rules
        self.max_count = max_count
        self.shared = ActionRules(rules)
        sh = self.shared
        items = rules.items
        table: list[tuple[str, Verb, int, int, int]] = [("idle", Verb.IDLE, 0, 0, 0)]
        table += [(f"move {dx:+d},{dy:+d}", Verb.MOVE, 0, dx, dy) for dx, dy in sh.offsets]
        table += [(name, verb, 0, 0, 0) for name, verb in _TARGETED.items()]
        table += [(f"consume {items.names[i]}", Verb.CONSUME, i, 0, 0) for i in sh.consumables]
        table += [
            (f"synthesize {items.names[o]}", Verb.SYNTHESIZE, r, 0, 0)
            for r, o in enumerate(rules.recipes.outputs)
        ]
        table += [(f"equip {items.names[i]}", Verb.EQUIP, i, 0, 0) for i in sh.equipment]
        table += [
            (f"unequip {slot}", Verb.UNEQUIP, s, 0, 0) for s, slot in enumerate(items.slot_names)
        ]
        table += [(f"discard {name}", Verb.DISCARD, i, 0, 0) for i, name in enumerate(items.names)]
        self.labels = [row[0] for row in table]
        self.verb = np.array([row[1] for row in table], dtype=np.int64)
        self.param = np.array([row[2] for row in table], dtype=np.int64)
        self.dx = np.array([row[3] for row in table], dtype=np.int64)
        self.dy = np.array([row[4] for row in table], dtype=np.int64)
        self._targets: dict[str, tuple[IntArray, IntArray]] = {}

    @property
    def action_space(self) -> dict[str, ActionSpace]:
        space: dict[str, ActionSpace] = {"act": CategoricalActionSpace(self.labels)}
        if self.max_count > 1:
            space["count"] = CategoricalActionSpace([str(c) for c in range(1, self.max_count + 1)])
        return {**space, **{name: SelectEntityActionSpace() for name in _TARGETED}}

    def masks(self, s: WorldState, sight: Sight) -> dict[str, VecActionMask]:
        n = s.x.shape[0]
        legal = self.shared.legal(s)
        ones = np.ones(n, dtype=np.int64)
        mask = np.empty((n, len(self.labels)), dtype=np.bool_)
        mask[:, 0] = True
        column = 1  # after idle
        targets = {
            "attack": (sight.attackable, sight.creature_index),
            "collect": (sight.collectable, sight.creature_index),
            "pickup": (sight.pickable, sight.drop_index),
        }
        blocks = [legal.moves] + [
            chosen.any(axis=1, keepdims=True) for chosen, _ in targets.values()
        ]
        blocks += [legal.consume, legal.synthesize, legal.equip, legal.unequip, legal.discard]
        for block in blocks:
            mask[:, column : column + block.shape[1]] = block
            column += block.shape[1]
        agent = RaggedArray(np.zeros((n, 1), dtype=np.int64), ones)
        out: dict[str, VecActionMask] = {"act": VecCategoricalMask(agent, RaggedArray(mask, ones))}
        if self.max_count > 1:
            # Any count is legal: the step does what it can and flags a shortfall.
            out["count"] = VecCategoricalMask(agent, None)
        for name, (chosen, index) in targets.items():
            has = chosen.any(axis=1)
            counts = chosen.sum(axis=1)
            actors = RaggedArray(
                np.zeros((int(has.sum()), 1), dtype=np.int64), has.astype(np.int64)
            )
            actees = RaggedArray(index[chosen][:, None], counts)
            out[name] = VecSelectEntityMask(actors, actees)
            # Remember which slot each candidate is, to decode the choice next step.
            self._targets[name] = (np.nonzero(chosen)[1], np.cumsum(counts) - counts)
        return out

    def decode(self, actions: Mapping[str, RaggedArray], s: WorldState) -> Intent:
        choice = actions["act"].data[:, 0]
        verb = self.verb[choice]
        target = np.full(choice.shape[0], -1, dtype=np.int64)
        for name, wanted in _TARGETED.items():
            chosen = actions.get(name)
            if chosen is None or not chosen.items:
                continue
            rows = np.flatnonzero(chosen.lengths)
            slots, starts = self._targets[name]
            picked = slots[starts[rows] + chosen.data[:, 0]]
            use = verb[rows] == wanted
            target[rows[use]] = picked[use]
        count = actions["count"].data[:, 0] + 1 if "count" in actions else None
        return Intent(verb, self.param[choice], target, self.dx[choice], self.dy[choice], count)


@dataclass(frozen=True)
class SimpleChoice:
    """One action of the simplified space: its label, its verb, and for the expanded actions
    of the paper's Figure 10 which target it names (the n-th nearest attackable creature, a
    creature type to collect from, an item to pick up or consume; -1: aimed automatically)."""

    label: str
    verb: Verb
    which: int = -1


class SimpleActions:
    """The paper's simplified action space: nine global choices, each aimed automatically, or
    with some of them expanded into explicit choices (``expand``, the paper's Figure 10)."""

    def __init__(self, rules: Rules, rng: np.random.Generator, expand: Sequence[str] = ()) -> None:
        self.rules = rules
        self.rng = rng
        self.shared = ActionRules(rules)
        table = rules.creatures
        slot_type = table.slot_type
        self.slot_type = slot_type
        self.prey = (table.attackable & ~table.aggressive)[slot_type]
        self.can_attack = table.attackable[slot_type]
        # Collecting from a slot yields these items; aim at what the backpack holds least of.
        self.collect_yield = table.collect_drops[slot_type]  # (slots, items)
        effects = rules.items.effects[self.shared.consumables]
        self.relief = effects / rules.meter_max  # (consumables, meters)
        self.choices = simple_choices(rules, expand)
        self.verbs = np.array([c.verb for c in self.choices], dtype=np.int64)
        self._sight: Sight | None = None
        self._legal: Legal | None = None

    @property
    def action_space(self) -> dict[str, ActionSpace]:
        return {"act": GlobalCategoricalActionSpace([c.label for c in self.choices])}

    def masks(self, s: WorldState, sight: Sight) -> dict[str, VecActionMask]:
        n = s.x.shape[0]
        legal = self.shared.legal(s)
        self._sight, self._legal = sight, legal
        automatic = {
            Verb.IDLE: np.ones(n, dtype=np.bool_),
            Verb.MOVE: legal.moves.any(axis=1),
            Verb.ATTACK: sight.attackable.any(axis=1),
            Verb.COLLECT: sight.collectable.any(axis=1),
            Verb.PICKUP: sight.pickable.any(axis=1),
            Verb.CONSUME: legal.consume.any(axis=1),
            Verb.SYNTHESIZE: legal.synthesize.any(axis=1),
            Verb.EQUIP: legal.equip.any(axis=1),
            Verb.DISCARD: legal.discard[:, self.shared.equipment].any(axis=1),
        }
        hunted = (sight.creatures_seen & self.can_attack).sum(axis=1)
        columns = []
        for c in self.choices:
            if c.which < 0:
                columns.append(automatic[c.verb])
            elif c.verb == Verb.ATTACK:
                columns.append(hunted > c.which)
            elif c.verb == Verb.COLLECT:
                columns.append((sight.collectable & (self.slot_type == c.which)).any(axis=1))
            elif c.verb == Verb.PICKUP:
                columns.append((sight.pickable & (s.drop_item == c.which)).any(axis=1))
            else:  # consume a given item
                columns.append(s.backpack[:, c.which] > 0)
        mask = np.stack(columns, axis=1)
        ones = np.ones(n, dtype=np.int64)
        actors = RaggedArray(sight.entity_count[:, None].copy(), ones)
        return {"act": VecCategoricalMask(actors, RaggedArray(mask, ones))}

    def decode(self, actions: Mapping[str, RaggedArray], s: WorldState) -> Intent:
        sight, legal = self._sight, self._legal
        assert sight is not None and legal is not None, "masks() comes before decode()"
        choice = actions["act"].data[:, 0]
        n = choice.shape[0]
        verb = self.verbs[choice]
        which = np.array([c.which for c in self.choices], dtype=np.int64)[choice]
        auto = which < 0
        param = np.zeros(n, dtype=np.int64)
        target = np.full(n, -1, dtype=np.int64)
        dx = np.zeros(n, dtype=np.int64)
        dy = np.zeros(n, dtype=np.int64)
        distance = sight.creature_distance
        # Attack the nearest target; collect and pick up what the backpack holds least of.
        attack = verb == Verb.ATTACK
        target = np.where(attack & auto, _closest(sight.attackable, distance), target)
        scarcity = (s.backpack @ self.collect_yield.T) * _FAR + distance
        collect = verb == Verb.COLLECT
        target = np.where(collect & auto, _closest(sight.collectable, scarcity), target)
        held = np.take_along_axis(s.backpack, s.drop_item, axis=1)
        need = held * _FAR + sight.drop_distance
        pickup = verb == Verb.PICKUP
        target = np.where(pickup & auto, _closest(sight.pickable, need), target)
        moving = verb == Verb.MOVE
        # Expanded choices name their target.
        if (attack & ~auto).any():
            self._aim_attack(s, sight, np.flatnonzero(attack & ~auto), which, verb, target, dx, dy)
        rows = np.flatnonzero(collect & ~auto)
        kinds = sight.collectable[rows] & (self.slot_type == which[rows, None])
        target[rows] = _closest(kinds, distance[rows])
        rows = np.flatnonzero(pickup & ~auto)
        stacks = sight.pickable[rows] & (s.drop_item[rows] == which[rows, None])
        target[rows] = _closest(stacks, sight.drop_distance[rows])
        # Consume what relieves the emptiest meters most (or the item named); craft, equip,
        # discard the first.
        emptiness = 1.0 - s.meters / self.rules.meter_max
        relief = np.where(legal.consume, emptiness @ self.relief.T, -np.inf)
        consume = self.shared.consumables[relief.argmax(axis=1)] if relief.shape[1] else param
        consume = np.where(auto, consume, which)
        param = np.where(verb == Verb.CONSUME, consume, param)
        param = np.where(verb == Verb.SYNTHESIZE, legal.synthesize.argmax(axis=1), param)
        equipment = self.shared.equipment
        if equipment.size:
            param = np.where(verb == Verb.EQUIP, equipment[legal.equip.argmax(axis=1)], param)
            first_held = equipment[legal.discard[:, equipment].argmax(axis=1)]
            param = np.where(verb == Verb.DISCARD, first_held, param)
        if moving.any():
            self._aim_move(s, sight, legal, moving, dx, dy)
        return Intent(verb, param, target, dx, dy)

    def _aim_attack(
        self,
        s: WorldState,
        sight: Sight,
        rows: IntArray,
        which: IntArray,
        verb: IntArray,
        target: IntArray,
        dx: IntArray,
        dy: IntArray,
    ) -> None:
        """The n-th nearest attackable creature in sight: attacked if in range, else
        approached (the verb becomes a move toward it)."""
        in_sight = sight.creatures_seen[rows] & self.can_attack
        cost = np.where(in_sight, sight.creature_distance[rows], _FAR)
        order = np.argsort(cost, axis=1, kind="stable")
        slot = order[np.arange(rows.size), which[rows]]
        in_range = sight.attackable[rows, slot]
        target[rows] = np.where(in_range, slot, -1)
        far, slot = rows[~in_range], slot[~in_range]
        speed = s.stats[far, MOVE_SPEED]
        rx = s.creature_x[far, slot] - s.x[far]
        ry = s.creature_y[far, slot] - s.y[far]
        dx[far] = np.sign(rx) * np.minimum(np.abs(rx), speed)
        dy[far] = np.sign(ry) * np.minimum(np.abs(ry), speed)
        verb[far] = Verb.MOVE

    def _aim_move(
        self,
        s: WorldState,
        sight: Sight,
        legal: Legal,
        moving: BoolArray,
        dx: IntArray,
        dy: IntArray,
    ) -> None:
        """Toward the nearest prey in sight, else a random legal step."""
        prey = sight.creatures_seen & self.prey
        slot = _closest(prey, sight.creature_distance)
        hunting = moving & (slot >= 0)
        rows = np.flatnonzero(hunting)
        speed = s.stats[rows, MOVE_SPEED]
        rx = s.creature_x[rows, slot[rows]] - s.x[rows]
        ry = s.creature_y[rows, slot[rows]] - s.y[rows]
        dx[rows] = np.sign(rx) * np.minimum(np.abs(rx), speed)
        dy[rows] = np.sign(ry) * np.minimum(np.abs(ry), speed)
        wander = np.flatnonzero(moving & ~hunting)
        if wander.size:
            scores = np.where(legal.moves[wander], self.rng.random(legal.moves[wander].shape), -1)
            offsets = self.shared.offsets[scores.argmax(axis=1)]
            dx[wander], dy[wander] = offsets[:, 0], offsets[:, 1]


EXPANSIONS = (
    "3pig",
    "5pig",
    "expand_consume",
    "expand_pickup",
    "expand_collect",
    "expand_all",
)
"""The paper's Figure 10: ``3pig`` / ``5pig`` replace ``attack`` by a choice among the 3 / 5
nearest attackable creatures in sight (approached when out of range); ``expand_consume``,
``expand_pickup`` and ``expand_collect`` replace the automatic choice by one action per
consumable, per item, per creature type that can be collected from; ``expand_all`` is
``3pig`` with the three others."""


def simple_choices(rules: Rules, expand: Sequence[str] = ()) -> list[SimpleChoice]:
    """The simplified actions with the ``expand`` options of the paper's Figure 10 applied."""
    for option in expand:
        if option not in EXPANSIONS:
            raise ValueError(
                f"{rules.config.name}: unknown action expansion {option!r}; expected some of: "
                f"{', '.join(EXPANSIONS)}"
            )
    chosen = set(expand)
    if "expand_all" in chosen:
        chosen |= {"expand_consume", "expand_pickup", "expand_collect"}
        if "5pig" not in chosen:
            chosen.add("3pig")
    if {"3pig", "5pig"} <= chosen:
        raise ValueError(f"{rules.config.name}: action expansions 3pig and 5pig exclude each other")
    items, table = rules.items, rules.creatures
    expanded: dict[Verb, list[SimpleChoice]] = {}
    pigs = 5 if "5pig" in chosen else 3 if "3pig" in chosen else 0
    if pigs:
        expanded[Verb.ATTACK] = [
            SimpleChoice(f"attack {j + 1}", Verb.ATTACK, j) for j in range(pigs)
        ]
    if "expand_collect" in chosen:
        expanded[Verb.COLLECT] = [
            SimpleChoice(f"collect {name}", Verb.COLLECT, k)
            for k, name in enumerate(table.names)
            if table.collectable[k]
        ]
    if "expand_pickup" in chosen:
        expanded[Verb.PICKUP] = [
            SimpleChoice(f"pickup {name}", Verb.PICKUP, i) for i, name in enumerate(items.names)
        ]
    if "expand_consume" in chosen:
        expanded[Verb.CONSUME] = [
            SimpleChoice(f"consume {items.names[i]}", Verb.CONSUME, int(i))
            for i in items.of_kind(ItemKind.consumable)
        ]
    choices: list[SimpleChoice] = []
    for label, verb in zip(SIMPLE_CHOICES, _SIMPLE_VERBS, strict=True):
        choices += expanded.get(verb, [SimpleChoice(label, verb)])
    return choices


def _closest(candidates: BoolArray, cost: IntArray) -> IntArray:
    """Per row, the candidate column of least cost (-1 where there is none)."""
    masked = np.where(candidates, cost, np.iinfo(np.int64).max)
    best = masked.argmin(axis=1)
    return np.where(candidates.any(axis=1), best, -1)


__all__ = [
    "ACTION_MODES",
    "EXPANSIONS",
    "SIMPLE_CHOICES",
    "FullActions",
    "SimpleActions",
    "simple_choices",
]
