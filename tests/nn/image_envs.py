"""An environment whose right action can only be read off an image, for the image tests.

Module level, so that worker processes can build it by pickled reference.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from entityrl.env import (
    Action,
    Entity,
    Environment,
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
