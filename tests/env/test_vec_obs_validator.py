"""validate_vec_obs: one test per rule, each checking that the message names the environment,
the field, the row (and entity or actor), what was expected and what came; then the option
that turns it on in a BatchedEnvironment."""

from __future__ import annotations

import copy
from collections.abc import Callable

import numpy as np
import pytest
from test_validator import ACTIONS, ENV, OBS_SPACE, good
from tiny_envs import Countdown

from entityrl.env import (
    Batcher,
    CategoricalActionMask,
    EnvValidationError,
    GlobalCategoricalActionMask,
    Observation,
    RaggedArray,
    RandomPolicy,
    SelectEntityActionMask,
    VecCategoricalMask,
    VecObs,
    VecSelectEntityMask,
    validate_vec_obs,
)
from entityrl.envs import make_vec

T, F = True, False
# Rows of the validator tests' toy world.
ROWS = [
    good(),  # row 0: entities 0-1 are robots, 2 a mine; the global action's actor is 3
    # Row 1: entity 0 is a robot, 1-2 mines; the robot may only shoot the second mine.
    Observation(
        features={"Robot": [[3, 3]], "Mine": [[4, 4], [5, 5]]},
        ids={"Robot": ["r0"], "Mine": ["m0", "m1"]},
        global_features=[0.25],
        visible={"Mine": [False, True]},
        actions={
            "Move": CategoricalActionMask(actor_types=["Robot"]),
            "Shoot": SelectEntityActionMask(actor_ids=["r0"], actee_types=["Mine"], mask=[[F, T]]),
            "Mode": GlobalCategoricalActionMask(),
        },
    ),
    # Row 2: one robot, nothing to shoot.
    Observation(
        features={"Robot": [[6, 6]], "Mine": np.zeros((0, 2))},
        ids={"Robot": ["r0"], "Mine": []},
        global_features=[0.0],
        actions={
            "Move": CategoricalActionMask(actor_types=["Robot"], mask=[[F, F, T]]),
            "Mode": GlobalCategoricalActionMask(),
        },
    ),
]


def good_batch() -> VecObs:
    """A valid batch of the three rows, in which the episode of row 1 ended."""
    obs = Batcher(OBS_SPACE, ACTIONS).batch(ROWS)
    obs.reward = np.array([0.0, 1.0, 0.5], dtype=np.float32)
    obs.done = np.array([False, True, False])
    obs.metrics = {"episode_return": np.array([3.0])}
    return copy.deepcopy(obs)


