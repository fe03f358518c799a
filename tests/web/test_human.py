"""A person playing continuous actions in the browser page (web/): with "Human plays" checked,
each continuous action has a field (and a slider) per actor and component, prefilled with the
policy's mean clipped to the bounds; the environment receives exactly what was entered; an
entry that is no number within the bounds is named in the page and steps nothing. Played in a
user environment with per-actor and global actions, and in the example
web/examples/move_to_origin.js (ContinuousMoveToOrigin). Skipped, with the reason, where
Chromium, web/'s npm packages or playwright are missing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from browser import artifacts, error_checked_page, missing_requirements, observation_json, serve
from export.torch_reference import sharpened, untrained_agent

from entityrl.env import (
    ContinuousAction,
    ContinuousActionMask,
    ContinuousActionSpace,
    Entity,
    GlobalCategoricalActionMask,
    GlobalCategoricalActionSpace,
    GlobalContinuousActionMask,
    GlobalContinuousActionSpace,
    Observation,
    ObsSpace,
)
from entityrl.envs import ContinuousMoveToOrigin
from entityrl.export import export_onnx
from entityrl.inference import load

pytestmark = pytest.mark.skipif(
    missing_requirements() is not None, reason=str(missing_requirements())
)

TOLERANCE = 1e-5  # the page's means against onnxruntime's in Python (as tests/web/test_browser.py)

# Ships steered by a per-actor thrust and a global throttle (bounds of their own), and a
# global categorical mode: every kind a person enters values for, beside one they pick.
STEERING = (
    ObsSpace({"Ship": Entity(["x", "y"])}, ["time"]),
    {
        "thrust": ContinuousActionSpace(["dx", "dy"], low=-0.05, high=0.05),
        "throttle": GlobalContinuousActionSpace(["power"], low=[-0.02], high=[0.03]),
        "mode": GlobalCategoricalActionSpace(["calm", "bold"]),
    },
)
SHIPS = ["ship a", "ship b", "ship c"]
STEERING_OBS = Observation(
    features={"Ship": [[0.5, -1.0], [2.0, 0.3], [-1.5, 1.2]]},
    ids={"Ship": SHIPS},
    global_features=[0.7],
    actions={
        "thrust": ContinuousActionMask(actor_types=["Ship"]),
        "throttle": GlobalContinuousActionMask(),
        "mode": GlobalCategoricalActionMask(),
    },
)

# The Steering environment in the page: always the observation above; it keeps every actions
# it receives in window.received.
STEERING_JS = """(obs) => {
    window.received = [];
    class Steering {
        reset() { return { ...obs, reward: 0, done: false }; }
        act(actions) { window.received.push(actions); return { ...obs, reward: 1, done: false }; }
    }
    window.entityrl.registerEnvironment("Steering", Steering);
}"""

# ContinuousMoveToOrigin of web/examples/move_to_origin.js, keeping its first observation and
# every actions it receives (window.observations, window.received).
RECORDED_MOVE_TO_ORIGIN = """async () => {
    const { ContinuousMoveToOrigin } = await import("/examples/move_to_origin.js");
    class Recorded extends ContinuousMoveToOrigin {
        reset() {
            window.received = [];
            window.observations = [super.reset()];
            return window.observations[0];
        }
        act(actions) {
            window.received.push(actions);
            window.observations.push(super.act(actions));
            return window.observations.at(-1);
        }
    }
    window.entityrl.registerEnvironment("ContinuousMoveToOrigin", Recorded);
}"""


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Served at /files/: a Steering policy (sharpened 400-fold, so that some means lie beyond
    the bounds and some within) and a ContinuousMoveToOrigin policy (sharpened)."""
    directory = tmp_path_factory.mktemp("files")
    export_onnx(
        sharpened(untrained_agent(*STEERING, env_id="Steering"), 400), directory / "steering.onnx"
    )
    env = ContinuousMoveToOrigin()
    agent = untrained_agent(env.obs_space(), env.action_space(), "ContinuousMoveToOrigin")
    export_onnx(sharpened(agent), directory / "move_to_origin.onnx")
    return directory


