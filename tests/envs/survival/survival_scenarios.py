"""Hand-built situations in a survival world: an empty map, creatures and items placed next to
the agent, actions chosen by their labels."""

from __future__ import annotations

from typing import Any

import numpy as np
from omegaconf import OmegaConf

from entityrl.env import VecObs
from entityrl.envs.survival import SurvivalWorld
from entityrl.envs.survival.config import load_config
from entityrl.ragged import RaggedArray

CENTRE = 16


def empty_world(
    config: Any = "DayAndNight", copies: int = 1, overrides: dict | None = None, **kwargs: Any
) -> SurvivalWorld:
    """A world whose copies have no creatures and no items on the ground, the agent in the
    centre at the start of a clear day; nothing respawns and the weather stays."""
    still: dict[str, Any] = {
        "creatures": {name: {"respawn": 0.0} for name in load_config(config).creatures},
        "weather": {"change_chance": 0.0},
    }
    merged = OmegaConf.to_container(OmegaConf.merge(still, overrides or {}))
    env = SurvivalWorld(copies, seed=0, config=config, overrides=merged, **kwargs)  # type: ignore[arg-type]
    env.reset()
    s = env.state
    s.alive[:] = False
    s.dropped[:] = False
    s.x[:] = CENTRE
    s.y[:] = CENTRE
    s.weather[:] = 0
    env.refresh()
    return env


def place(env: SurvivalWorld, creature: str, dx: int, dy: int, copy: int = 0) -> int:
    """Put a creature at (dx, dy) from the agent; returns its slot."""
    rules, s = env.rules, env.state
    k = rules.creatures.names.index(creature)
    start, end = rules.creatures.block_start[k], rules.creatures.block_end[k]
    slot = int(start + np.flatnonzero(~s.alive[copy, start:end])[0])
    s.creature_x[copy, slot] = s.x[copy] + dx
    s.creature_y[copy, slot] = s.y[copy] + dy
    s.creature_hp[copy, slot] = rules.creatures.hp[k]
    s.alive[copy, slot] = True
    return slot


def meter(env: SurvivalWorld, name: str, copy: int = 0) -> float:
    return float(env.state.meters[copy, env.rules.meter_names.index(name)])


def set_meter(env: SurvivalWorld, name: str, value: float) -> None:
    env.state.meters[:, env.rules.meter_names.index(name)] = value


def carry(env: SurvivalWorld, item: str, count: int) -> None:
    env.state.backpack[:, env.rules.items.names.index(item)] = count


def carrying(env: SurvivalWorld, item: str, copy: int = 0) -> int:
    return int(env.state.backpack[copy, env.rules.items.names.index(item)])


def legal(env: SurvivalWorld, obs: VecObs, label: str, copy: int = 0) -> bool:
    """Whether the full action space's ``act`` offers ``label`` to copy ``copy``."""
    labels = env.action_space["act"].choices  # type: ignore[union-attr]
    mask = obs.action_masks["act"].mask
    assert mask is not None
    return bool(mask[copy][0, list(labels).index(label)])


def do(env: SurvivalWorld, obs: VecObs, label: str, target: int = 0, count: int = 1) -> VecObs:
    """Every copy takes the action ``label``; select-entity actions pick candidate ``target``;
    the ``count`` action (if any) asks for ``count`` units."""
    labels = list(env.action_space["act"].choices)  # type: ignore[union-attr]
    rows = env.num_envs
    ones = np.ones(rows, dtype=np.int64)
    actions = {"act": RaggedArray(np.full((rows, 1), labels.index(label), dtype=np.int64), ones)}
    for name, mask in obs.action_masks.items():
        if name != "act":
            choice = count - 1 if name == "count" else target
            chosen = np.full((mask.actors.items, 1), choice, dtype=np.int64)
            actions[name] = RaggedArray(chosen, mask.actors.lengths)
    return env.act(actions)


def do_simple(env: SurvivalWorld, choice: str) -> VecObs:
    """Every copy takes the simplified action ``choice``."""
    labels = list(env.action_space["act"].choices)  # type: ignore[union-attr]
    rows = env.num_envs
    data = np.full((rows, 1), labels.index(choice), dtype=np.int64)
    return env.act({"act": RaggedArray(data, np.ones(rows, dtype=np.int64))})


def seen(obs: VecObs, entity: str, copy: int = 0) -> np.ndarray:
    """The features of the ``entity`` entities in copy ``copy``'s row."""
    return obs.features[entity][copy]
