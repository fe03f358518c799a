"""A text picture of one copy of a survival world, for people."""

from __future__ import annotations

import numpy as np

from entityrl.envs.survival.config import STATS
from entityrl.envs.survival.rules import Rules
from entityrl.envs.survival.state import WorldState


def render_world(rules: Rules, s: WorldState, i: int) -> str:
    """The map of copy ``i`` (north up; ``@`` is the agent) and the agent's status below it."""
    grid = np.array(rules.terrain_glyphs)[s.terrain[i]]
    for d in np.flatnonzero(s.dropped[i]):
        grid[s.drop_y[i, d], s.drop_x[i, d]] = rules.items.glyphs[s.drop_item[i, d]]
    slot_type = rules.creatures.slot_type
    for c in np.flatnonzero(s.alive[i]):
        grid[s.creature_y[i, c], s.creature_x[i, c]] = rules.creatures.glyphs[slot_type[c]]
    grid[s.y[i], s.x[i]] = "@"
    lines = ["".join(row) for row in grid[::-1]]
    return "\n".join([*lines, *_status(rules, s, i)])


def _status(rules: Rules, s: WorldState, i: int) -> list[str]:
    t = s.t[i : i + 1]
    clock = [f"step {int(s.t[i])}"]
    if rules.has_night:
        clock.append("night" if rules.phase(t)[0] else "day")
    if rules.season_names:
        clock.append(rules.season_names[int(rules.season(t)[0])])
    if rules.weather_names:
        clock.append(rules.weather_names[int(s.weather[i])])
    meters = [
        f"{name} {s.meters[i, m]:g}/{rules.meter_max[m]:g}"
        for m, name in enumerate(rules.meter_names)
        if rules.meters_used[m]
    ]
    stats = [f"{name} {s.stats[i, k]}" for k, name in enumerate(STATS)]
    items = rules.items
    carried = [f"{items.names[k]} {s.backpack[i, k]}" for k in np.flatnonzero(s.backpack[i])]
    worn = [
        f"{slot}: {items.names[s.equipped[i, k]]} ({s.durability[i, k]}/"
        f"{items.durability[s.equipped[i, k]]})"
        for k, slot in enumerate(items.slot_names)
        if s.equipped[i, k] >= 0
    ]
    buffs = [rules.buffs.names[b] for b in np.flatnonzero(s.buffs[i])]
    return [
        "  ".join(clock),
        "  ".join(meters),
        "  ".join(stats),
        f"backpack ({int(s.backpack[i].sum())}/{rules.capacity}): {', '.join(carried) or 'empty'}",
        f"equipped: {', '.join(worn) or 'nothing'}",
        f"buffs: {', '.join(buffs) or 'none'}",
    ]
