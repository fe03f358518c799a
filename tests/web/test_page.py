"""The browser page (web/) with what it was not built for: broken or foreign files, a 404,
names that are HTML, environments it has no rules for (replayed with the generic entity view,
evaluated, or written by a user against its JavaScript environment API), and its build
(web/dist). Skipped, with the reason, where Chromium, web/'s npm packages or playwright are
missing."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from browser import (
    WEB,
    artifacts,
    error_checked_page,
    missing_requirements,
    serve,
    status_after,
)
from export.torch_reference import sharpened, untrained_agent

from entityrl.env import (
    CategoricalActionSpace,
    Entity,
    Environment,
    Observation,
    ObsSpace,
    RandomPolicy,
    SelectEntityActionMask,
    SelectEntityActionSpace,
)
from entityrl.envs import CherryPick, make_vec
from entityrl.export import export_onnx
from entityrl.export.replay import RecordingEnv, read_episodes
from entityrl.inference import load
from entityrl.training import evaluate

pytestmark = pytest.mark.skipif(
    missing_requirements() is not None, reason=str(missing_requirements())
)

# Names that are markup: set as text they show as written; set as HTML they would make
# elements (and the image's onerror would mark the page).
INJECTED = '<img src=x onerror="document.body.dataset.injected=1">'
HTML_ENV = f"Env{INJECTED}"
HTML_TYPE = "<i>Ship</i>"
HTML_ACTION = "<b>steer</b>"
HTML_CHOICE = "<u>left</u>"


class PickHeaviest(Environment):
    """The README's PickHeaviest, whose page version is web/examples/pick_heaviest.js."""

    def obs_space(self) -> ObsSpace:
        return ObsSpace(entities={"Box": Entity(["weight"]), "Picker": Entity([])})

    def action_space(self) -> dict:
        return {"pick": SelectEntityActionSpace()}

    def reset(self) -> Observation:
        self.weights = self.rng.uniform(0, 10, size=self.rng.integers(2, 8))
        return Observation(
            features={"Box": self.weights.reshape(-1, 1), "Picker": np.zeros((1, 0))},
            ids={"Box": list(range(len(self.weights))), "Picker": ["picker"]},
            actions={"pick": SelectEntityActionMask(actor_types=["Picker"], actee_types=["Box"])},
        )

    def act(self, actions: dict) -> Observation:
        (box,) = actions["pick"].actees
        return Observation(done=True, reward=float(self.weights[box] == self.weights.max()))


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Served at /files/: a model (``cherry_pick.onnx``), the same cut in half or after two
    bytes, the same without entityrl's metadata, a file that is
    no model, a model named in HTML, a PickHeaviest policy, and a recording of TreasureHunt
    (an environment the page has no rules for)."""
    directory = tmp_path_factory.mktemp("files")
    env = CherryPick()
    export_onnx(
        untrained_agent(env.obs_space(), env.action_space(), "CherryPick"),
        directory / "cherry_pick.onnx",
    )
    model = (directory / "cherry_pick.onnx").read_bytes()
    (directory / "truncated.onnx").write_bytes(model[: len(model) // 2])
    # Cut inside a number: the model's first field (ir_version) and a byte that says more
    # follow. A parser that reads on past the end never returns from it.
    (directory / "cut.onnx").write_bytes(model[:1] + b"\x80")
    (directory / "notes.onnx").write_text("These are notes, not a model.\n")
    foreign = onnx.load(directory / "cherry_pick.onnx")
    del foreign.metadata_props[:]  # an ONNX model, but not one entityrl exported
    onnx.save(foreign, directory / "foreign.onnx")
    html = untrained_agent(
        ObsSpace({HTML_TYPE: Entity(["x", "y", "<b>fuel</b>"])}),
        {HTML_ACTION: CategoricalActionSpace([HTML_CHOICE, "right"])},
        env_id=HTML_ENV,
    )
    export_onnx(html, directory / "html.onnx")
    pick = PickHeaviest()
    export_onnx(
        sharpened(untrained_agent(pick.obs_space(), pick.action_space(), "PickHeaviest")),
        directory / "pick_heaviest.onnx",
    )
    vec = make_vec("TreasureHunt", 2, seed=0)
    with (directory / "treasure_hunt.jsonl").open("w") as out:
        recording = RecordingEnv(vec, out, {"id": "TreasureHunt", "kwargs": {}})
        evaluate(RandomPolicy(vec.action_space, seed=0), recording, episodes=3)
    return directory


@pytest.fixture(scope="module")
def site(files: Path) -> Iterator[str]:
    with serve(files) as url:
        yield url


@pytest.fixture
def page(site: str) -> Iterator[Any]:
    """A fresh tab per test (each opens the page itself); uncaught errors fail the test."""
    with error_checked_page() as page:
        yield page
        assert page.get_attribute("body", "data-injected") is None, "markup ran as HTML"


def open_page(page: Any, url: str) -> None:
    page.goto(url)
    page.wait_for_selector("body[data-ready=true]")


def load_model(page: Any, files: Path, name: str) -> str:
    """Chooses ``name`` in the page's file input; the status line once it has loaded."""
    return status_after(page, lambda: page.set_input_files("#model-file", str(files / name)))


