import math

import numpy as np
import pytest

from entityrl.env.ray_sensor import RaySensor
from entityrl.env.spaces import ObsSpace


def sensor(**kwargs: object) -> RaySensor:
    settings = {"tags": ("wall", "food"), "rays_per_direction": 1, "max_degrees": 90.0,
                "ray_length": 10.0} | kwargs  # fmt: skip
    return RaySensor(**settings)  # type: ignore[arg-type]


def test_rays_report_first_hit_type_and_distance() -> None:
    # Heading +x: rays point at -90 degrees (-y), 0 (+x), +90 (+y).
    rows = sensor().cast(
        (0.0, 0.0),
        0.0,
        {"wall": [[5.0, 0.0, 1.0], [0.0, 3.0, 0.5]], "food": [[3.0, 0.0, 0.5]]},
    )
    # Right ray (-y): nothing. Forward ray: food at 3 - 0.5 before the wall at 4.
    # Left ray (+y): wall entered at 3 - 0.5.
    expected = np.array(
        [[0, 0, 1, 1.0], [0, 1, 0, 0.25], [1, 0, 0, 0.25]],
        dtype=np.float32,
    )
    np.testing.assert_allclose(rows, expected, atol=1e-6)


def test_heading_turns_the_fan() -> None:
    rows = sensor().cast((0.0, 0.0), math.pi / 2, {"food": [[0.0, 4.0, 1.0]]})
    assert rows[1].tolist() == pytest.approx([0, 1, 0, 0.3])  # the forward ray now points +y
    assert rows[0, 2] == rows[2, 2] == 1.0


def test_objects_behind_or_beyond_the_ray_are_not_seen() -> None:
    rows = sensor().cast((0.0, 0.0), 0.0, {"wall": [[-3.0, 0.0, 1.0], [12.0, 0.0, 1.0]]})
    assert rows[:, 2].tolist() == [1.0, 1.0, 1.0]
    assert rows[:, 3].tolist() == [1.0, 1.0, 1.0]


def test_origin_inside_an_object_hits_at_zero() -> None:
    rows = sensor().cast((1.0, 1.0), 0.0, {"wall": [[1.5, 1.0, 1.0]]})
    assert rows[:, 0].tolist() == [1.0, 1.0, 1.0]
    assert rows[:, 3].tolist() == [0.0, 0.0, 0.0]


def test_sphere_cast_sees_what_a_thin_ray_passes() -> None:
    objects = {"food": [[5.0, 0.8, 0.5]]}  # 0.3 beside the forward ray's line
    assert sensor().cast((0, 0), 0.0, objects)[1, 2] == 1.0
    swept = sensor(sphere_radius=0.5).cast((0, 0), 0.0, objects)
    assert swept[1, 1] == 1.0
    assert swept[1, 3] == pytest.approx((5.0 - math.sqrt(1.0 - 0.8**2)) / 10.0)


def test_entity_and_global_layouts_declare_their_names() -> None:
    rays = sensor(rays_per_direction=2)
    objects = {"wall": [[2.0, 0.0, 0.5]]}
    entities = rays.entity_features((0, 0), 0.0, objects)
    assert entities.shape == (5, len(rays.ray_entity().features))
    np.testing.assert_allclose(entities[2, :2], [1.0, 0.0])  # the forward ray's direction
    flat = rays.global_features((0, 0), 0.0, objects)
    assert flat.shape == (len(rays.global_names()),)
    assert rays.global_names()[:4] == ["ray0_hit_wall", "ray0_hit_food", "ray0_no_hit",
                                       "ray0_distance"]  # fmt: skip
    ObsSpace(entities={"ray": rays.ray_entity()}, global_features=rays.global_names())


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tags": ()}, "tags must be distinct"),
        ({"tags": ("a", "a")}, "tags must be distinct"),
        ({"rays_per_direction": -1}, "rays_per_direction must be >= 0, got -1"),
        ({"max_degrees": 200.0}, r"max_degrees must be in \[0, 180\], got 200"),
        ({"ray_length": 0.0}, "ray_length > 0"),
    ],
)
def test_bad_settings_are_named(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        sensor(**kwargs)


def test_unknown_tags_and_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match=r"tags \['enemy'\] are not among"):
        sensor().cast((0, 0), 0.0, {"enemy": [[1.0, 0.0, 1.0]]})
    with pytest.raises(ValueError, match="origin must be"):
        sensor().cast((0, 0, 0), 0.0, {})
    with pytest.raises(ValueError, match="negative radii"):
        sensor().cast((0, 0), 0.0, {"wall": [[1.0, 0.0, -1.0]]})
