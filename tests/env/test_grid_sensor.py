"""The grid sensor rasterizes entities exactly where their positions say."""

from __future__ import annotations

import numpy as np
import pytest

from entityrl.env import Entity, Image, Observation, ObsSpace, validate_observation
from entityrl.env.grid_sensor import GridSensor

SPACE = ObsSpace(
    entities={
        "Agent": Entity(["x", "y"]),
        "Food": Entity(["x", "y", "ripe"]),
        "Wall": Entity(["y", "x"]),  # another column order: read by name
    }
)
OBS = Observation(
    features={
        "Agent": np.array([[2.0, 1.0]]),
        "Food": np.array([[0.0, 0.0, 0.25], [3.0, 2.0, 1.0], [9.0, 0.0, 0.5]]),  # last: outside
        "Wall": np.array([[2.0, 3.5], [1.9, -0.5]]),  # (y, x): cell (2, 3); x < 0 is outside
    }
)


def test_fixed_grid_has_a_presence_channel_per_type_and_feature_channels() -> None:
    sensor = GridSensor(SPACE, {"Food": ["ripe"], "Wall": []}, size=(3, 4))
    assert sensor.image == Image((3, 4, 3), "float32")
    grid = sensor(OBS)
    expected = np.zeros((3, 4, 3), np.float32)
    expected[0, 0, 0:2] = [1.0, 0.25]  # food at (x 0, y 0), ripe 0.25
    expected[2, 3, 0:2] = [1.0, 1.0]  # food at (x 3, y 2)
    expected[2, 3, 2] = 1.0  # wall at (x 3.5, y 2)
    np.testing.assert_array_equal(grid, expected)


def test_centred_grid_puts_the_anchor_in_the_middle_cell_and_scales_by_cell_size() -> None:
    sensor = GridSensor(
        SPACE, {"Agent": [], "Food": []}, size=(3, 3), cell_size=2.0, center="Agent"
    )
    grid = sensor(OBS)
    agent = np.zeros((3, 3), np.float32)
    agent[1, 1] = 1.0  # the agent itself, in the middle cell
    np.testing.assert_array_equal(grid[..., 0], agent)
    # Agent at (2, 1); cells 2 wide, the middle one covering x in [1, 3), y in [0, 2): food
    # (0, 0) -> column 0 (x in [-1, 1)), row 1; food (3, 2) -> column 2, row 2; (9, 0) outside.
    food = np.zeros((3, 3), np.float32)
    food[1, 0] = food[2, 2] = 1.0
    np.testing.assert_array_equal(grid[..., 1], food)


def test_the_image_validates_as_the_space_declares_it() -> None:
    sensor = GridSensor(SPACE, {"Food": ["ripe"]}, size=(3, 4))
    space = ObsSpace(entities=SPACE.entities, images={"grid": sensor.image})
    validate_observation(
        Observation(features=OBS.features, images={"grid": sensor(OBS)}), space, {}
    )


def test_bad_settings_name_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="unknown entity type 'Tree'"):
        GridSensor(SPACE, {"Tree": []}, size=(2, 2))
    with pytest.raises(ValueError, match=r"'Food' has no features \['mass'\]"):
        GridSensor(SPACE, {"Food": ["mass"]}, size=(2, 2))
    with pytest.raises(ValueError, match="size must be"):
        GridSensor(SPACE, {"Food": []}, size=(0, 2))
    sensor = GridSensor(SPACE, {"Food": []}, size=(2, 2), center="Agent")
    with pytest.raises(ValueError, match="no 'Agent' entity"):
        sensor(Observation(features={"Food": np.zeros((1, 3))}))
