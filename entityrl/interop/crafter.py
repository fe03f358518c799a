"""Crafter as an entity world: what the player's local view shows, as entities.

Crafter's player sees a 9 x 7 window of the world around it (the pixels of its own
observation). Here that window is read from the world's state instead of rendered:

* every material cell other than grass (the background) is an entity of that material's type
  (water, stone, path, sand, tree, lava, coal, iron, diamond, table, furnace) with its position
  relative to the player (``right``, ``down``);
* every creature and object in the window (zombie, skeleton, cow, plant, arrow) is an entity
  with its relative position, its health and, for a plant, whether it is ripe;
* globals: the inventory (health, food, drink, energy and the 12 items), the direction the
  player faces, whether it sleeps, and the daylight.

That view shows more than Crafter's pixels do: creature and plant health (no texture shows
it), and the whole window at night, when the pixels fade the cells away from the player into
noise. ``view="pixels"`` hides both, for comparisons with agents that learn from pixels: no
health features, and at night each cell's entities are dropped with the chance its pixels
are noise (Crafter blends noise into the night view by a vignette around the player, in
proportion to the darkness; here a cell is hidden with probability ``(1 - daylight) * amount *
vignette(cell)``, ``amount = 2 * (0.5 - daylight)`` below half daylight, drawn afresh every
step, as the pixels' noise is). Sleeping only greys the pixels (textures stay apart), so it
hides no entity; the night noise applies asleep or awake.

``view="image"`` is what the Crafter paper's agents see: Crafter's own 64 x 64 RGB frame (the
local view drawn, night, sleep and the inventory row included) as the image ``frame``, with no
entities and no global features; the network reads it through its image encoder
(``net.image_encoder``, docs/images.md). Drawing the frame costs most of a step.

Actions: Crafter's 17, one global choice. Each episode reports ``achievement/<name>`` (1 if
unlocked) for Crafter's 22 achievements; :func:`crafter_score` turns their success rates into
the score of the Crafter paper. ``crafter:<anything>`` names it in the registry (the id is
ignored; ``crafter:default``); constructor arguments go to ``crafter.Env`` (``length``,
``area``...).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import crafter
import numpy as np
import numpy.typing as npt
from crafter import constants, objects

from entityrl.env import (
    Action,
    Entity,
    Environment,
    GlobalCategoricalAction,
    GlobalCategoricalActionMask,
    GlobalCategoricalActionSpace,
    Image,
    Observation,
    ObsSpace,
)

VIEW = (9, 7)  # the local view of Crafter's default 9 x 9 observation (2 rows hold items)
MATERIALS = [m for m in constants.materials if m != "grass"]
CREATURES = {"Zombie": objects.Zombie, "Skeleton": objects.Skeleton, "Cow": objects.Cow}
POSITION = ["right", "down"]
ITEMS = list(constants.items)
GLOBAL_FEATURES = [*ITEMS, "facing_x", "facing_y", "sleeping", "daylight"]
ACHIEVEMENTS = list(constants.achievements)
VIEWS = ("full", "pixels", "image")
FRAME = (64, 64, 3)  # crafter.Env's default observation


def check_id(env_id: str) -> None:
    """Crafter has one world; any id names it."""


class _Headless(crafter.Env):  # type: ignore[misc]
    """Crafter without drawing its pixel observation on every step (2/3 of a step's time);
    the entities are read from the world."""

    def _obs(self) -> None:
        return None


def crafter_score(success_rates: Mapping[str, float] | Iterable[float]) -> float:
    """The Crafter paper's score: the geometric mean of ``1 + success rate`` (in percent) over
    the achievements, minus one. Rates are fractions in [0, 1]."""
    rates = np.array(
        list(success_rates.values() if isinstance(success_rates, Mapping) else success_rates)
    )
    return float(np.exp(np.mean(np.log(1 + 100 * rates))) - 1)


class CrafterEnvironment(Environment):
    """One Crafter world (``view``: "full" or "pixels", see the module; ``env_kwargs`` go to
    ``crafter.Env``)."""

    def __init__(self, env_id: str = "default", view: str = "full", **env_kwargs: Any) -> None:
        if view not in VIEWS:
            raise ValueError(f"Crafter view must be one of {list(VIEWS)}, got {view!r}")
        self.view = view
        self.env_kwargs = env_kwargs
        self.env: crafter.Env | None = None

    def obs_space(self) -> ObsSpace:
        if self.view == "image":
            return ObsSpace(entities={}, images={"frame": Image(FRAME)})
        health = ["health"] if self.view == "full" else []
        entities = {m: Entity(POSITION) for m in MATERIALS}
        entities |= {name: Entity([*POSITION, *health]) for name in CREATURES}
        entities["Plant"] = Entity([*POSITION, *health, "ripe"])
        entities["Arrow"] = Entity([*POSITION, "facing_x", "facing_y"])
        return ObsSpace(entities=entities, global_features=GLOBAL_FEATURES)

    def action_space(self) -> dict[str, GlobalCategoricalActionSpace]:
        return {"action": GlobalCategoricalActionSpace(constants.actions)}

    def reset(self) -> Observation:
        # Built here, seeded from this environment's generator: Crafter seeds at construction.
        seed = int(self.rng.integers(2**31 - 1))
        world = crafter.Env if self.view == "image" else _Headless
        self.env = world(seed=seed, **self.env_kwargs)
        return self._observe(frame=self.env.reset())

    def act(self, actions: Mapping[str, Action]) -> Observation:
        assert self.env is not None
        action = actions["action"]
        assert isinstance(action, GlobalCategoricalAction)
        frame, reward, done, info = self.env.step(action.index)
        metrics = {}
        if done:
            metrics = {f"achievement/{k}": float(v > 0) for k, v in info["achievements"].items()}
        return self._observe(
            frame=frame,
            reward=float(reward),
            done=bool(done),
            # Crafter's discount is 0 when the player died, 1 when the time limit ended it.
            truncated=bool(done and info["discount"] == 1),
            metrics=metrics,
        )

    def _observe(self, frame: npt.NDArray[np.uint8] | None = None, **step: Any) -> Observation:
        assert self.env is not None
        if self.view == "image":
            assert frame is not None
            return Observation(
                images={"frame": frame},
                actions={"action": GlobalCategoricalActionMask()},
                **step,
            )
        world, player = self.env._world, self.env._player
        low = np.array(player.pos) - np.array(VIEW) // 2
        x0, y0 = np.maximum(low, 0)
        x1, y1 = np.minimum(low + VIEW, world.area)
        seen = np.ones((x1 - x0, y1 - y0), dtype=bool)
        if self.view == "pixels":
            window = (slice(x0 - low[0], x1 - low[0]), slice(y0 - low[1], y1 - low[1]))
            seen = self.rng.random(seen.shape) >= _hidden_chance(world.daylight)[window]
        materials = np.where(seen, world._mat_map[x0:x1, y0:y1], -1)
        features: dict[str, npt.NDArray[np.float32]] = {}
        for name in MATERIALS:
            xs, ys = np.nonzero(materials == world._mat_ids[name])
            if xs.size:
                features[name] = np.stack([xs + x0 - player.pos[0], ys + y0 - player.pos[1]], 1)
        rows: dict[str, list[list[float]]] = {}
        for obj_id in np.unique(world._obj_map[x0:x1, y0:y1][seen]):
            obj = world._objects[obj_id] if obj_id else None
            if obj is None or obj is player:
                continue
            right, down = (obj.pos - player.pos).tolist()
            name = type(obj).__name__
            health = [obj.health] if self.view == "full" and name != "Arrow" else []
            if name == "Plant":
                rows.setdefault(name, []).append([right, down, *health, float(obj.ripe)])
            elif name == "Arrow":
                rows.setdefault(name, []).append([right, down, *obj.facing])
            elif name in CREATURES:
                rows.setdefault(name, []).append([right, down, *health])
        features |= {name: np.array(values, dtype=np.float32) for name, values in rows.items()}
        inventory = [player.inventory[item] for item in ITEMS]
        return Observation(
            features=features,
            global_features=np.array(
                [*inventory, *player.facing, float(player.sleeping), world.daylight],
                dtype=np.float32,
            ),
            actions={"action": GlobalCategoricalActionMask()},
            **step,
        )

    def render(self) -> str:
        assert self.env is not None
        player = self.env._player
        held = ", ".join(f"{k} {v}" for k, v in player.inventory.items() if v)
        return f"Crafter step {self.env._step}: player at {tuple(player.pos)}; {held}"


def _hidden_chance(daylight: float) -> npt.NDArray[np.float64]:
    """Per cell of the local view, the share of its pixels that Crafter's night turns to noise
    (its noise mask, vignette around the player, weighted by the darkness it is blended with)."""
    if daylight >= 0.5:
        return np.zeros(VIEW)
    return (1 - daylight) * 2 * (0.5 - daylight) * _VIGNETTE


def _vignette(stddev: float = 0.5) -> npt.NDArray[np.float64]:
    # At each cell's centre, in coordinates running from -1 to 1 across the view.
    xs, ys = (np.linspace(-1, 1, 2 * n + 1)[1::2] for n in VIEW)
    squared = xs[:, None] ** 2 + ys[None, :] ** 2
    return 1 - np.exp(-0.5 * squared / stddev**2)


_VIGNETTE = _vignette()

ADAPTER = CrafterEnvironment
"""What ``crafter:<id>`` names in entityrl's registry."""
