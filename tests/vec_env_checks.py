"""Checks shared by the test suites that step vectorized environments (tests/env, tests/envs,
tests/compat): importable from every test module because pytest puts this folder on sys.path
when it loads tests/conftest.py."""

from __future__ import annotations

import numpy as np

from entityrl.env import RandomPolicy, VecEnv, VecObs, VecSelectEntityMask
from entityrl.ragged import RaggedArray

Actions = dict[str, RaggedArray]

PLAIN = (type(None), bool, int, float, str)


def assert_plain(state: object, where: str = "state") -> None:
    """``state`` holds only what a weights-only checkpoint loads: None, bools, numbers,
    strings, and dicts and lists of them (no pickled object, no class)."""
    if isinstance(state, dict):
        for key, value in state.items():
            assert type(key) is str, f"{where}: key {key!r}"
            assert_plain(value, f"{where}.{key}")
    elif isinstance(state, list):
        for i, value in enumerate(state):
            assert_plain(value, f"{where}[{i}]")
    else:
        assert type(state) in PLAIN, f"{where}: a {type(state).__name__}"


def assert_vec_obs_equal(a: VecObs, b: VecObs, metrics_rtol: float = 0.0) -> None:
    """Every field of two batches is equal: entities, visibility, masks, rewards, ends and
    metrics (the latter within ``metrics_rtol``, exactly by default)."""
    assert a.features.keys() == b.features.keys()
    for name in a.features:
        assert a.features[name] == b.features[name], name
    np.testing.assert_array_equal(a.global_features, b.global_features)
    np.testing.assert_array_equal(a.reward, b.reward)
    np.testing.assert_array_equal(a.done, b.done)
    assert a.visible.keys() == b.visible.keys()
    for name in a.visible:
        assert a.visible[name] == b.visible[name], name
    assert a.action_masks.keys() == b.action_masks.keys()
    for name, mask in a.action_masks.items():
        other = b.action_masks[name]
        assert type(mask) is type(other), name
        assert mask.actors == other.actors, name
        if isinstance(mask, VecSelectEntityMask):
            assert mask.actees == other.actees, name  # type: ignore[union-attr]
        assert (mask.mask is None) == (other.mask is None), name
        if mask.mask is not None:
            assert mask.mask == other.mask, name
    assert a.metrics.keys() == b.metrics.keys()
    for key in a.metrics:
        np.testing.assert_allclose(a.metrics[key], b.metrics[key], rtol=metrics_rtol, err_msg=key)


def play_past_a_saved_state(
    env: VecEnv, warmup: int, steps: int
) -> tuple[VecObs, bytes, list[Actions], list[VecObs]]:
    """Reset ``env``, play ``warmup`` random steps, save its state, then play ``steps`` more.

    Returns the batch at the save, the saved state, and the actions and batches that followed,
    for a test to restore the state and replay them.
    """
    policy = RandomPolicy(env.action_space, seed=0)
    saved_obs = env.reset()
    for _ in range(warmup):
        saved_obs = env.act(policy.act(saved_obs))
    state = env.get_state()
    assert_plain(state)  # it travels in checkpoints that load without unpickling
    actions: list[Actions] = []
    batches: list[VecObs] = []
    obs = saved_obs
    for _ in range(steps):
        actions.append(policy.act(obs))
        obs = env.act(actions[-1])
        batches.append(obs)
    return saved_obs, state, actions, batches


def assert_replays(env: VecEnv, actions: list[Actions], batches: list[VecObs]) -> None:
    """Given ``actions`` one after the other, ``env`` answers exactly ``batches``."""
    for step_actions, expected in zip(actions, batches, strict=True):
        assert_vec_obs_equal(env.act(step_actions), expected)
