"""An environment whose right action can only be read off an image, and spaces with images of
both dtypes, for the image tests.

Module level, so that worker processes can build it by pickled reference.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from entityrl.env import (
    Action,
    CategoricalActionMask,
    CategoricalActionSpace,
    Entity,
    Environment,
    GlobalCategoricalActionSpace,
    Image,
    Observation,
    ObsSpace,
    SelectEntityActionMask,
    SelectEntityActionSpace,
)


class LitLamp(Environment):
    """Two lamps (feature ``x``: 0 for left, 1 for right, in random order) and a picker; an
    8x8 RGB image lights its left or right half. Picking the lamp on the lit side pays 1;
    episodes last one step. Neither the lamps' features nor the image alone say which lamp
    to pick: the policy must relate the two."""

    SIZE = 8

    def obs_space(self) -> ObsSpace:
        return ObsSpace(
            entities={"Lamp": Entity(["x"]), "Picker": Entity([])},
            images={"camera": Image((self.SIZE, self.SIZE, 3))},
        )

    def action_space(self) -> dict:
        return {"pick": SelectEntityActionSpace()}

    def reset(self) -> Observation:
        self.lit = int(self.rng.integers(2))
        self.xs = self.rng.permutation(2)
        return self.observe(self.lit, self.xs)

    def observe(self, lit: int, xs: np.ndarray) -> Observation:
        image = np.zeros((self.SIZE, self.SIZE, 3), np.uint8)
        half = self.SIZE // 2
        image[:, lit * half : (lit + 1) * half] = 255
        return Observation(
            features={"Lamp": xs.reshape(2, 1).astype(np.float32), "Picker": np.zeros((1, 0))},
            ids={"Lamp": [0, 1], "Picker": ["picker"]},
            actions={"pick": SelectEntityActionMask(actor_types=["Picker"], actee_types=["Lamp"])},
            images={"camera": image},
        )

    def act(self, actions: Mapping[str, Action]) -> Observation:
        (lamp,) = actions["pick"].actees
        return Observation(done=True, reward=float(self.xs[lamp] == self.lit))


# Two images of either dtype, one with a channel count the page draws as grey, sides that the
# small encoder halves to 8 or fewer cells unevenly; a global action (its token and the image
# tokens both follow the entities).
SPACE = ObsSpace(
    {"Unit": Entity(["x", "y", "hp"]), "Wall": Entity(["x", "y"])},
    ["time"],
    images={"camera": Image((12, 9, 3)), "heat": Image((5, 6, 2), "float32")},
)
ACTIONS = {
    "move": CategoricalActionSpace(["left", "right", "stay"]),
    "target": SelectEntityActionSpace(),
    "mode": GlobalCategoricalActionSpace(["calm", "alert"]),
}


def with_images(obs: Observation, obs_space: ObsSpace, seed: int) -> Observation:
    """``obs`` with random images of every image the space declares."""
    rng = np.random.default_rng(seed)
    obs.images = {
        name: rng.integers(0, 256, image.shape).astype(np.uint8)
        if image.dtype == "uint8"
        else rng.random(image.shape, dtype=np.float32)
        for name, image in obs_space.images.items()
    }
    return obs


class Glimpse(Environment):
    """A player walks a row of 4 cells for 3 steps, seen by three images: an 8x8 RGB camera
    (uint8) lit at its column, a 4x4 float32 heat map (1 channel) warm at its cell and a 3x3
    two-channel float32 radar. Moving right pays 1. For the recordings and the page's replay
    of images of every kind it draws."""

    def obs_space(self) -> ObsSpace:
        return ObsSpace(
            entities={"Player": Entity(["x", "y"])},
            images={
                "camera": Image((8, 8, 3)),
                "heat": Image((4, 4, 1), "float32"),
                "radar": Image((3, 3, 2), "float32"),
            },
        )

    def action_space(self) -> dict:
        return {"move": CategoricalActionSpace(["left", "right"])}

    def reset(self) -> Observation:
        self.x, self.steps = int(self.rng.integers(4)), 0
        return self.observe()

    def observe(self, reward: float = 0.0) -> Observation:
        camera = np.zeros((8, 8, 3), np.uint8)
        camera[:, 2 * self.x : 2 * self.x + 2] = (255, 128, 0)
        heat = np.zeros((4, 4, 1), np.float32)
        heat[1, self.x] = 1.0
        radar = np.full((3, 3, 2), self.steps / 3, np.float32)
        return Observation(
            features={"Player": np.array([[self.x, 1.0]], np.float32)},
            ids={"Player": ["player"]},
            actions={"move": CategoricalActionMask(actor_types=["Player"])},
            images={"camera": camera, "heat": heat, "radar": radar},
            reward=reward,
            done=self.steps == 3,
        )

    def act(self, actions: Mapping[str, Action]) -> Observation:
        right = int(actions["move"].indices[0])
        self.x = min(max(self.x + (1 if right else -1), 0), 3)
        self.steps += 1
        return self.observe(float(right))
