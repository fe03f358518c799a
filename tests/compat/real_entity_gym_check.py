"""Runs entity-gym's own example environments through entityrl.compat.entity_gym.

Needs an interpreter with entity-gym 0.1.x (the reference stack's venv) and entityrl on the
path; tests/compat/test_real_entity_gym.py starts it in a subprocess. For every example:

1. validation and vectorization: random legal play in a ``SerialVecEnv(validate=True)`` and in
   a ``ProcessVecEnv`` with two workers;
2. lockstep equality: entity-gym's ``EnvList`` and entityrl's ``SerialVecEnv`` start from the
   same global random state and receive the same actions; every batch must hold the same
   features, global features, visibility, actors, actees, masks, rewards and dones.

Prints one JSON line (per environment: steps checked and episodes seen); any difference raises.
usage: python real_entity_gym_check.py [NUM_ENVS] [STEPS]
"""

from __future__ import annotations

import json
import random
import sys
from typing import Any

import numpy as np

# isort: off
# First: importing entityrl's compat layer restores np.bool8, which entity-gym needs on numpy 2.
from entityrl.compat.entity_gym import from_entity_gym

# isort: on
from entity_gym.env import EnvList
from entity_gym.env.vec_env import VecCategoricalActionMask
from entity_gym.examples import ENV_REGISTRY
from ragged_buffer import RaggedBufferI64

from entityrl.env import ProcessVecEnv, RandomPolicy, SerialVecEnv, VecCategoricalMask, VecObs
from entityrl.envs import make_vec
from entityrl.ragged import RaggedArray


def random_play(env: Any, steps: int) -> int:
    """Random legal play; the number of episodes that ended."""
    with env:
        policy = RandomPolicy(env.action_space, seed=0)
        obs = env.reset()
        episodes = 0
        for _ in range(steps):
            obs = env.act(policy.act(obs))
            episodes += int(obs.done.sum())
    return episodes


# ---------------------------------------------------------------------------- lockstep
def reference_batch(obs: Any, obs_space: Any) -> dict[str, Any]:
    """The content of an entity-gym VecObs as plain arrays, in entityrl's terms."""
    batch: dict[str, Any] = {"reward": obs.reward, "done": obs.done}
    for name in obs_space.entities:
        feats = obs.features[name]
        batch[f"features/{name}"] = (feats.size1(), feats.as_array())
    if obs_space.global_features:
        batch["global"] = obs.features["__global__"].as_array()
    for name, vis in obs.visible.items():
        batch[f"visible/{name}"] = vis.as_array().ravel()
    for name, mask in obs.action_masks.items():
        batch[f"actors/{name}"] = (mask.actors.size1(), mask.actors.as_array().ravel())
        if isinstance(mask, VecCategoricalActionMask):
            if mask.mask is not None:
                batch[f"mask/{name}"] = mask.mask.as_array()
        else:
            batch[f"actees/{name}"] = (mask.actees.size1(), mask.actees.as_array().ravel())
    return batch


def our_batch(obs: VecObs, choices: dict[str, int]) -> dict[str, Any]:
    batch: dict[str, Any] = {"reward": obs.reward, "done": obs.done}
    for name, feats in obs.features.items():
        batch[f"features/{name}"] = (feats.lengths, feats.data)
    if obs.global_features.shape[1]:
        batch["global"] = obs.global_features
    for name, vis in obs.visible.items():
        batch[f"visible/{name}"] = vis.data.ravel()
    for name, mask in obs.action_masks.items():
        batch[f"actors/{name}"] = (mask.actors.lengths, mask.actors.data.ravel())
        if isinstance(mask, VecCategoricalMask):
            if mask.mask is not None:
                batch[f"mask/{name}"] = mask.mask.data
        else:
            batch[f"actees/{name}"] = (mask.actees.lengths, mask.actees.data.ravel())
            if mask.mask is not None:
                raise AssertionError(f"{name}: no example environment masks actees")
    return batch


# entity-gym 0.1.10 numbers the entities named by ``actor_types`` or ids counting only the
# entity types that have ids. FloorIsLava gives ids to its Player alone (the last type), so
# there the Player's action is read from entity 0, a Lava tile; entityrl uses the Player.
KNOWN_DIFFERENCES = {"FloorIsLava": {"actors/move"}}


