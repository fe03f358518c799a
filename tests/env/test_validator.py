"""The validator: one test per rule, each checking that the message names the environment, the
entity or action type, the field, what was expected and what came; then a property test that
valid observations pass and batch into a VecObs that matches them."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import batches

from entityrl.env import (
    Batcher,
    CategoricalAction,
    CategoricalActionMask,
    CategoricalActionSpace,
    Entity,
    Environment,
    EnvValidationError,
    GlobalCategoricalAction,
    GlobalCategoricalActionMask,
    GlobalCategoricalActionSpace,
    Observation,
    ObsSpace,
    RandomPolicy,
    SelectEntityAction,
    SelectEntityActionMask,
    SelectEntityActionSpace,
    ValidatingEnvironment,
    VecSelectEntityMask,
    validate_observation,
)
from entityrl.env.validator import validate_actions
from entityrl.env.vec_env import check_actions

T, F = True, False
OBS_SPACE = ObsSpace(
    entities={"Robot": Entity(["x", "y"]), "Mine": Entity(["x", "y"])}, global_features=["time"]
)
ACTIONS = {
    "Move": CategoricalActionSpace(["up", "down", "stay"]),
    "Shoot": SelectEntityActionSpace(),
    "Mode": GlobalCategoricalActionSpace(["calm", "wild"]),
}
ENV = "Toy"


def good(**changes: Any) -> Observation:
    """A valid observation; keyword arguments replace its fields."""
    obs = Observation(
        features={"Robot": [[0, 0], [1, 1]], "Mine": np.array([[2, 2]], dtype=np.float32)},
        ids={"Robot": ["r0", "r1"], "Mine": ["m0"]},
        global_features=[0.5],
        visible={"Mine": [True]},
        actions={
            "Move": CategoricalActionMask(actor_types=["Robot"], mask=[[T, T, F], [T, F, T]]),
            "Shoot": SelectEntityActionMask(actor_ids=["r0"], actee_types=["Mine"]),
            "Mode": GlobalCategoricalActionMask(mask=[T, F]),
        },
        reward=1.0,
        metrics={"score": 1.0},
    )
    return dataclasses.replace(obs, **changes)


def with_action(name: str, mask: Any) -> Observation:
    """The valid observation with one action mask replaced."""
    return good(actions={**good().actions, name: mask})


def assert_message(error: pytest.ExceptionInfo[Exception], *fragments: str) -> None:
    message = str(error.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


def test_the_reference_observation_is_valid() -> None:
    validate_observation(good(), OBS_SPACE, ACTIONS, ENV)


NAN, INF = float("nan"), float("inf")

# (test id, observation, fragments the message must contain besides the environment name)
OBSERVATION_RULES = [
    (
        "unknown-type-in-features",
        good(features={**good().features, "Tank": [[1, 2]]}),
        ["Observation.features['Tank']", "unknown entity type 'Tank'", "'Robot', 'Mine'"],
    ),
    (
        "unknown-type-in-ids",
        good(ids={**good().ids, "Tank": ["t0"]}),
        ["Observation.ids['Tank']", "unknown entity type 'Tank'", "'Robot', 'Mine'"],
    ),
    (
        "unknown-type-in-visible",
        good(visible={"Tank": [True]}),
        ["Observation.visible['Tank']", "unknown entity type 'Tank'", "'Robot', 'Mine'"],
    ),
    (
        "unknown-type-in-actor-types",
        with_action("Move", CategoricalActionMask(actor_types=["Tank"])),
        ["actions['Move'].actor_types", "unknown entity type 'Tank'", "'Robot', 'Mine'"],
    ),
    (
        "unknown-type-in-actee-types",
        with_action("Shoot", SelectEntityActionMask(actor_ids=["r0"], actee_types=["Tank"])),
        ["actions['Shoot'].actee_types", "unknown entity type 'Tank'", "'Robot', 'Mine'"],
    ),
    (
        "actor-type-listed-twice",
        with_action("Move", CategoricalActionMask(actor_types=["Robot", "Robot"])),
        ["actions['Move'].actor_types", "each type once", "['Robot', 'Robot']"],
    ),
    (
        "actor-types-a-string",
        with_action("Move", CategoricalActionMask(actor_types="Robot")),
        ["actions['Move'].actor_types", "list of entity type names", "str 'Robot'"],
    ),
    (
        "unknown-action",
        good(actions={"Jump": CategoricalActionMask()}),
        ["Observation.actions['Jump']", "unknown action 'Jump'", "'Move', 'Shoot', 'Mode'"],
    ),
    (
        "features-not-a-dict",
        good(features=[[0, 0]]),
        ["Observation.features", "dict of entity type -> features", "got list"],
    ),
    (
        "actions-not-a-dict",
        good(actions=[CategoricalActionMask()]),
        ["Observation.actions", "dict of action name -> action mask", "got list"],
    ),
    (
        "features-not-rows",
        good(features={"Robot": 3.0}),
        ["Observation.features['Robot']", "(entities, 2) array", "got float"],
    ),
    (
        "wrong-feature-count",
        good(features={"Robot": np.zeros((2, 3)), "Mine": [[2, 2]]}),
        ["Observation.features['Robot']", "2 features per entity (x, y)", "shape (2, 3)"],
    ),
    (
        "ragged-rows",
        good(features={"Robot": [[0, 0], [1]], "Mine": [[2, 2]]}),
        ["Observation.features['Robot'][1]", "2 features per entity (x, y)", "got 1: [1]"],
    ),
    (
        "row-not-a-list",
        good(features={"Robot": [[0, 0], 7], "Mine": [[2, 2]]}),
        ["Observation.features['Robot'][1]", "a row of 2 features", "got 7"],
    ),
    (
        "non-numeric-feature",
        good(features={"Robot": [[0, "north"], [1, 1]], "Mine": [[2, 2]]}),
        ["Observation.features['Robot'][0]", "feature 'y'", "expected a number", "str 'north'"],
    ),
    (
        "numeric-string-feature",
        good(features={"Robot": [["0", "1"], ["1", "1"]], "Mine": [[2, 2]]}),
        ["Observation.features['Robot'][0]", "feature 'x'", "expected a number", "str '0'"],
    ),
    (
        "nan-feature",
        good(features={"Robot": [[0, 0], [1, 1]], "Mine": [[NAN, 2]]}),
        ["Observation.features['Mine'][0]", "feature 'x'", "finite number", "got nan"],
    ),
    (
        "inf-feature",
        good(features={"Robot": np.array([[0, 0], [1, INF]]), "Mine": [[2, 2]]}),
        ["Observation.features['Robot'][1]", "feature 'y'", "finite number", "got inf"],
    ),
    (
        "inf-global-feature",
        good(global_features=[INF]),
        ["Observation.global_features", "feature 'time'", "finite number", "got inf"],
    ),
    (
        "nan-global-feature",
        good(global_features=np.array([NAN])),
        ["Observation.global_features", "feature 'time'", "finite number", "got nan"],
    ),
    (
        "wrong-global-feature-count",
        good(global_features=[0.5, 1.5]),
        ["Observation.global_features", "1 global features (time)", "shape (2,)"],
    ),
    (
        "non-numeric-global-feature",
        good(global_features=["soon"]),
        ["Observation.global_features", "feature 'time'", "a number", "str 'soon'"],
    ),
    (
        "duplicate-id-within-type",
        good(ids={"Robot": ["r0", "r0"], "Mine": ["m0"]}),
        ["Observation.ids['Robot'][1]", "its own id", "'r0' again", "'Robot' entity"],
    ),
    (
        "duplicate-id-across-types",
        good(ids={"Robot": ["r0", "r1"], "Mine": ["r1"]}),
        ["Observation.ids['Mine'][0]", "its own id", "'r1' again", "'Robot' entity"],
    ),
    (
        "explicit-id-equal-to-a-default-id",
        good(ids={"Robot": ["r0", ("Mine", 0)]}),
        ["Observation.ids['Mine'][0]", "its own id", "('Mine', 0) again", "'Robot' entity"],
    ),
    (
        "id-count-not-entity-count",
        good(ids={"Robot": ["r0"], "Mine": ["m0"]}),
        ["Observation.ids['Robot']", "one id per entity (2)", "got 1"],
    ),
    (
        "unhashable-id",
        good(ids={"Robot": [["r", 0], "r1"], "Mine": ["m0"]}),
        ["Observation.ids['Robot'][0]", "hashable id", "list ['r', 0]"],
    ),
    (
        "unhashable-id-inside-tuple",
        good(ids={"Robot": ["r0", ("r", [1])], "Mine": ["m0"]}),
        ["Observation.ids['Robot'][1]", "hashable id", "tuple ('r', [1])"],
    ),
    (
        "visible-not-booleans",
        good(visible={"Mine": [1]}),
        ["Observation.visible['Mine']", "1 booleans (one per entity)", "int64 of shape (1,)"],
    ),
    (
        "visible-wrong-count",
        good(visible={"Robot": [True]}),
        ["Observation.visible['Robot']", "2 booleans (one per entity)", "bool of shape (1,)"],
    ),
    (
        "actor-id-not-an-entity",
        with_action("Shoot", SelectEntityActionMask(actor_ids=["ghost"], actee_types=["Mine"])),
        ["actions['Shoot'].actor_ids[0]", "id of an entity of this observation", "'ghost'"],
    ),
    (
        "actee-id-not-an-entity",
        with_action("Shoot", SelectEntityActionMask(actor_ids=["r0"], actee_ids=["m0", "m9"])),
        ["actions['Shoot'].actee_ids[1]", "id of an entity of this observation", "'m9'"],
    ),
    (
        "actor-id-listed-twice",
        with_action("Move", CategoricalActionMask(actor_ids=["r0", "r0"])),
        ["actions['Move'].actor_ids", "each id once", "['r0', 'r0']"],
    ),
    (
        "unhashable-actor-id",
        with_action("Move", CategoricalActionMask(actor_ids=[["r0"]])),
        ["actions['Move'].actor_ids[0]", "hashable id", "list ['r0']"],
    ),
    (
        "actor-ids-and-types",
        with_action("Shoot", SelectEntityActionMask(actor_ids=["r0"], actor_types=["Robot"])),
        ["actions['Shoot'].actor_ids", "actor_ids or actor_types", "got both"],
    ),
    (
        "actee-ids-and-types",
        with_action("Shoot", SelectEntityActionMask(actee_ids=["m0"], actee_types=["Mine"])),
        ["actions['Shoot'].actee_ids", "actee_ids or actee_types", "got both"],
    ),
    (
        "mask-class-for-another-space",
        with_action("Move", SelectEntityActionMask()),
        [
            "Observation.actions['Move']",
            "CategoricalActionMask for a CategoricalActionSpace",
            "got SelectEntityActionMask",
        ],
    ),
    (
        "global-mask-class-for-another-space",
        with_action("Mode", CategoricalActionMask()),
        [
            "Observation.actions['Mode']",
            "GlobalCategoricalActionMask for a GlobalCategoricalActionSpace",
            "got CategoricalActionMask",
        ],
    ),
    (
        "categorical-mask-wrong-shape",
        with_action("Move", CategoricalActionMask(actor_types=["Robot"], mask=[[T, T, T]])),
        ["actions['Move'].mask", "(2, 3) (actors, choices)", "shape (1, 3)"],
    ),
    (
        "select-mask-wrong-shape",
        with_action("Shoot", SelectEntityActionMask(actor_ids=["r0"], mask=[[T, T]])),
        ["actions['Shoot'].mask", "(1, 3) (actors, actees)", "shape (1, 2)"],
    ),
    (
        "global-mask-wrong-shape",
        with_action("Mode", GlobalCategoricalActionMask(mask=[T, T, T])),
        ["actions['Mode'].mask", "(2,) (choices,)", "shape (3,)"],
    ),
    (
        "ragged-mask",
        with_action("Move", CategoricalActionMask(actor_types=["Robot"], mask=[[T, T, T], [T]])),
        ["actions['Move'].mask", "boolean array of shape (2, 3)", "inhomogeneous"],
    ),
    (
        "mask-not-boolean",
        with_action(
            "Move", CategoricalActionMask(actor_types=["Robot"], mask=[[1, 1, 0], [1, 0, 1]])
        ),
        ["actions['Move'].mask", "expected booleans", "dtype int64"],
    ),
    (
        "actor-without-legal-choice",
        with_action(
            "Move", CategoricalActionMask(actor_types=["Robot"], mask=[[T, T, F], [F, F, F]])
        ),
        ["actions['Move'].mask[1]", "at least one legal choice for actor 1", "all False"],
    ),
    (
        "select-actor-without-legal-actee",
        with_action(
            "Shoot", SelectEntityActionMask(actor_ids=["r0"], actee_types=["Mine"], mask=[[F]])
        ),
        ["actions['Shoot'].mask[0]", "at least one legal actee for actor 0", "all False"],
    ),
    (
        "select-actor-without-actees",
        with_action("Shoot", SelectEntityActionMask(actor_ids=["r0"], actee_types=[])),
        ["Observation.actions['Shoot']", "at least one entity to select for its 1 actors", "none"],
    ),
    (
        "global-mask-without-legal-choice",
        with_action("Mode", GlobalCategoricalActionMask(mask=[F, F])),
        ["actions['Mode'].mask", "at least one legal choice", "every choice masked out"],
    ),
    (
        "nan-reward",
        good(reward=NAN),
        ["Observation.reward", "finite number", "got nan"],
    ),
    (
        "inf-reward",
        good(reward=np.float32(INF)),
        ["Observation.reward", "finite number", "got inf"],
    ),
    (
        "non-numeric-reward",
        good(reward="1"),
        ["Observation.reward", "expected a number", "str '1'"],
    ),
    (
        "array-reward",
        good(reward=np.array([1.0])),
        ["Observation.reward", "expected a number", "ndarray array([1.])"],
    ),
    (
        "bool-reward",
        good(reward=True),
        ["Observation.reward", "expected a number", "bool True"],
    ),
    (
        "done-not-a-bool",
        good(done=1),
        ["Observation.done", "expected a bool", "int 1"],
    ),
    (
        "metric-not-a-number",
        good(metrics={"score": "high"}),
        ["Observation.metrics['score']", "expected a number", "str 'high'"],
    ),
    (
        "metric-not-finite",
        good(metrics={"score": NAN}),
        ["Observation.metrics['score']", "finite number", "got nan"],
    ),
    (
        "metric-name-not-a-string",
        good(metrics={3: 1.0}),
        ["Observation.metrics", "metric names to be strings", "got 3"],
    ),
    (
        "metrics-not-a-dict",
        good(metrics=[1.0]),
        ["Observation.metrics", "dict of metric name -> number", "got list"],
    ),
]


@pytest.mark.parametrize(
    ("obs", "fragments"),
    [pytest.param(obs, fragments, id=name) for name, obs, fragments in OBSERVATION_RULES],
)
def test_observation_rule(obs: Observation, fragments: list[str]) -> None:
    with pytest.raises(EnvValidationError) as error:
        validate_observation(obs, OBS_SPACE, ACTIONS, ENV)
    assert_message(error, f"{ENV}: ", *fragments)


@pytest.mark.parametrize(
    "obs",
    [
        pytest.param(
            good(features={"Robot": [], "Mine": np.zeros((0, 2))}, ids={}, actions={}, visible={}),
            id="no-entities",
        ),
        pytest.param(
            good(visible={"Robot": []}, features={"Mine": [[1, 1]]}, ids={}, actions={}),
            id="empty-visible",
        ),
        pytest.param(
            good(features={"Robot": [[True, False], [1, 2.5]], "Mine": [[np.int8(1), 2]]}),
            id="bools-and-ints",
        ),
        pytest.param(
            with_action("Move", CategoricalActionMask(actor_types=[], mask=np.zeros((0, 3), bool))),
            id="no-actors",
        ),
        pytest.param(
            with_action("Shoot", SelectEntityActionMask(actor_types=[], actee_types=[])),
            id="select-nobody",
        ),
        pytest.param(
            with_action(
                "Move", CategoricalActionMask(actor_ids=["r1", "m0"], mask=[[T, F, F], [F, F, T]])
            ),
            id="actors-by-id",
        ),
        pytest.param(
            good(
                ids={},
                actions={
                    "Shoot": SelectEntityActionMask(
                        actor_ids=[("Robot", 1)], actee_ids=[("Mine", 0)]
                    )
                },
            ),
            id="default-ids",
        ),
        pytest.param(
            good(reward=np.float32(2), done=np.bool_(True), metrics={"n": np.int64(3)}),
            id="numpy-scalars",
        ),
    ],
)
def test_valid_corner_cases_pass(obs: Observation) -> None:
    validate_observation(obs, OBS_SPACE, ACTIONS, ENV)


def test_entity_type_without_features_counts_its_rows() -> None:
    space = ObsSpace(entities={"Marker": Entity([])})
    obs = Observation(features={"Marker": [[], [], []]}, ids={"Marker": ["a", "b"]})
    with pytest.raises(EnvValidationError) as error:
        validate_observation(obs, space, {}, ENV)
    assert_message(error, "Observation.ids['Marker']", "one id per entity (3)", "got 2")


# ---------------------------------------------------------------------------- environments
class Scripted(Environment):
    """Returns the observations it is given; declares whatever spaces it is given."""

    def __init__(
        self, first: Any, then: Any = None, obs_space: Any = OBS_SPACE, actions: Any = None
    ) -> None:
        self.first, self.then = first, then
        self._obs_space = obs_space
        self._actions = ACTIONS if actions is None else actions
        self.acted: list[Mapping[str, Any]] = []

    def obs_space(self) -> Any:
        return self._obs_space

    def action_space(self) -> Any:
        return self._actions

    def reset(self) -> Any:
        return self.first

    def act(self, actions: Mapping[str, Any]) -> Any:
        self.acted.append(actions)
        return good() if self.then is None else self.then


def valid_actions(**changes: Any) -> dict[str, Any]:
    """Legal actions for :func:`good`; keyword arguments replace some."""
    actions = {
        "Move": CategoricalAction(["r0", "r1"], np.array([1, 2]), ACTIONS["Move"].choices),
        "Shoot": SelectEntityAction(["r0"], ["m0"]),
        "Mode": GlobalCategoricalAction(0, "calm"),
    }
    actions.update(changes)
    return actions


def test_validating_environment_passes_valid_steps_through() -> None:
    env = Scripted(good())
    wrapped = ValidatingEnvironment(env)
    assert wrapped.reset() is env.first
    actions = valid_actions()
    wrapped.act(actions)
    assert len(env.acted) == 1 and env.acted[0] is actions


@pytest.mark.parametrize(
    ("env", "fragments"),
    [
        pytest.param(
            Scripted({"Robot": []}), ["Scripted: ", "return an Observation", "got dict"], id="reset"
        ),
        pytest.param(
            Scripted(good(done=True)),
            ["Scripted: reset()", "done=False", "got done=True"],
            id="reset-done",
        ),
    ],
)
def test_reset_rules(env: Scripted, fragments: list[str]) -> None:
    with pytest.raises(EnvValidationError) as error:
        ValidatingEnvironment(env).reset()
    assert_message(error, *fragments)


def test_act_must_return_an_observation() -> None:
    wrapped = ValidatingEnvironment(Scripted(good(), then=None), name="Custom")
    wrapped.reset()
    wrapped.env.then = (good(), 1.0)  # type: ignore[attr-defined]
    with pytest.raises(EnvValidationError) as error:
        wrapped.act(valid_actions())
    assert_message(error, "Custom: ", "return an Observation", "got tuple")


def test_act_before_reset_is_refused() -> None:
    with pytest.raises(EnvValidationError) as error:
        ValidatingEnvironment(Scripted(good())).act(valid_actions())
    assert_message(error, "Scripted: act() called before reset()")


@pytest.mark.parametrize(
    ("obs_space", "actions", "fragments"),
    [
        pytest.param(
            {"Robot": ["x"]},
            ACTIONS,
            ["obs_space()", "expected an ObsSpace", "got dict"],
            id="obs-space-type",
        ),
        pytest.param(
            OBS_SPACE,
            [("Move", ACTIONS["Move"])],
            ["action_space()", "dict of action name -> action space", "got list"],
            id="action-space-not-a-dict",
        ),
        pytest.param(
            OBS_SPACE,
            {"Move": ["up", "down"]},
            ["action_space()['Move']", "CategoricalActionSpace", "got list"],
            id="action-space-entry-type",
        ),
        pytest.param(
            OBS_SPACE,
            {"Move": CategoricalActionSpace},
            ["action_space()['Move']", "SelectEntityActionSpace", "got type"],
            id="action-space-class-not-instance",
        ),
        pytest.param(
            OBS_SPACE,
            {"": ACTIONS["Move"]},
            ["action_space()", "non-empty strings", "got ''"],
            id="action-name",
        ),
        pytest.param(
            ObsSpace(entities={3: Entity(["x"])}),
            ACTIONS,
            ["obs_space()", "entity type names to be non-empty strings", "got 3"],
            id="entity-name",
        ),
    ],
)
def test_declaration_rules(obs_space: Any, actions: Any, fragments: list[str]) -> None:
    with pytest.raises(EnvValidationError) as error:
        ValidatingEnvironment(Scripted(good(), obs_space=obs_space, actions=actions))
    assert_message(error, "Scripted: ", *fragments)


ACTION_RULES = [
    (
        "action-not-offered",
        good(actions={"Move": good().actions["Move"], "Mode": good().actions["Mode"]}),
        valid_actions(),
        [
            "act(actions['Shoot'])",
            "only actions the last observation offered ('Move', 'Mode')",
            "got this one",
        ],
    ),
    (
        "unknown-action",
        good(),
        valid_actions(Jump=GlobalCategoricalAction(0, "calm")),
        ["act(actions['Jump'])", "unknown action", "'Move', 'Shoot', 'Mode'"],
    ),
    (
        "wrong-kind-of-action",
        good(),
        valid_actions(Move=GlobalCategoricalAction(0, "up")),
        ["act(actions['Move'])", "expected a CategoricalAction", "got GlobalCategoricalAction"],
    ),
    (
        "offered-action-missing",
        good(),
        {"Move": valid_actions()["Move"], "Mode": valid_actions()["Mode"]},
        ["act(actions['Shoot'])", "an action for the 1 actors", "got none"],
    ),
    (
        "actions-not-a-dict",
        good(),
        list(valid_actions().values()),
        ["act()", "dict of action name -> action", "got list"],
    ),
    (
        "wrong-actors",
        good(),
        valid_actions(Move=CategoricalAction(["r0", "m0"], np.array([0, 0]))),
        ["act(actions['Move'])", "offered actors ['r0', 'r1']", "got from ['r0', 'm0']"],
    ),
    (
        "choice-out-of-range",
        good(),
        valid_actions(Move=CategoricalAction(["r0", "r1"], np.array([0, 3]))),
        ["act(actions['Move'])", "actor 'r1' chose 3", "choice in [0, 3)"],
    ),
    (
        "choice-indices-not-integers",
        good(),
        valid_actions(Move=CategoricalAction(["r0", "r1"], np.array([0.0, 1.0]))),
        ["act(actions['Move'])", "2 integer choice indices", "got float64 of shape (2,)"],
    ),
    (
        "masked-choice",
        good(),
        valid_actions(Move=CategoricalAction(["r1", "r0"], np.array([1, 0]))),
        ["act(actions['Move'])", "actor 'r1' chose choice 1", "its mask forbids"],
    ),
    (
        "actee-not-a-candidate",
        good(),
        valid_actions(Shoot=SelectEntityAction(["r0"], ["r1"])),
        ["act(actions['Shoot'])", "actor 'r0' selected 'r1'", "one of its candidates ['m0']"],
    ),
    (
        "masked-actee",
        with_action("Shoot", SelectEntityActionMask(actor_ids=["r0"], mask=[[F, T, T]])),
        valid_actions(Shoot=SelectEntityAction(["r0"], ["r0"])),
        ["act(actions['Shoot'])", "actor 'r0' chose actee 0", "its mask forbids"],
    ),
    (
        "masked-global-choice",
        good(),
        valid_actions(Mode=GlobalCategoricalAction(1, "wild")),
        ["act(actions['Mode'])", "the global action chose choice 1", "its mask forbids"],
    ),
    (
        "global-choice-out-of-range",
        good(),
        valid_actions(Mode=GlobalCategoricalAction(2, "?")),
        ["act(actions['Mode'])", "the global action chose 2", "choice in [0, 2)"],
    ),
]


@pytest.mark.parametrize(
    ("last", "actions", "fragments"),
    [
        pytest.param(last, actions, fragments, id=name)
        for name, last, actions, fragments in ACTION_RULES
    ],
)
def test_action_rule(last: Observation, actions: Any, fragments: list[str]) -> None:
    wrapped = ValidatingEnvironment(Scripted(last), name=ENV)
    wrapped.reset()
    with pytest.raises(EnvValidationError) as error:
        wrapped.act(actions)
    assert_message(error, f"{ENV}: ", *fragments)
    assert wrapped.env.acted == []  # type: ignore[attr-defined]


def test_no_action_is_needed_when_nobody_is_offered_it() -> None:
    last = with_action("Shoot", SelectEntityActionMask(actor_types=[]))
    validate_actions(
        {"Move": valid_actions()["Move"], "Mode": valid_actions()["Mode"]}, last, OBS_SPACE, ACTIONS
    )


# ---------------------------------------------------------------------------- property test
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches(), st.integers(0, 1000))
def test_valid_observations_pass_and_batch_faithfully(
    case: tuple[ObsSpace, dict[str, Any], list[Observation]], policy_seed: int
) -> None:
    obs_space, action_space, batch = case
    for obs in batch:
        validate_observation(obs, obs_space, action_space, "Random")
    vec = Batcher(obs_space, action_space).batch(batch)
    type_order = list(obs_space.entities)

    # Entities: per-row counts and features, in ObsSpace order.
    for name, entity in obs_space.entities.items():
        counts = [obs.num_entities(name) for obs in batch]
        np.testing.assert_array_equal(vec.features[name].lengths, counts)
        for row, obs in enumerate(batch):
            expected = np.asarray(obs.features.get(name, []), dtype=np.float32).reshape(
                counts[row], len(entity.features)
            )
            np.testing.assert_array_equal(vec.features[name][row], expected)
            if name in vec.visible:
                shown = obs.visible.get(name, np.ones(counts[row], dtype=bool))
                np.testing.assert_array_equal(vec.visible[name][row][:, 0], shown)
        assert (name in vec.visible) == any(name in obs.visible for obs in batch)
    np.testing.assert_array_equal(
        vec.global_features,
        np.array([obs.global_features for obs in batch], dtype=np.float32).reshape(len(batch), -1),
    )
    np.testing.assert_array_equal(
        vec.reward, np.array([obs.reward for obs in batch], dtype=np.float32)
    )
    np.testing.assert_array_equal(vec.done, [obs.done for obs in batch])

    # Actions: actor (and actee) indices and masks of every row.
    for action, space in action_space.items():
        vec_mask = vec.action_masks[action]
        for row, obs in enumerate(batch):
            spec = obs.actions.get(action)
            position = {x: i for i, x in enumerate(obs.named_entities(type_order))}
            if spec is None:
                actors: list[int] = []
            elif isinstance(spec, GlobalCategoricalActionMask):
                actors = [len(position)]
            else:
                actors = [
                    position[x]
                    for x in obs.named_entities(type_order, spec.actor_ids, spec.actor_types)
                ]
            np.testing.assert_array_equal(vec_mask.actors[row][:, 0], actors)
            if isinstance(vec_mask, VecSelectEntityMask):
                actees = (
                    []
                    if not actors
                    else [
                        position[x]
                        for x in obs.named_entities(type_order, spec.actee_ids, spec.actee_types)
                    ]
                )  # type: ignore[union-attr]
                np.testing.assert_array_equal(vec_mask.actees[row][:, 0], actees)
                shape = (len(actors), len(actees))
            else:
                shape = (len(actors), len(space))
            given_mask = (
                None if spec is None or spec.mask is None else np.asarray(spec.mask).reshape(shape)
            )
            if vec_mask.mask is None:
                assert given_mask is None
            else:
                expected = np.ones(shape, dtype=bool) if given_mask is None else given_mask
                np.testing.assert_array_equal(vec_mask.mask[row].reshape(shape), expected)

    # Legal random actions pass the batch check, unbatch per environment and pass the validator.
    chosen = RandomPolicy(action_space, seed=policy_seed).act(vec)
    check_actions(chosen, vec, action_space)
    for obs, env_actions in zip(
        batch, Batcher(obs_space, action_space).unbatch(chosen, batch), strict=True
    ):
        validate_actions(env_actions, obs, obs_space, action_space, "Random")