@pytest.fixture(scope="module")
def site(files: Path) -> Iterator[str]:
    with serve(files) as url:
        yield url


@pytest.fixture
def page(site: str) -> Iterator[Any]:
    """A fresh tab per test; uncaught errors fail the test."""
    with error_checked_page() as page:
        yield page


def open_page(page: Any, url: str) -> None:
    page.goto(url)
    page.wait_for_selector("body[data-ready=true]")


def play_steering(page: Any, site: str) -> None:
    """The page playing Steering with its policy, a person at the controls."""
    open_page(page, f"{site}/index.html")
    page.evaluate(STEERING_JS, observation_json(STEERING_OBS))
    page.evaluate("() => window.entityrl.usePolicy('/files/steering.onnx', 'steering.onnx')")
    assert page.locator("#decision input.value").count() == 0  # the policy plays
    page.check("#human")


def field(page: Any, action: str, actor: int, component: str) -> Any:
    return page.locator(
        f'#decision input.value[data-action="{action}"][data-actor="{actor}"]'
        f'[data-component="{component}"]'
    )


def steering_fields(page: Any) -> list[tuple[str, int, str]]:
    """(action, actor, component) of every field, in the order of the page."""
    return [
        (d["action"], int(d["actor"]), d["component"])
        for d in page.eval_on_selector_all(
            "#decision input.value", "(inputs) => inputs.map((i) => ({ ...i.dataset }))"
        )
    ]


def received(page: Any) -> list[dict[str, Any]]:
    return page.evaluate("() => window.received")


def status(page: Any) -> str:
    return page.text_content("#status")


def test_fields_are_prefilled_with_the_policys_clipped_means(page, site, files) -> None:
    """One field and one slider (spanning the bounds) per actor and component, and one per
    component of the global action; each field holds the policy's mean clipped to the bounds,
    as Python's most probable action, and stepping untouched gives exactly those values."""
    play_steering(page, site)
    want = load(files / "steering.onnx", deterministic=True).act(STEERING_OBS)
    mean = load(files / "steering.onnx").decide(STEERING_OBS).mean
    expected = {
        ("thrust", a, d): want["thrust"].values[a][i]
        for a in range(len(SHIPS))
        for i, d in enumerate(("dx", "dy"))
    }
    expected["throttle", 0, "power"] = want["throttle"].values[0]
    assert steering_fields(page) == list(expected)
    prefilled = {key: field(page, *key).input_value() for key in expected}
    for key, text in prefilled.items():
        assert float(text) == pytest.approx(expected[key], abs=TOLERANCE), key
    # Beyond the bounds the field holds the bound itself; within them, the mean.
    beyond = np.abs(mean["thrust"]) > 0.05
    assert beyond.any() and not beyond.all(), mean["thrust"]
    assert prefilled["thrust", 0, "dx"] == "0.05"
    assert prefilled["throttle", 0, "power"] == "-0.02"
    sliders = page.eval_on_selector_all(
        "#decision input[type=range]", "(s) => s.map((i) => [i.min, i.max, i.value])"
    )
    assert [s[:2] for s in sliders] == [["-0.05", "0.05"]] * 6 + [["-0.02", "0.03"]]
    assert [float(s[2]) for s in sliders] == [float(t) for t in prefilled.values()]
    page.click("#step")
    page.wait_for_selector("#status:has-text('return so far 1.000')")
    (actions,) = received(page)
    assert actions["thrust"] == {
        "actors": SHIPS,
        "values": [[float(prefilled[("thrust", a, d)]) for d in ("dx", "dy")] for a in range(3)],
    }
    assert actions["throttle"] == {"values": [float(prefilled[("throttle", 0, "power")])]}
    assert actions["mode"] == {"index": 1, "label": "bold"}  # the most probable, as before


