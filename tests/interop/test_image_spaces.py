"""Gymnasium image spaces become images of the observation; MiniGrid's pixel view uses them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")

from gymnasium import spaces  # noqa: E402
from gymnasium.vector import AutoresetMode, SyncVectorEnv  # noqa: E402

from entityrl.env import Image, SerialVecEnv, validate_vec_obs  # noqa: E402
from entityrl.envs import make, make_vec  # noqa: E402
from entityrl.interop.gym_spaces import ObservationRule  # noqa: E402
from entityrl.interop.gymnasium import GymnasiumEnvironment, GymnasiumVecEnv  # noqa: E402
from entityrl.ragged import RaggedArray  # noqa: E402


class Blink(gymnasium.Env[Any, Any]):
    """A 4x4 grey image, lit or dark; saying which (action 1: lit) pays 1. Three steps."""

    observation_space = spaces.Dict(
        {"frame": spaces.Box(0, 255, (4, 4, 1), np.uint8), "time": spaces.Box(0, 3, (1,))}
    )
    action_space = spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def _obs(self) -> dict[str, np.ndarray]:
        self.lit = int(self.np_random.integers(2))
        frame = np.full((4, 4, 1), 255 * self.lit, np.uint8)
        return {"frame": frame, "time": np.array([self.t], np.float32)}

    def step(self, action: int) -> tuple[Any, float, bool, bool, dict]:
        reward = float(action == self.lit)
        self.t += 1
        return self._obs(), reward, self.t == 3, False, {}


def test_uint8_boxes_of_1_3_or_4_channels_are_images_other_boxes_stay_features() -> None:
    space = spaces.Dict(
        {
            "rgb": spaces.Box(0, 255, (6, 5, 3), np.uint8),
            "depth": spaces.Box(0, 1, (6, 5, 1), np.float32),  # float: features
            "pair": spaces.Box(0, 255, (2, 2, 2), np.uint8),  # 2 channels: features
            "nested": spaces.Tuple((spaces.Box(0, 255, (3, 3, 4), np.uint8),)),
        }
    )
    rule = ObservationRule(space)
    assert rule.obs_space.images == {"nested.0": Image((3, 3, 4)), "rgb": Image((6, 5, 3))}
    assert len(rule.obs_space.global_features) == 6 * 5 + 2 * 2 * 2
    sample = space.sample()
    images = rule.images(sample, 1)
    np.testing.assert_array_equal(images["rgb"][0], sample["rgb"])
    np.testing.assert_array_equal(images["nested.0"][0], sample["nested"][0])
    bare = ObservationRule(spaces.Box(0, 255, (8, 8, 3), np.uint8))
    assert bare.obs_space.images == {"obs": Image((8, 8, 3))} and not bare.obs_space.global_features


def test_gymnasium_envs_single_and_vector_give_the_same_images() -> None:
    single = SerialVecEnv(lambda: GymnasiumEnvironment(Blink()), 2, seed=3, validate=True)
    vector = GymnasiumVecEnv(
        SyncVectorEnv([Blink, Blink], autoreset_mode=AutoresetMode.SAME_STEP),
        seed=3,
    )
    for envs in (single, vector):
        obs = envs.reset()
        validate_vec_obs(obs, envs.obs_space, envs.action_space)
        assert obs.images["frame"].shape == (2, 4, 4, 1)
        assert envs.obs_space.global_features == ("time[0]",)
        lit = obs.images["frame"][:, 0, 0, 0] // 255
        step = envs.act(
            {"action": RaggedArray(lit.reshape(2, 1).astype(np.int64), np.ones(2, np.int64))}
        )
        assert step.reward.tolist() == [1.0, 1.0]  # the image told which


def test_minigrid_pixel_view_is_the_rgb_partial_view_and_the_direction() -> None:
    pytest.importorskip("minigrid")
    envs = make_vec("minigrid:MiniGrid-Empty-5x5-v0", 2, seed=0, validate=True, view="pixels")
    obs = envs.reset()
    assert envs.obs_space.images == {"image": Image((56, 56, 3))}
    assert not envs.obs_space.entities
    assert envs.obs_space.global_features == tuple(f"direction={d}" for d in range(4))
    assert obs.images["image"].shape == (2, 56, 56, 3) and obs.images["image"].any()
    np.testing.assert_array_equal(obs.global_features[:, 0], [1.0, 1.0])  # facing east
    small = make("minigrid:MiniGrid-Empty-5x5-v0", view="pixels", tile_size=4)
    assert small.obs_space().images["image"] == Image((28, 28, 3))
    with pytest.raises(
        ValueError, match=r"view must be one of \['entities', 'pixels'\], got 'rgb'"
    ):
        make("minigrid:MiniGrid-Empty-5x5-v0", view="rgb")
