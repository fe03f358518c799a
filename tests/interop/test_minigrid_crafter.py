"""MiniGrid and Crafter as entity worlds: what the entities say, metrics, registry names."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("minigrid")
pytest.importorskip("crafter")

from entityrl.envs import make, make_vec
from entityrl.interop.crafter import ACHIEVEMENTS, crafter_score
from entityrl.interop.minigrid import OBJECT_FEATURES
from entityrl.ragged import RaggedArray


def _global(env, choice: int) -> dict[str, RaggedArray]:  # type: ignore[no-untyped-def]
    n = env.num_envs
    return {"action": RaggedArray(np.full((n, 1), choice, np.int64), np.ones(n, np.int64))}


def test_minigrid_objects_are_entities_placed_relative_to_the_agent() -> None:
    env = make("minigrid:MiniGrid-Empty-5x5-v0")
    env.seed(0)
    obs = env.reset()
    goal = np.asarray(obs.features["goal"])
    # Empty-5x5: the agent starts at (1, 1) facing east; the goal is at (3, 3), two cells
    # ahead and two to the right.
    right, ahead = OBJECT_FEATURES.index("right"), OBJECT_FEATURES.index("ahead")
    assert goal[:, [right, ahead]].tolist() == [[2.0, 2.0]]
    assert obs.global_features[:4].tolist() == [1.0, 0.0, 0.0, 0.0]  # facing east
    assert "wall" in obs.features and "key" not in obs.features


def test_minigrid_reports_success_and_truncation() -> None:
    env = make_vec("minigrid:MiniGrid-Empty-5x5-v0", 2, seed=0, validate=True, max_steps=3)
    env.reset()
    for _ in range(3):
        obs = env.act(_global(env, 0))  # turning left forever never reaches the goal
    assert obs.done.all() and obs.truncated is not None and obs.truncated.all()
    assert obs.metrics["success"].tolist() == [0.0, 0.0]


def test_minigrid_unknown_task_is_refused_with_suggestions() -> None:
    with pytest.raises(KeyError, match="Did you mean MiniGrid-Empty-5x5-v0"):
        make("minigrid:MiniGrid-Empty-5x4-v0")


def test_crafter_shows_its_local_view_as_entities_and_reports_achievements() -> None:
    env = make_vec("crafter:default", 1, seed=1, validate=True, length=5)
    obs = env.reset()
    assert obs.global_features[0, :4].tolist() == [
        9.0,
        9.0,
        9.0,
        9.0,
    ]  # health, food, drink, energy
    seen = {name for name, rows in obs.features.items() if rows.items}
    assert seen and "grass" not in obs.features
    for name in seen:  # inside the 9 x 7 window around the player
        positions = obs.features[name].data[:, :2]
        assert (np.abs(positions[:, 0]) <= 4).all() and (np.abs(positions[:, 1]) <= 3).all()
    for _ in range(5):
        obs = env.act(_global(env, 0))
    assert obs.done.all() and obs.truncated is not None and obs.truncated.all()
    assert sorted(k.removeprefix("achievement/") for k in obs.metrics if "/" in k) == sorted(
        ACHIEVEMENTS
    )


def test_crafter_score_is_the_geometric_mean_of_success_rates() -> None:
    assert crafter_score([0.0] * 22) == pytest.approx(0.0)
    assert crafter_score([1.0] * 22) == pytest.approx(100.0)
    assert crafter_score({"a": 0.0, "b": 0.99}) == pytest.approx(9.0)


def _crafter(view: str):  # type: ignore[no-untyped-def]
    from entityrl.interop.crafter import CrafterEnvironment

    env = CrafterEnvironment(view=view)
    env.seed(3)
    env.reset()
    return env


def test_crafter_pixel_view_drops_health_and_matches_the_full_view_by_day() -> None:
    full, pixels = _crafter("full"), _crafter("pixels")
    assert full.obs_space().entities["Zombie"].features == ("right", "down", "health")
    assert pixels.obs_space().entities["Zombie"].features == ("right", "down")
    assert pixels.obs_space().entities["Plant"].features == ("right", "down", "ripe")
    for env in (full, pixels):
        env.env._world.daylight = 1.0
    day_full, day_pixels = full._observe(), pixels._observe()
    assert day_full.features.keys() == day_pixels.features.keys()
    for name, rows in day_full.features.items():
        np.testing.assert_array_equal(
            np.asarray(rows)[:, :2], np.asarray(day_pixels.features[name])[:, :2]
        )


def test_crafter_pixel_view_hides_cells_at_night_as_the_pixels_noise_does() -> None:
    from entityrl.interop.crafter import VIEW, _hidden_chance

    chance = _hidden_chance(0.0)
    assert chance.shape == VIEW and chance[4, 3] == 0.0  # the player's cell stays clear
    assert chance[0, 0] == pytest.approx(1 - np.exp(-0.5 * ((8 / 9) ** 2 + (6 / 7) ** 2) / 0.25))
    assert _hidden_chance(0.5).max() == 0.0 and 0 < _hidden_chance(0.3).max() < chance.max()
    env = _crafter("pixels")
    env.env._world.daylight = 0.0
    full = sum(len(rows) for rows in _crafter("full")._observe().features.values())
    counts = [sum(len(rows) for rows in env._observe().features.values()) for _ in range(50)]
    # Fewer entities on average (about half the window is mostly noise), and not always the same.
    assert np.mean(counts) < 0.8 * full and len(set(counts)) > 1


def test_crafter_unknown_view_is_refused() -> None:
    from entityrl.interop.crafter import CrafterEnvironment

    with pytest.raises(
        ValueError, match=r"view must be one of \['full', 'pixels', 'image'\], got 'pixel'"
    ):
        CrafterEnvironment(view="pixel")


def test_crafter_image_view_is_crafters_own_frame_and_nothing_else() -> None:
    env = make_vec("crafter:default", 2, seed=1, validate=True, view="image", length=5)
    assert env.obs_space.entities == {} and env.obs_space.global_features == ()
    obs = env.reset()
    assert obs.images["frame"].shape == (2, 64, 64, 3) and obs.images["frame"].dtype == np.uint8
    # A drawn frame, not a blank one: grass, the player and the inventory row differ in colour.
    assert len(np.unique(obs.images["frame"][0].reshape(-1, 3), axis=0)) > 10
    for _ in range(5):  # to the time limit: truncated, with the achievements
        obs = env.act(_global(env, 0))
    assert obs.done.all() and obs.truncated is not None and obs.truncated.all()
    assert "achievement/collect_wood" in obs.metrics
