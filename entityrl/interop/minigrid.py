"""MiniGrid as an entity world: every object the agent sees is an entity.

Any MiniGrid (or BabyAI) task, named by its Gymnasium id (``minigrid:MiniGrid-DoorKey-5x5-v0``),
with no per-task code. MiniGrid's partial view is a grid of (object, colour, state) cells in
front of the agent; each visible cell holding an object (not empty, not unseen) becomes an
entity of that object's type (wall, floor, door, key, ball, box, goal, lava) with features

* colour (one-hot over MiniGrid's colours) and state (open/closed/locked, one-hot);
* its position relative to the agent: ``right`` (cells to the agent's right) and ``ahead``.

Globals: the agent's direction (one-hot) and what it carries (type and colour one-hot, zeros
when nothing). The mission text is not read (tasks that state their goal only in words, such
as GoToObject, are not fully observed). Actions: one global choice among MiniGrid's actions.
Each episode reports ``success`` (1 if it ended by reaching the task's goal).

``view="pixels"`` shows the same partial view as pixels instead: MiniGrid's own
``RGBImgPartialObsWrapper`` draws it (``tile_size`` pixels per cell: 56x56x3 at the default 7x7
cells and 8 pixels), and the Gymnasium space rule (:mod:`entityrl.interop.gym_spaces`) makes
it an image of the observation, ``image``, with the direction one-hot as global features
(``direction=0`` ... ``direction=3``); the network encodes it with a CNN (docs/images.md).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

import gymnasium
import minigrid  # noqa: F401 (registers the MiniGrid environments with Gymnasium)
import numpy as np
from minigrid.core.constants import COLOR_TO_IDX, OBJECT_TO_IDX, STATE_TO_IDX
from minigrid.wrappers import RGBImgPartialObsWrapper

from entityrl.env import (
    Action,
    Entity,
    Environment,
    GlobalCategoricalAction,
    GlobalCategoricalActionMask,
    GlobalCategoricalActionSpace,
    Observation,
    ObsSpace,
)
from entityrl.interop.gym_spaces import ObservationRule

# Cells that hold no object; the agent's own cell shows what it carries, read separately.
_NOT_OBJECTS = ("unseen", "empty", "agent")
OBJECT_TYPES = [name for name in OBJECT_TO_IDX if name not in _NOT_OBJECTS]
COLOURS = sorted(COLOR_TO_IDX, key=COLOR_TO_IDX.__getitem__)
STATES = sorted(STATE_TO_IDX, key=STATE_TO_IDX.__getitem__)
VIEWS = ("entities", "pixels")
DIRECTIONS = ["east", "south", "west", "north"]  # MiniGrid's agent_dir 0..3
OBJECT_FEATURES = [*(f"colour={c}" for c in COLOURS), *(f"state={s}" for s in STATES)]
OBJECT_FEATURES += ["right", "ahead"]
GLOBAL_FEATURES = [
    *(f"direction={d}" for d in DIRECTIONS),
    *(f"carrying={t}" for t in OBJECT_TYPES),
    *(f"carrying_colour={c}" for c in COLOURS),
]
# Object index (MiniGrid's) -> its entity type name, or None for cells that are no entity.
_TYPE_OF_INDEX = {index: name for name, index in OBJECT_TO_IDX.items() if name in OBJECT_TYPES}


def check_id(env_id: str) -> None:
    """Raise KeyError (with close matches) unless ``env_id`` is a registered MiniGrid task."""
    known = [k for k in gymnasium.registry if k.startswith(("MiniGrid-", "BabyAI-"))]
    if env_id not in known:
        close = difflib.get_close_matches(env_id, known, n=3, cutoff=0.6)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise KeyError(f"MiniGrid has no environment {env_id!r}.{hint}")


class MiniGridEnvironment(Environment):
    """One MiniGrid task (``make_kwargs`` go to ``gymnasium.make``), seen as entities or, with
    ``view="pixels"``, as an RGB image of ``tile_size`` pixels per cell."""

    def __init__(
        self, env_id: str, view: str = "entities", tile_size: int = 8, **make_kwargs: Any
    ) -> None:
        check_id(env_id)
        if view not in VIEWS:
            raise ValueError(f"{env_id}: view must be one of {list(VIEWS)}, got {view!r}")
        self.env_id = env_id
        self.env = gymnasium.make(env_id, **make_kwargs)
        self.actions = [a.name for a in self.env.unwrapped.actions]  # type: ignore[attr-defined]
        self._seed: int | None = None
        self.pixels: ObservationRule | None = None
        if view == "pixels":
            self.env = RGBImgPartialObsWrapper(self.env, tile_size)
            self.pixels = ObservationRule(
                self.env.observation_space, ignore=["mission"], env_name=env_id
            )

    def obs_space(self) -> ObsSpace:
        if self.pixels is not None:
            return self.pixels.obs_space
        return ObsSpace(
            entities={name: Entity(OBJECT_FEATURES) for name in OBJECT_TYPES},
            global_features=GLOBAL_FEATURES,
        )

    def action_space(self) -> dict[str, GlobalCategoricalActionSpace]:
        return {"action": GlobalCategoricalActionSpace(self.actions)}

    def seed(self, seed: int) -> None:
        super().seed(seed)
        self._seed = seed

    def reset(self) -> Observation:
        obs, _ = self.env.reset(seed=self._seed)
        self._seed = None
        return self._observe(obs)

    def act(self, actions: Mapping[str, Action]) -> Observation:
        action = actions["action"]
        assert isinstance(action, GlobalCategoricalAction)
        obs, reward, terminated, truncated, _ = self.env.step(action.index)
        done = bool(terminated or truncated)
        return self._observe(
            obs,
            reward=float(reward),
            done=done,
            truncated=bool(truncated and not terminated),
            metrics={"success": float(terminated and reward > 0)} if done else {},
        )

    def _observe(self, obs: Mapping[str, Any], **step: Any) -> Observation:
        if self.pixels is not None:
            return Observation(
                global_features=self.pixels.global_features(obs, 1)[0],
                images={name: pixels[0] for name, pixels in self.pixels.images(obs, 1).items()},
                actions={"action": GlobalCategoricalActionMask()},
                **step,
            )
        image = obs["image"]  # (x, y, [object, colour, state]); the agent at (view // 2, view - 1)
        view = image.shape[0]
        xs, ys = np.nonzero(np.isin(image[:, :, 0], list(_TYPE_OF_INDEX)))
        cells = image[xs, ys]
        rows = np.zeros((xs.size, len(OBJECT_FEATURES)), dtype=np.float32)
        rows[np.arange(xs.size), cells[:, 1]] = 1.0
        rows[np.arange(xs.size), len(COLOURS) + cells[:, 2]] = 1.0
        rows[:, -2] = xs - view // 2
        rows[:, -1] = view - 1 - ys
        kinds = cells[:, 0]
        features = {
            name: rows[kinds == index]
            for index, name in _TYPE_OF_INDEX.items()
            if (kinds == index).any()
        }
        return Observation(
            features=features,
            global_features=self._globals(int(obs["direction"])),
            actions={"action": GlobalCategoricalActionMask()},
            **step,
        )

    def _globals(self, direction: int) -> np.ndarray:
        values = np.zeros(len(GLOBAL_FEATURES), dtype=np.float32)
        values[direction] = 1.0
        carried = self.env.unwrapped.carrying  # type: ignore[attr-defined]
        if carried is not None:
            values[len(DIRECTIONS) + OBJECT_TYPES.index(carried.type)] = 1.0
            values[len(DIRECTIONS) + len(OBJECT_TYPES) + COLOURS.index(carried.color)] = 1.0
        return values

    def render(self) -> str:
        return self.env.unwrapped.pprint_grid()  # type: ignore[attr-defined,no-any-return]

    def close(self) -> None:
        self.env.close()


ADAPTER = MiniGridEnvironment
"""What ``minigrid:<id>`` names in entityrl's registry."""
