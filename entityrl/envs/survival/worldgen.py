"""New episodes: terrain, creatures, and the agent's starting state, for many copies at once."""

from __future__ import annotations

import numpy as np

from entityrl.envs.survival.rules import BoolArray, IntArray, Rules
from entityrl.envs.survival.state import WorldState


def generate(rules: Rules, state: WorldState, envs: IntArray, rng: np.random.Generator) -> None:
    """Start a new episode in copies ``envs``."""
    k = envs.shape[0]
    state.terrain[envs] = _terrain(rules, k, rng)
    state.x[envs] = rng.integers(0, rules.width, size=k)
    state.y[envs] = rng.integers(0, rules.height, size=k)
    state.meters[envs] = rules.meter_start
    state.backpack[envs] = 0
    state.worn[envs] = 0
    state.equipped[envs] = -1
    state.durability[envs] = 0
    state.t[envs] = 0
    state.weather[envs] = rng.choice(len(rules.weather_probs), size=k, p=rules.weather_probs)
    state.dropped[envs] = False
    state.drop_count[envs] = 0
    state.event_counts[envs] = 0
    state.action_ok[envs] = True
    _creatures(rules, state, envs, rng)


def _terrain(rules: Rules, k: int, rng: np.random.Generator) -> IntArray:
    """Each cell takes the terrain of its nearest region centre (a Voronoi map)."""
    regions = rules.config.map.regions
    cx = rng.uniform(0, rules.width, size=(k, regions, 1, 1))
    cy = rng.uniform(0, rules.height, size=(k, regions, 1, 1))
    kinds = rng.choice(len(rules.terrain_weights), size=(k, regions), p=rules.terrain_weights)
    xs = np.arange(rules.width)[None, None, None, :]
    ys = np.arange(rules.height)[None, None, :, None]
    nearest = ((xs - cx) ** 2 + (ys - cy) ** 2).argmin(axis=1)
    return np.take_along_axis(kinds, nearest.reshape(k, -1), axis=1).reshape(nearest.shape)


def _creatures(rules: Rules, state: WorldState, envs: IntArray, rng: np.random.Generator) -> None:
    """Scatter each creature type over the cells of the terrains that spawn it."""
    table = rules.creatures
    cells = rules.width * rules.height
    terrain = state.terrain[envs].reshape(envs.shape[0], cells)
    for k in range(len(table.names)):
        start, end = int(table.block_start[k]), int(table.block_end[k])
        count = min(end - start, cells)
        accepted = rng.random(terrain.shape) < rules.spawn_density[terrain, k]
        # A random order of the accepted cells (rejected ones sort last): the first ``count``.
        key = np.where(accepted, rng.random(terrain.shape), 2.0)
        chosen = np.argpartition(key, count - 1, axis=1)[:, :count]
        alive = np.take_along_axis(key, chosen, axis=1) < 2.0
        block = slice(start, start + count)
        state.creature_x[envs, block] = chosen % rules.width
        state.creature_y[envs, block] = chosen // rules.width
        state.creature_hp[envs, block] = table.hp[k]
        state.alive[envs, start:end] = False
        state.alive[envs, block] = alive


def random_cells(
    rules: Rules,
    state: WorldState,
    envs: IntArray,
    creature: int,
    rng: np.random.Generator,
    tries: int = 8,
) -> tuple[IntArray, IntArray, BoolArray]:
    """A random cell of a terrain that spawns ``creature`` in each copy (``found`` False where
    ``tries`` random cells all missed)."""
    xs = rng.integers(0, rules.width, size=(envs.shape[0], tries))
    ys = rng.integers(0, rules.height, size=(envs.shape[0], tries))
    terrain = state.terrain[envs[:, None], ys, xs]
    ok = rules.spawn_density[terrain, creature] > 0
    first = ok.argmax(axis=1)
    rows = np.arange(envs.shape[0])
    return xs[rows, first], ys[rows, first], ok.any(axis=1)
