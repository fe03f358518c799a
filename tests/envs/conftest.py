"""Shared helpers for the environment tests."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pytest
from vec_env_checks import assert_vec_obs_equal

from entityrl.env import (
    Action,
    CategoricalActionMask,
    Environment,
    GlobalCategoricalActionMask,
    Observation,
    ObsSpace,
    SelectEntityActionMask,
    VecCategoricalMask,
    VecObs,
)

Policy = Callable[[Environment, Observation], Mapping[str, Action]]


def play_episode(env: Environment, policy: Policy, seed: int, max_steps: int = 10_000) -> float:
    """Seed and reset ``env``, act with ``policy`` until the episode ends; return the return."""
    env.seed(seed)
    obs = env.reset()
    total = 0.0
    for _ in range(max_steps):
        obs = env.act(policy(env, obs))
        total += obs.reward
        if obs.done:
            return total
    raise AssertionError(f"episode did not end within {max_steps} steps")


@pytest.fixture
def play() -> Callable[..., float]:
    return play_episode


def vec_obs_rows(obs: VecObs, obs_space: ObsSpace) -> list[Observation]:
    """Each row of a batch as an Observation (entities named by their index in the row), so a
    batch built without Observations can be checked by the Observation validator."""
    observations = []
    for row in range(obs.num_rows):
        features = {name: obs.features[name][row] for name in obs_space.entities}
        ids: dict[str, list[int]] = {}
        start = 0
        for name, rows in features.items():
            ids[name] = list(range(start, start + rows.shape[0]))
            start += rows.shape[0]
        actions = {}
        for name, mask in obs.action_masks.items():
            actors = mask.actors[row][:, 0].tolist()
            if isinstance(mask, VecCategoricalMask):
                legal = None if mask.mask is None else mask.mask[row]
                if actors == [start]:  # the pseudo-entity of a global action
                    actions[name] = GlobalCategoricalActionMask(None if legal is None else legal[0])
                else:
                    actions[name] = CategoricalActionMask(actor_ids=actors, mask=legal)
            else:
                actees = mask.actees[row][:, 0].tolist()
                legal = None if mask.mask is None else mask.mask[row].reshape(len(actors), -1)
                actions[name] = SelectEntityActionMask(
                    actor_ids=actors, actee_ids=actees, mask=legal
                )
        observations.append(
            Observation(
                features=features,
                ids=ids,
                actions=actions,
                global_features=obs.global_features[row],
                visible={name: v[row][:, 0] for name, v in obs.visible.items()},
                reward=float(obs.reward[row]),
                done=bool(obs.done[row]),
            )
        )
    return observations


def same_batch(a: VecObs, b: VecObs) -> None:
    """Assert that two batches hold the same entities, masks, rewards, ends and metrics."""
    assert_vec_obs_equal(a, b, metrics_rtol=1e-6)


@pytest.fixture
def assert_same_batch() -> Callable[[VecObs, VecObs], None]:
    return same_batch


@pytest.fixture
def as_observations() -> Callable[[VecObs, ObsSpace], list[Observation]]:
    return vec_obs_rows