def assert_broken(edit: Callable[[VecObs], object], *fragments: str, rows: int | None = None):
    """Breaking the good batch with ``edit`` makes validation fail with all ``fragments``."""
    obs = good_batch()
    edit(obs)
    with pytest.raises(EnvValidationError) as error:
        validate_vec_obs(obs, OBS_SPACE, ACTIONS, ENV, rows=rows)
    message = str(error.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


def test_a_good_batch_passes() -> None:
    validate_vec_obs(good_batch(), OBS_SPACE, ACTIONS, ENV, rows=3)


def test_only_a_vec_obs_is_a_batch() -> None:
    with pytest.raises(EnvValidationError, match="Toy: expected a VecObs, got Observation"):
        validate_vec_obs(ROWS[0], OBS_SPACE, ACTIONS, ENV)


# ---------------------------------------------------------------------------- reward, done
def test_one_reward_per_row() -> None:
    assert_broken(
        lambda obs: None, "Toy: VecObs.reward: expected shape (4,)", "got shape (3,)", rows=4
    )


def test_rewards_are_finite() -> None:
    def edit(obs: VecObs) -> None:
        obs.reward[2] = np.nan

    assert_broken(edit, "Toy: VecObs.reward: row 2: expected a finite number, got nan")


def test_done_flags_are_booleans() -> None:
    def edit(obs: VecObs) -> None:
        obs.done = obs.done.astype(np.int64)

    assert_broken(edit, "VecObs.done: expected booleans, got dtype int64")


# ---------------------------------------------------------------------------- features
def test_every_declared_entity_type_has_features() -> None:
    assert_broken(
        lambda obs: obs.features.pop("Mine"),
        "VecObs.features: expected one entry per declared entity type ('Robot', 'Mine'), "
        "got none for 'Mine'",
    )


def test_features_have_one_row_per_environment() -> None:
    def edit(obs: VecObs) -> None:
        obs.features["Mine"] = obs.features["Mine"][:2]

    assert_broken(edit, "VecObs.features['Mine']: expected 3 rows (one per environment), got 2")


def test_features_have_the_declared_width() -> None:
    def edit(obs: VecObs) -> None:
        robots = obs.features["Robot"]
        obs.features["Robot"] = RaggedArray(robots.data[:, :1].copy(), robots.lengths)

    assert_broken(
        edit, "VecObs.features['Robot']: expected 2 features per entity (x, y), got width 1"
    )


def test_features_are_float32() -> None:
    def edit(obs: VecObs) -> None:
        obs.features["Robot"] = obs.features["Robot"].astype(np.int64)

    assert_broken(edit, "VecObs.features['Robot']: expected dtype float32, got int64")


def test_features_are_finite() -> None:
    def edit(obs: VecObs) -> None:
        obs.features["Mine"].data[2, 1] = np.inf  # the second mine of row 1

    assert_broken(
        edit,
        "VecObs.features['Mine']: row 1, entity 1: feature 'y': expected a finite number, got inf",
    )


def test_row_lengths_add_up_to_the_items() -> None:
    def edit(obs: VecObs) -> None:
        obs.features["Robot"].lengths[0] = 5

    assert_broken(
        edit,
        "VecObs.features['Robot']: expected row lengths that add up to its 4 items, got 7",
    )


def test_row_lengths_are_not_negative() -> None:
    def edit(obs: VecObs) -> None:
        obs.features["Robot"].lengths[:] = [3, 2, -1]

    assert_broken(edit, "VecObs.features['Robot']: row 2: expected a length >= 0, got -1")


def test_global_features_have_the_declared_shape() -> None:
    def edit(obs: VecObs) -> None:
        obs.global_features = np.zeros((3, 2), dtype=np.float32)

    assert_broken(
        edit,
        "VecObs.global_features: expected shape (3, 1) with 1 global features per row (time), "
        "got shape (3, 2)",
    )


def test_global_features_are_finite() -> None:
    def edit(obs: VecObs) -> None:
        obs.global_features[1, 0] = -np.inf

    assert_broken(
        edit, "VecObs.global_features: row 1: global feature 'time': expected a finite number"
    )


def test_visibility_has_one_flag_per_entity() -> None:
    def edit(obs: VecObs) -> None:
        obs.visible["Robot"] = RaggedArray(np.ones((3, 1), dtype=np.bool_), np.array([2, 0, 1]))

    assert_broken(
        edit, "VecObs.visible['Robot']: row 1: expected 1 flags (one per Robot entity), got 0"
    )


def test_visibility_is_of_declared_types() -> None:
    def edit(obs: VecObs) -> None:
        obs.visible["Ghost"] = obs.visible["Mine"]

    assert_broken(edit, "VecObs.visible['Ghost']: unknown entity type 'Ghost'")


# ---------------------------------------------------------------------------- actions
def test_every_declared_action_has_a_mask() -> None:
    def edit(obs: VecObs) -> None:
        obs.action_masks["Jump"] = obs.action_masks.pop("Move")

    assert_broken(
        edit,
        "VecObs.action_masks: expected one entry per declared action ('Move', 'Shoot', 'Mode'), "
        "got none for 'Move'; unknown 'Jump'",
    )


def test_each_action_has_the_mask_of_its_kind() -> None:
    def edit(obs: VecObs) -> None:
        move = obs.action_masks["Move"]
        obs.action_masks["Move"] = VecSelectEntityMask(move.actors, move.actors)

    assert_broken(
        edit,
        "VecObs.action_masks['Move']: expected a VecCategoricalMask for a CategoricalActionSpace, "
        "got VecSelectEntityMask",
    )


def test_actors_are_entities_of_their_row() -> None:
    def edit(obs: VecObs) -> None:
        obs.action_masks["Move"].actors.data[2, 0] = 1  # row 1 has entities 0-2: still fine
        obs.action_masks["Move"].actors.data[3, 0] = 1  # row 2 has one entity

    assert_broken(
        edit,
        "VecObs.action_masks['Move'].actors: row 2: expected actors among the row's entities "
        "[0, 1), got actor index 1",
    )


def test_an_actor_acts_once_per_row() -> None:
    def edit(obs: VecObs) -> None:
        obs.action_masks["Move"].actors.data[1, 0] = 0

    assert_broken(
        edit,
        "VecObs.action_masks['Move'].actors: row 0: expected each actor once, got entity 0 again",
    )


def test_the_global_action_is_taken_by_the_pseudo_entity() -> None:
    def edit(obs: VecObs) -> None:
        obs.action_masks["Mode"].actors.data[1, 0] = 0

    assert_broken(
        edit,
        "VecObs.action_masks['Mode'].actors: row 1: expected the pseudo-entity 3 (the number of "
        "entities in the row) to take the global action, got 0",
    )


def test_the_global_action_has_at_most_one_actor_per_row() -> None:
    def edit(obs: VecObs) -> None:
        mode = obs.action_masks["Mode"]
        mode.actors = RaggedArray(np.array([[3], [3], [3], [1]]), np.array([1, 2, 1]))
        mode.mask = None

    assert_broken(
        edit,
        "VecObs.action_masks['Mode'].actors: row 1: expected at most one actor (the row's "
        "pseudo-entity), got 2",
    )


def test_a_categorical_mask_has_one_column_per_choice() -> None:
    def edit(obs: VecObs) -> None:
        move = obs.action_masks["Move"]
        move.mask = RaggedArray(move.mask.data[:, :2].copy(), move.mask.lengths)

    assert_broken(
        edit,
        "VecObs.action_masks['Move'].mask: expected 3 choices per actor (up, down, stay), "
        "got width 2",
    )


def test_a_categorical_mask_has_one_row_per_actor() -> None:
    def edit(obs: VecObs) -> None:
        move = obs.action_masks["Move"]
        move.mask = RaggedArray(move.mask.data, np.array([1, 2, 1]))

    assert_broken(
        edit,
        "VecObs.action_masks['Move'].mask: row 0: expected 2 rows of choices (one per actor), got 1",
    )


def test_every_actor_has_a_legal_choice() -> None:
    def edit(obs: VecObs) -> None:
        obs.action_masks["Move"].mask.data[1] = False  # the second robot of row 0

    assert_broken(
        edit,
        "VecObs.action_masks['Move'].mask: row 0, actor 1: expected at least one legal choice, "
        "got every choice masked out",
    )


def test_actees_are_entities_of_their_row() -> None:
    def edit(obs: VecObs) -> None:
        obs.action_masks["Shoot"].actees.data[0, 0] = -1

    assert_broken(
        edit,
        "VecObs.action_masks['Shoot'].actees: row 0: expected actees among the row's entities "
        "[0, 3), got actee index -1",
    )


def test_actors_of_a_select_action_have_something_to_select() -> None:
    def edit(obs: VecObs) -> None:
        shoot = obs.action_masks["Shoot"]
        shoot.actors = RaggedArray(np.array([[0], [0], [0]]), np.array([1, 1, 1]))
        shoot.mask = None

    assert_broken(
        edit,
        "VecObs.action_masks['Shoot']: row 2: expected at least one entity to select for its 1 "
        "actors, got none",
    )


def test_a_select_mask_has_a_flag_per_actor_and_actee() -> None:
    def edit(obs: VecObs) -> None:
        shoot = obs.action_masks["Shoot"]
        shoot.mask = RaggedArray(np.ones((2, 1), dtype=np.bool_), np.array([1, 1, 0]))

    assert_broken(
        edit,
        "VecObs.action_masks['Shoot'].mask: row 1: expected 2 flags (actors x actees), got 1",
    )


def test_every_selecting_actor_has_a_legal_actee() -> None:
    def edit(obs: VecObs) -> None:
        obs.action_masks["Shoot"].mask.data[2] = False  # row 1: the only legal mine

    assert_broken(
        edit,
        "VecObs.action_masks['Shoot'].mask: row 1, actor 0: expected at least one legal actee, "
        "got every actee masked out",
    )


def test_actor_indices_are_int64() -> None:
    def edit(obs: VecObs) -> None:
        move = obs.action_masks["Move"]
        obs.action_masks["Move"] = VecCategoricalMask(move.actors.astype(np.float32), move.mask)

    assert_broken(edit, "VecObs.action_masks['Move'].actors: expected dtype int64, got float32")


# ---------------------------------------------------------------------------- metrics
def test_metrics_have_at_most_one_value_per_ended_episode() -> None:
    def edit(obs: VecObs) -> None:
        obs.metrics["episode_return"] = np.array([3.0, 4.0])

    assert_broken(
        edit,
        "VecObs.metrics['episode_return']: expected a 1-D array of at most one value per "
        "episode that ended on this step (1), got shape (2,)",
    )


def test_metrics_are_finite() -> None:
    def edit(obs: VecObs) -> None:
        obs.metrics["episode_return"][0] = np.nan

    assert_broken(edit, "VecObs.metrics['episode_return'][0]: expected a finite number, got nan")


# ---------------------------------------------------------------------------- BatchedEnvironment
class ClockOutsideItsRow(Countdown):
    """Countdown whose clock claims to be entity 1 of a row that holds only entity 0."""

    def observe(self) -> VecObs:
        obs = super().observe()
        obs.action_masks["Tick"].actors.data[:] = 1
        return obs


@pytest.mark.parametrize("validate", [False, True])
def test_a_batched_environment_validates_its_first_batches_always(validate: bool) -> None:
    env = ClockOutsideItsRow(2, seed=0)
    env.validate = validate
    with pytest.raises(
        EnvValidationError, match=r"ClockOutsideItsRow: VecObs.action_masks\['Tick'\].actors: row 0"
    ):
        env.reset()


def test_make_vec_validates_natively_batched_environments() -> None:
    with pytest.raises(EnvValidationError, match="ClockOutsideItsRow: VecObs"):
        make_vec(f"{__name__}:ClockOutsideItsRow", 2, seed=0, validate=True).reset()
    assert make_vec("CherryPickBatched", 2, seed=0, validate=True).validate
    assert not make_vec("CherryPickBatched", 2, seed=0).validate


def test_every_step_is_checked_and_a_restored_state_keeps_the_setting() -> None:
    env = make_vec("CherryPickBatched", 2, seed=0, validate=True)
    other = make_vec("CherryPickBatched", 2, seed=1)
    other.reset()
    obs = env.set_state(other.get_state())  # saved by an environment that does not validate
    assert env.validate
    env.step = lambda actions: (np.full(2, np.inf, np.float32), np.zeros(2, np.bool_))  # type: ignore[method-assign]
    with pytest.raises(EnvValidationError, match=r"CherryPickBatched: VecObs.reward: row 0"):
        env.act(RandomPolicy(env.action_space, seed=0).act(obs))
