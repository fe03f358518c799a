"""The agent's actions, their masks, and their translation into an :class:`Intent`.

Two action modes:

- ``full``: the categorical ``act`` of the Agent entity picks a verb (idle, a move by an offset,
  attack, collect, pickup, consume / synthesize / equip / discard an item, unequip a slot);
  ``attack``, ``collect`` and ``pickup`` are select-entity actions whose candidates are the
  creatures and item stacks in range, and whose choice is used when the verb asks for it.
- ``simple``: the paper's nine global actions, each aimed automatically (attack the nearest
  prey, collect what the backpack lacks most, move toward the nearest prey, ...).

Masks offer only legal actions, so the simulation never has to reject one.
"""

from __future__ import annotations

from collections.abc import Mapping
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
    """The full action space: a verb per step plus select-entity targets."""

    def __init__(self, rules: Rules) -> None:
        self.rules = rules
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
        return {
            "act": CategoricalActionSpace(self.labels),
            **{name: SelectEntityActionSpace() for name in _TARGETED},
        }

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
        out: dict[str, VecActionMask] = {
            "act": VecCategoricalMask(
                RaggedArray(np.zeros((n, 1), dtype=np.int64), ones), RaggedArray(mask, ones)
            )
        }
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
        return Intent(verb, self.param[choice], target, self.dx[choice], self.dy[choice])


class SimpleActions:
    """The paper's simplified action space: nine global choices, each aimed automatically."""

    def __init__(self, rules: Rules, rng: np.random.Generator) -> None:
        self.rules = rules
        self.rng = rng
        self.shared = ActionRules(rules)
        table = rules.creatures
        slot_type = table.slot_type
        self.slot_type = slot_type
        self.prey = (table.attackable & ~table.aggressive)[slot_type]
        # Collecting from a slot yields these items; aim at what the backpack holds least of.
        self.collect_yield = table.collect_drops[slot_type]  # (slots, items)
        effects = rules.items.effects[self.shared.consumables]
        self.relief = effects / rules.meter_max  # (consumables, meters)
        self._sight: Sight | None = None
        self._legal: Legal | None = None

    @property
    def action_space(self) -> dict[str, ActionSpace]:
        return {"act": GlobalCategoricalActionSpace(SIMPLE_CHOICES)}

    def masks(self, s: WorldState, sight: Sight) -> dict[str, VecActionMask]:
        n = s.x.shape[0]
        legal = self.shared.legal(s)
        self._sight, self._legal = sight, legal
        mask = np.stack(
            [
                np.ones(n, dtype=np.bool_),
                legal.moves.any(axis=1),
                sight.attackable.any(axis=1),
                sight.collectable.any(axis=1),
                sight.pickable.any(axis=1),
                legal.consume.any(axis=1),
                legal.synthesize.any(axis=1),
                legal.equip.any(axis=1),
                legal.discard[:, self.shared.equipment].any(axis=1),
            ],
            axis=1,
        )
        ones = np.ones(n, dtype=np.int64)
        actors = RaggedArray(sight.entity_count[:, None].copy(), ones)
        return {"act": VecCategoricalMask(actors, RaggedArray(mask, ones))}

    def decode(self, actions: Mapping[str, RaggedArray], s: WorldState) -> Intent:
        sight, legal = self._sight, self._legal
        assert sight is not None and legal is not None, "masks() comes before decode()"
        choice = actions["act"].data[:, 0]
        n = choice.shape[0]
        verb = np.asarray(_SIMPLE_VERBS, dtype=np.int64)[choice]
        param = np.zeros(n, dtype=np.int64)
        target = np.full(n, -1, dtype=np.int64)
        dx = np.zeros(n, dtype=np.int64)
        dy = np.zeros(n, dtype=np.int64)
        distance = sight.creature_distance
        if (verb == Verb.MOVE).any():
            self._aim_move(s, sight, legal, verb == Verb.MOVE, dx, dy)
        # Attack the nearest target; collect and pick up what the backpack holds least of.
        target = np.where(verb == Verb.ATTACK, _closest(sight.attackable, distance), target)
        scarcity = (s.backpack @ self.collect_yield.T) * _FAR + distance
        target = np.where(verb == Verb.COLLECT, _closest(sight.collectable, scarcity), target)
        held = np.take_along_axis(s.backpack, s.drop_item, axis=1)
        need = held * _FAR + sight.drop_distance
        target = np.where(verb == Verb.PICKUP, _closest(sight.pickable, need), target)
        # Consume what relieves the emptiest meters most; craft, equip, discard the first.
        emptiness = 1.0 - s.meters / self.rules.meter_max
        relief = np.where(legal.consume, emptiness @ self.relief.T, -np.inf)
        consume = self.shared.consumables[relief.argmax(axis=1)] if relief.shape[1] else param
        param = np.where(verb == Verb.CONSUME, consume, param)
        param = np.where(verb == Verb.SYNTHESIZE, legal.synthesize.argmax(axis=1), param)
        equipment = self.shared.equipment
        if equipment.size:
            param = np.where(verb == Verb.EQUIP, equipment[legal.equip.argmax(axis=1)], param)
            first_held = equipment[legal.discard[:, equipment].argmax(axis=1)]
            param = np.where(verb == Verb.DISCARD, first_held, param)
        return Intent(verb, param, target, dx, dy)

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


def _closest(candidates: BoolArray, cost: IntArray) -> IntArray:
    """Per row, the candidate column of least cost (-1 where there is none)."""
    masked = np.where(candidates, cost, np.iinfo(np.int64).max)
    best = masked.argmin(axis=1)
    return np.where(candidates.any(axis=1), best, -1)


__all__ = ["ACTION_MODES", "SIMPLE_CHOICES", "FullActions", "SimpleActions"]