# ---------------------------------------------------------------------------- errors
def test_broken_and_foreign_models_are_named_in_the_page(page, site, files) -> None:
    """A truncated model and a file that is no model end in a message in the status line
    (the parser stops at the end of the file instead of freezing the tab); a mistyped
    ?model= URL says HTTP 404."""
    open_page(page, f"{site}/index.html")
    size = (files / "truncated.onnx").stat().st_size
    for name, reason in (
        ("truncated.onnx", rf"field \d+ needs \d+ bytes, \d+ are left at byte \d+ of {size}"),
        ("cut.onnx", "the file ends inside a number at byte 2 of 2"),
        ("notes.onnx", r"protobuf wire type 4 \(ONNX uses 0, 1, 2 and 5\) at byte 0 of 30"),
    ):
        status = load_model(page, files, name)
        assert re.fullmatch(f"cannot load {name}: not an ONNX model: {reason}", status), status
        assert "error" in page.get_attribute("#status", "class")
    status = load_model(page, files, "foreign.onnx")
    assert status == (
        "cannot load foreign.onnx: not an entityrl policy: its metadata has no entityrl.format, "
        "expected entityrl-policy/1 (export one with `entityrl export RUN_DIR`)"
    ), status
    open_page(page, f"{site}/index.html?model=/files/missing.onnx")
    status = page.text_content("#status")
    assert status.startswith("cannot load /files/missing.onnx: HTTP 404"), status
    assert page.text_content("#model-info") == "/files/missing.onnx: not loaded"


def test_evaluate_without_rules_says_why_instead_of_hanging(page, site) -> None:
    """The model's environment has no rules in the page: loading says so, and Evaluate, Step
    and Play name the reason."""
    open_page(page, f"{site}/index.html?model=/files/html.onnx")
    assert page.text_content("#status").startswith(f"no rules for {HTML_ENV} in this page")
    for button, what in (("#evaluate", "evaluate"), ("#step", "step"), ("#run", "play")):
        page.click(button)
        page.wait_for_selector(f"#status:has-text('cannot {what}')", timeout=5000)
        status = page.text_content("#status")
        assert status.startswith(f"cannot {what}: no rules for {HTML_ENV} in this page"), status
        assert "?env=URL" in status
    assert page.get_attribute("body", "data-mean-return") is None


def test_wrong_recordings_are_named_in_the_replay(page, site, tmp_path) -> None:
    """An Arrow recording (``--record``'s format) and JSON lines of something else: the
    replay's line says what is wrong and which flag writes the viewer's format."""
    open_page(page, f"{site}/index.html")
    arrow = tmp_path / "episodes.arrow"
    arrow.write_bytes(b"\xff\xff\xff\xff\x10\x00\x00\x00ARROW1\x00\x01")
    page.set_input_files("#replay-file", str(arrow))
    page.wait_for_selector("#replay-where.error")
    assert page.text_content("#replay-where").startswith(
        "cannot replay episodes.arrow: line 1 is not JSON"
    )
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"format": "something-else/2"}) + "\n")
    page.set_input_files("#replay-file", str(other))
    page.wait_for_selector("#replay-where:has-text('other.jsonl')")
    where = page.text_content("#replay-where")
    assert 'not a recording of entityrl episodes: format "something-else/2"' in where
    assert "--replay" in where


# ---------------------------------------------------------------------------- HTML names
def test_names_from_models_are_shown_as_text(page, site) -> None:
    """A model whose environment, entity type, feature, action and choice are named in HTML,
    played live in a user environment registered under that name: the legend, the entity
    list, the decision table and the model line show the names as written, and no element
    comes of them."""
    open_page(page, f"{site}/index.html")
    page.evaluate(
        """([id, type]) => {
            class Env {
                reset() {
                    return { features: { [type]: [[0, 0, 1], [3, 4, 0.5]] }, ids: { [type]: ["<s>a</s>", 7] },
                             actions: { "<b>steer</b>": { actor_types: [type] } }, reward: 0, done: false };
                }
                act() { return { reward: 1, done: true }; }
            }
            window.entityrl.registerEnvironment(id, Env);
        }""",
        [HTML_ENV, HTML_TYPE],
    )
    page.evaluate("() => window.entityrl.usePolicy('/files/html.onnx', 'html.onnx')")
    assert HTML_ENV in page.text_content("#model-info")
    assert f"{HTML_TYPE} at (x, y)" in page.text_content("#board-legend")
    entities = page.text_content("#board-entities")
    assert "<s>a</s>" in entities and "<b>fuel</b>=1.000" in entities
    decision = page.text_content("#decision")
    assert HTML_ACTION in decision and HTML_CHOICE in decision
    assert page.locator("main img, main b, main i, main u, main s, header img").count() == 0