def test_the_environment_receives_exactly_the_values_entered(page, site, tmp_path) -> None:
    """Values typed (an exponent too) and set with a slider reach the environment as entered,
    with the mode the person picked."""
    play_steering(page, site)
    untouched = field(page, "thrust", 2, "dy").input_value()
    field(page, "thrust", 0, "dx").fill("0.0125")
    field(page, "thrust", 0, "dy").fill(" -0.05 ")  # the bound, spaces around
    field(page, "thrust", 2, "dx").fill("-3.5e-3")
    field(page, "throttle", 0, "power").fill("0.03")
    slider = field(page, "thrust", 1, "dy").locator("xpath=following-sibling::input[@type='range']")
    slider.fill("0.02")
    assert field(page, "thrust", 1, "dy").input_value() == "0.02"  # the field follows
    page.locator("#decision input[type=radio]").nth(0).check()  # calm
    page.locator("#decision").screenshot(path=str(artifacts(tmp_path) / "web-human-continuous.png"))
    page.click("#step")
    page.wait_for_selector("#status:has-text('return so far 1.000')")
    (actions,) = received(page)
    assert actions["thrust"]["actors"] == SHIPS
    values = actions["thrust"]["values"]
    assert values[0] == [0.0125, -0.05]
    assert values[1][1] == 0.02
    assert values[2] == [-0.0035, float(untouched)]
    assert actions["throttle"] == {"values": [0.03]}
    assert actions["mode"] == {"index": 0, "label": "calm"}
    # The next decision's fields are prefilled afresh.
    assert field(page, "thrust", 0, "dx").input_value() == "0.05"


@pytest.mark.parametrize(
    ("key", "typed", "who", "bounds"),
    [
        (("thrust", 1, "dy"), "abc", 'actor "ship b"', "[-0.05, 0.05]"),
        (("thrust", 0, "dx"), "0.0501", 'actor "ship a"', "[-0.05, 0.05]"),
        (("thrust", 2, "dx"), "-1", 'actor "ship c"', "[-0.05, 0.05]"),
        (("throttle", 0, "power"), "", "the global action", "[-0.02, 0.03]"),
        (("throttle", 0, "power"), "0x1", "the global action", "[-0.02, 0.03]"),
        (("throttle", 0, "power"), "1e400", "the global action", "[-0.02, 0.03]"),
        (("throttle", 0, "power"), "NaN", "the global action", "[-0.02, 0.03]"),
    ],
)
def test_a_wrong_value_is_named_and_steps_nothing(page, site, key, typed, who, bounds) -> None:
    """Not a number, or beyond the bounds: the status line names the action, the actor, the
    component, the bounds and what was typed, the field is marked, and the environment
    receives nothing (Step, or Play, which stops); corrected, the step goes through."""
    play_steering(page, site)
    action, _, component = key
    field(page, *key).fill(typed)
    page.click("#step")
    message = (
        f'{action}: {who}, component "{component}": expected a number in {bounds}, got "{typed}"'
    )
    page.wait_for_selector("#status.error")
    assert status(page) == f"cannot step: {message}"
    assert field(page, *key).get_attribute("aria-invalid") == "true"
    page.click("#run")
    page.wait_for_selector("#status:has-text('stopped playing')")
    assert status(page) == f"stopped playing: {message}"
    assert page.text_content("#run") == "Play"
    assert received(page) == []
    field(page, *key).fill("0.01")
    assert field(page, *key).get_attribute("aria-invalid") is None
    page.click("#step")
    page.wait_for_selector("#status:has-text('return so far 1.000')")
    (actions,) = received(page)
    if action == "thrust":
        assert actions["thrust"]["values"][key[1]][["dx", "dy"].index(component)] == 0.01
    else:
        assert actions["throttle"] == {"values": [0.01]}


# ---------------------------------------------------------------------------- the example
def move_to_origin_state(env: ContinuousMoveToOrigin) -> dict[str, Any]:
    return {
        "position": env.position.tolist(),
        "velocity": env.velocity.tolist(),
        "steps": env.steps,
    }