def check_floor_is_lava_actor(batch: dict[str, Any]) -> None:
    """entityrl's actor of "move" in FloorIsLava is the Player, after the Lava and HighGround."""
    before = batch["features/Lava"][0] + batch["features/HighGround"][0]
    lengths, actors = batch["actors/move"]
    assert np.array_equal(lengths, np.ones_like(lengths)) and np.array_equal(actors, before)


def assert_same_batch(env: str, step: int, ref: dict[str, Any], ours: dict[str, Any]) -> None:
    if env == "FloorIsLava":
        check_floor_is_lava_actor(ours)
    skip = KNOWN_DIFFERENCES.get(env, set())
    # A mask that allows everything may be left out on either side.
    for key in set(ref) ^ set(ours):
        value = (ref | ours)[key]
        if not (key.startswith(("mask/", "visible/")) and np.all(value)):
            raise AssertionError(f"{env}, step {step}: {key} only on one side")
    for key in (set(ref) & set(ours)) - skip:
        a, b = ref[key], ours[key]
        parts = zip(a, b, strict=True) if isinstance(a, tuple) else [(a, b)]
        for x, y in parts:
            if not np.array_equal(np.asarray(x), np.asarray(y)):
                raise AssertionError(f"{env}, step {step}: {key} differs:\n{x}\n!=\n{y}")


def choose(
    batch: dict[str, Any], action_space: dict[str, Any], rng: np.random.Generator
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Random legal actions, as (lengths, values) per action name."""
    chosen = {}
    for name, space in action_space.items():
        lengths, _ = batch[f"actors/{name}"]
        actors = int(lengths.sum())
        if f"actees/{name}" in batch:
            widths = np.repeat(batch[f"actees/{name}"][0], lengths)
            values = (rng.random(actors) * widths).astype(np.int64)
        else:
            scores = rng.random((actors, len(space.index_to_label)))
            legal = batch.get(f"mask/{name}")
            if legal is not None:
                scores[~legal.astype(bool)] = -1.0
            values = scores.argmax(axis=1).astype(np.int64)
        chosen[name] = (np.asarray(lengths, dtype=np.int64), values)
    return chosen


def reseed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)


def lockstep(name: str, num_envs: int, steps: int) -> int:
    """Steps of entity-gym's EnvList and entityrl's SerialVecEnv compared; episodes seen."""
    cls = ENV_REGISTRY[name]
    reseed(11)
    reference = EnvList(cls, num_envs)
    obs_space, action_space = reference.obs_space(), reference.action_space()
    rng = np.random.default_rng(0)
    ref_batches, actions = [reference_batch(reference.reset(obs_space), obs_space)], []
    for _ in range(steps):
        chosen = choose(ref_batches[-1], action_space, rng)
        actions.append(chosen)
        given = {
            k: RaggedBufferI64.from_flattened(v.reshape(-1, 1), lengths)
            for k, (lengths, v) in chosen.items()
        }
        ref_batches.append(reference_batch(reference.act(given, obs_space), obs_space))
    reference.close()

    reseed(11)  # no seed below: the same global state entity-gym started from
    ours = SerialVecEnv(from_entity_gym(cls), num_envs)
    choices = ours.choices
    assert_same_batch(name, 0, ref_batches[0], our_batch(ours.reset(), choices))
    episodes = 0
    for step, chosen in enumerate(actions, start=1):
        given = {k: RaggedArray(v.reshape(-1, 1), lengths) for k, (lengths, v) in chosen.items()}
        obs = ours.act(given)
        episodes += int(obs.done.sum())
        assert_same_batch(name, step, ref_batches[step], our_batch(obs, choices))
    ours.close()
    return episodes


def main() -> None:
    num_envs = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    report = {}
    for name, cls in ENV_REGISTRY.items():
        factory = from_entity_gym(cls)
        assert factory.env_id == f"entity_gym:{cls.__module__}:{name}", factory.env_id
        report[name] = {
            "by_name_episodes": random_play(make_vec(factory.env_id, num_envs, seed=0), steps),
            "validated_episodes": random_play(
                SerialVecEnv(factory, num_envs, seed=0, validate=True), steps
            ),
            "process_episodes": random_play(
                ProcessVecEnv(factory, num_envs, seed=0, num_workers=2), steps // 2
            ),
            "lockstep_steps": steps,
            "lockstep_episodes": lockstep(name, num_envs, steps),
        }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