def test_names_from_recordings_are_shown_as_text(page, site, tmp_path) -> None:
    recording = tmp_path / "html.jsonl"
    spaces = {
        "entities": {HTML_TYPE: ["x", "y"]},
        "global_features": [],
        "actions": {HTML_ACTION: {"kind": "CategoricalActionSpace", "choices": [HTML_CHOICE]}},
    }
    header = {"format": "entityrl-episodes/1", "env": {"id": HTML_ENV}, "spaces": spaces}
    step = {
        "episode": 0,
        "step": 0,
        "observation": {
            "features": {HTML_TYPE: [[1.0, 2.0]]},
            "actions": {HTML_ACTION: {"actors": [0]}},
        },
        "actions": {HTML_ACTION: [0]},
        "reward": 1.0,
        "return": 1.0,
    }
    recording.write_text(f"{json.dumps(header)}\n{json.dumps(step)}\n")
    open_page(page, f"{site}/index.html")
    page.set_input_files("#replay-file", str(recording))
    page.wait_for_selector("#replay-details tr")
    assert page.text_content("#replay-where").startswith(f"{HTML_ENV}: episode 0, step 0")
    details = page.text_content("#replay-details")
    assert HTML_TYPE in details and f"{HTML_ACTION}#0 → {HTML_CHOICE}" in details
    assert HTML_TYPE in page.text_content("#replay-legend")
    assert page.locator("#replay img, #replay b, #replay i, #replay u").count() == 0


# ---------------------------------------------------------------------------- any environment
def drawn_pixels(page: Any, canvas: str) -> int:
    """Pixels of ``canvas`` that are not transparent."""
    return page.evaluate(
        """(selector) => {
            const canvas = document.querySelector(selector);
            const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
            let drawn = 0;
            for (let i = 3; i < data.length; i += 4) drawn += data[i] > 0;
            return drawn;
        }""",
        canvas,
    )


def test_the_generic_view_replays_an_environment_the_page_has_no_rules_for(
    page, site, files, tmp_path
) -> None:
    """TreasureHunt, recorded from Python: its entities are placed (x_pos/y_pos) and labelled,
    the legend names each type, the table lists them, and Play steps on by itself to the
    last step."""
    _, steps = read_episodes(files / "treasure_hunt.jsonl")
    open_page(page, f"{site}/index.html")
    page.set_input_files("#replay-file", str(files / "treasure_hunt.jsonl"))
    page.wait_for_selector("#replay-where:has-text('TreasureHunt')")
    legend = page.text_content("#replay-legend")
    assert "Trap at (x_pos, y_pos)" in legend and "Treasure at (x_pos, y_pos)" in legend
    assert "global features at (x_pos, y_pos)" in legend  # the player
    assert drawn_pixels(page, "#replay-board") > 0
    entities = sum(len(rows) for rows in steps[0]["observation"]["features"].values())
    assert page.locator("#replay-details td:text-is('#0')").count() == 1
    assert page.locator("#replay-details tr").count() == 1 + entities + 1  # + the action
    page.evaluate("(i) => window.entityrl.replay.show(i)", len(steps) - 3)
    page.click("#replay-play")
    assert page.text_content("#replay-play") == "Pause"
    page.wait_for_selector("#replay-play:text-is('Play')", timeout=5000)  # paused at the end
    last = steps[-1]
    assert f"return {last['return']:.3f}" in page.text_content("#replay-where")
    assert page.evaluate("() => window.entityrl.replay.index") == len(steps) - 1
    page.locator("#replay").screenshot(path=str(artifacts(tmp_path) / "web-generic-replay.png"))