def test_the_examples_rules_match_python(page, site) -> None:
    """web/examples/move_to_origin.js steps as ContinuousMoveToOrigin does, from Python's
    states, with thrusts within the bounds."""
    open_page(page, f"{site}/index.html?env=examples/move_to_origin.js")
    rng = np.random.default_rng(0)
    env = ContinuousMoveToOrigin(max_steps=6)
    env.seed(3)
    python = [observation_json(env.reset())]
    state = move_to_origin_state(env)
    thrusts = rng.uniform(-0.01, 0.01, size=(6, 1, 2))
    for thrust in thrusts:
        python.append(
            observation_json(env.act({"thrust": ContinuousAction([("Spaceship", 0)], thrust)}))
        )
    in_page = page.evaluate(
        "([state, actions]) => window.entityrl.runRules({ id: 'ContinuousMoveToOrigin', kwargs: { max_steps: 6 } }, state, actions)",
        [
            state,
            [{"thrust": {"actors": [["Spaceship", 0]], "values": t.tolist()}} for t in thrusts],
        ],
    )
    for got, want in zip(in_page, python, strict=True):
        np.testing.assert_allclose(
            got["features"]["Spaceship"], want["features"]["Spaceship"], rtol=1e-6, atol=1e-7
        )
        assert got["reward"] == pytest.approx(want["reward"], abs=1e-6)
        assert got["done"] == want["done"]
    assert in_page[-1]["done"]


def test_a_person_plays_the_example_with_continuous_actions(page, site, files, tmp_path) -> None:
    """web/examples/move_to_origin.js with an exported ContinuousMoveToOrigin policy: the page
    plays it (the agent's episodes from Python's starts earn what they earn in Python), and a
    person's thrust reaches it as entered and moves the ship as in Python."""
    open_page(
        page, f"{site}/index.html?env=examples/move_to_origin.js&model=/files/move_to_origin.onnx"
    )
    assert status(page).startswith("return so far 0.000"), status(page)
    policy, env = load(files / "move_to_origin.onnx", deterministic=True), ContinuousMoveToOrigin()
    starts, python = [], []
    for seed in range(5):
        env.seed(seed)
        obs = env.reset()
        starts.append(move_to_origin_state(env))
        total = 0.0
        while not obs.done:
            obs = env.act(policy.act(obs))
            total += obs.reward
        python.append(total)
    in_page = page.evaluate(
        "(states) => window.entityrl.playEpisodes({ episodes: states.length, deterministic: true, initialStates: states })",
        starts,
    )
    np.testing.assert_allclose(in_page, python, atol=1e-4)

    page.evaluate(RECORDED_MOVE_TO_ORIGIN)
    page.evaluate("() => window.entityrl.usePolicy('/files/move_to_origin.onnx', 'agent')")
    page.check("#human")
    (start,) = page.evaluate("() => window.observations")
    obs = Observation(
        features=start["features"],
        actions={"thrust": ContinuousActionMask(actor_types=["Spaceship"])},
    )
    mean = policy.decide(obs).mean["thrust"][0]
    for component, m in zip(("horizontal", "vertical"), mean, strict=True):
        prefilled = field(page, "thrust", 0, component).input_value()
        assert float(prefilled) == pytest.approx(np.clip(m, -0.01, 0.01), abs=TOLERANCE)
    field(page, "thrust", 0, "horizontal").fill("0.004")
    field(page, "thrust", 0, "vertical").fill("-0.01")
    page.click("#step")
    page.wait_for_selector("#status:has-text('return so far')")
    assert received(page) == [
        {"thrust": {"actors": [["Spaceship", 0]], "values": [[0.004, -0.01]]}}
    ]
    x, y = start["features"]["Spaceship"][0][:2]
    env.position, env.velocity, env.steps = np.array([x, y]), np.zeros(2), 0
    want = env.act({"thrust": ContinuousAction([("Spaceship", 0)], np.array([[0.004, -0.01]]))})
    got = page.evaluate("() => window.observations[1]")
    np.testing.assert_allclose(got["features"]["Spaceship"], want.features["Spaceship"], rtol=1e-6)
    assert got["reward"] == pytest.approx(want.reward, abs=1e-7)
    page.screenshot(path=str(artifacts(tmp_path) / "web-move-to-origin-human.png"))