def test_the_replay_shows_continuous_actions(page, site, tmp_path) -> None:
    """ContinuousMoveToOrigin: each step's thrust, both components, after the actor."""
    vec = make_vec("ContinuousMoveToOrigin", 1, seed=0)
    path = tmp_path / "continuous.jsonl"
    with path.open("w") as out:
        recording = RecordingEnv(vec, out, {"id": "ContinuousMoveToOrigin", "kwargs": {}})
        evaluate(RandomPolicy(vec.action_space, seed=0), recording, episodes=1)
    _, steps = read_episodes(path)
    open_page(page, f"{site}/index.html")
    page.set_input_files("#replay-file", str(path))
    page.wait_for_selector("#replay-details tr")
    dx, dy = steps[0]["actions"]["thrust"][0]
    assert f"thrust#0 → {dx:.3f}, {dy:.3f}" in page.text_content("#replay-details")
    assert "Spaceship at (x_pos, y_pos)" in page.text_content("#replay-legend")
    assert drawn_pixels(page, "#replay-board") > 0


def test_a_users_environment_plays_live_with_an_exported_policy(page, site, files) -> None:
    """web/examples/pick_heaviest.js, loaded with ?env=: the page plays it with the policy,
    draws it with the generic view, evaluates it, and from Python's starts the agent's most
    probable picks earn what they earn in Python."""
    open_page(
        page, f"{site}/index.html?env=examples/pick_heaviest.js&model=/files/pick_heaviest.onnx"
    )
    assert page.text_content("#status").startswith("return so far 0.000"), page.text_content(
        "#status"
    )
    assert "Box listed only" in page.text_content("#board-legend")
    assert page.locator("#board-entities td:text-is('picker')").count() == 1
    page.click("#step")
    page.wait_for_selector("#status:has-text('episode over')")
    env, policy = PickHeaviest(), load(files / "pick_heaviest.onnx", deterministic=True)
    starts, python = [], []
    for seed in range(40):
        env.seed(seed)
        obs = env.reset()
        starts.append({"weights": env.weights.tolist()})
        python.append(env.act(policy.act(obs)).reward)
    in_page = page.evaluate(
        "(states) => window.entityrl.playEpisodes({ episodes: states.length, deterministic: true, initialStates: states })",
        starts,
    )
    assert in_page == python
    assert 0 < sum(python) < len(python)  # some picks right, some wrong: the states matter
    page.fill("#episodes", "20")
    page.click("#evaluate")
    page.wait_for_selector("body[data-mean-return]", timeout=60_000)
    assert 0 <= float(page.get_attribute("body", "data-mean-return")) <= 1


def test_a_users_environment_chosen_as_a_file_starts_the_waiting_policy(page, site, files) -> None:
    """The policy first, without rules for its environment; then the environment's module,
    chosen in the page: the page plays it."""
    open_page(page, f"{site}/index.html")
    assert load_model(page, files, "pick_heaviest.onnx").startswith("no rules for PickHeaviest")
    page.set_input_files("#env-file", str(WEB / "examples" / "pick_heaviest.js"))
    page.wait_for_selector("#status:has-text('return so far 0.000')")
    assert page.locator("#board-entities td:text-is('picker')").count() == 1


def test_environments_from_other_sites_are_refused(page, site) -> None:
    """A link to the page cannot make it run another site's code."""
    for env in ("https://example.invalid/env.js", "data:text/javascript,export class X {}"):
        open_page(page, f"{site}/index.html?env={env}")
        status = page.text_content("#status")
        assert status == (
            f"cannot load the environments of {env}: {env} is not on this site ({site}): "
            "serve your environment beside the page"
        ), status


# ---------------------------------------------------------------------------- build
def test_the_built_page_loads_with_only_its_files(page, files, tmp_path) -> None:
    """``node build.mjs OUT`` (npm run build) copies the page and three files of
    onnxruntime-web; served alone, the build loads a model and decides, and asks for no file
    it lacks. Without onnxruntime-web the page says that its scripts did not load."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("no node: apt-get install nodejs")
    out = tmp_path / "dist"
    subprocess.run([node, str(WEB / "build.mjs"), str(out)], check=True, capture_output=True)
    ort = sorted(p.name for p in (out / "node_modules").rglob("*") if p.is_file())
    assert ort == ["ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm", "ort.wasm.min.mjs"]
    failed: list[str] = []
    page.on("response", lambda r: failed.append(r.url) if r.status >= 400 else None)
    with serve(files, root=out) as url:
        open_page(page, f"{url}/index.html?model=/files/cherry_pick.onnx")
        assert page.text_content("#status").startswith("return so far"), page.text_content(
            "#status"
        )
    assert not failed, failed
    # Without onnxruntime-web (served before `npm ci`), the page says so.
    (out / "node_modules" / "onnxruntime-web" / "dist" / "ort.wasm.min.mjs").unlink()
    with serve(files, root=out) as url:
        open_page(page, f"{url}/index.html")
        assert page.text_content("#status").startswith("the page's scripts did not load")
