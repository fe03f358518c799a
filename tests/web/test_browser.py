"""The browser page (web/) in headless Chromium: its policy decides as onnxruntime in Python
does, its JavaScript rules step as the Python environments do, and the agent it runs plays as
well as in Python. Skipped, with the reason, where Chromium, web/'s npm packages or playwright
are missing."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from browser import (
    artifacts,
    error_checked_page,
    missing_requirements,
    observation_json,
    serve,
    status_after,
    to_json,
)
from env.strategies import observations
from export.torch_reference import IMAGE_TOLERANCE, sharpened, untrained_agent
from hypothesis import HealthCheck, given, settings
from nn.image_envs import ACTIONS as IMAGE_ACTIONS
from nn.image_envs import SPACE as IMAGE_SPACE
from nn.image_envs import Glimpse, with_images
from stacking_envs import Blinking

from entityrl.env import (
    Action,
    CategoricalAction,
    CategoricalActionSpace,
    ContinuousActionMask,
    ContinuousActionSpace,
    Entity,
    GlobalCategoricalActionMask,
    GlobalCategoricalActionSpace,
    GlobalContinuousActionMask,
    GlobalContinuousActionSpace,
    Observation,
    ObsSpace,
    RandomPolicy,
    SelectEntityAction,
    SelectEntityActionSpace,
    SerialVecEnv,
)
from entityrl.env.stacking import stacked_space
from entityrl.envs import CherryPick, ContinuousMoveToOrigin, MineSweeper, Recall, make_vec
from entityrl.export import export_onnx
from entityrl.export.replay import RecordingEnv, decoded_image, encoded_image, read_episodes
from entityrl.inference import Decision, OnnxPolicy, load
from entityrl.training import evaluate

pytestmark = pytest.mark.skipif(
    missing_requirements() is not None, reason=str(missing_requirements())
)

MINESWEEPER = {
    "width": 4,
    "height": 4,
    "nmines": 2,
    "nrobots": 1,
    "orbital_cannon": True,
    "cooldown_period": 2,
    "max_steps": 30,
}
RECALL = {"delay": 3}
MEMORY_WEIGHT = 10.0
TOLERANCE = 1e-5
EPISODES = 150  # of the evaluation in the page, and in Python


# ---------------------------------------------------------------------------- JSON forms
def actions_json(actions: Mapping[str, Action]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, action in actions.items():
        if isinstance(action, CategoricalAction):
            out[name] = {"actors": to_json(action.actors), "indices": to_json(action.indices)}
        elif isinstance(action, SelectEntityAction):
            out[name] = {"actors": to_json(action.actors), "actees": to_json(action.actees)}
        else:
            out[name] = {"index": action.index, "label": action.label}
    return out


# ---------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Per environment, an untrained agent (``<env>.onnx``; for comparing decisions) and the
    same with sharpened heads (``<env>_sharp.onnx``; for playing: its most probable actions
    are far more probable than the next, so float rounding cannot swap them); with memory
    (net.memory), sharpened: ``minesweeper_memory_sharp.onnx`` and ``recall_memory.onnx``."""
    directory = tmp_path_factory.mktemp("models")
    for name, env, kwargs in (
        ("cherry_pick", CherryPick(), {}),
        ("minesweeper", MineSweeper(**MINESWEEPER), MINESWEEPER),
    ):
        agent = untrained_agent(env.obs_space(), env.action_space(), env_id=type(env).__name__)
        agent.config.env.kwargs = kwargs
        export_onnx(agent, directory / f"{name}.onnx")
        export_onnx(sharpened(agent), directory / f"{name}_sharp.onnx")
    for name, env, kwargs in (
        ("minesweeper_memory_sharp", MineSweeper(**MINESWEEPER), MINESWEEPER),
        ("recall_memory", Recall(**RECALL), RECALL),
    ):
        agent = untrained_agent(
            env.obs_space(), env.action_space(), env_id=type(env).__name__, memory=True
        )
        agent.config.env.kwargs = kwargs
        # The state weighs on every decision as much as the entities do, so that a state
        # carried into the next episode changes what the agent does there.
        with torch.no_grad():
            agent.net.memory.proj.weight.mul_(MEMORY_WEIGHT)
        export_onnx(sharpened(agent), directory / f"{name}.onnx")
    export_onnx(untrained_agent(*EVERY_KIND), directory / "every_kind.onnx")
    env = ContinuousMoveToOrigin()
    export_onnx(
        untrained_agent(env.obs_space(), env.action_space(), "ContinuousMoveToOrigin"),
        directory / "continuous.onnx",
    )
    # Sharpened 400-fold: means up to about 4 half ranges from the centre, so that the most
    # probable actions (the means, clipped) reach the bounds.
    export_onnx(sharpened(untrained_agent(*GAUSSIAN), 400), directory / "gaussian.onnx")
    wide = untrained_agent(*GAUSSIAN_WIDE)
    with torch.no_grad():  # standard deviations 0.5 and 2 for thrust: far inside the bounds
        wide.net.heads["thrust"].log_std.copy_(torch.tensor([0.5, 2.0]).log() - np.log(100))
    export_onnx(wide, directory / "gaussian_wide.onnx")
    for name, env in (
        ("blinking_int", Blinking(ids="int")),
        ("blinking_str", Blinking(ids="str")),
        ("glimpse", Glimpse()),  # three images, the current step's, besides the stack
    ):
        obs_space = stacked_space(env.obs_space(), STACK)
        stacked = untrained_agent(obs_space, env.action_space(), type(env).__name__)
        stacked.config.env.stack = STACK
        export_onnx(sharpened(stacked), directory / f"{name}_stacked.onnx")
    # The page plays Glimpse live from these rules, served beside the models.
    shutil.copy(Path(__file__).with_name("glimpse.js"), directory)
    for encoder in ("small", "impala"):
        agent = untrained_agent(IMAGE_SPACE, IMAGE_ACTIONS, image_encoder=encoder)
        export_onnx(agent, directory / f"images_{encoder}.onnx")
    return directory


EVERY_KIND = (
    ObsSpace({"A": Entity(["a0", "a1"]), "B": Entity([]), "C": Entity(["c0"])}, ["g0", "g1"]),
    {
        "move": CategoricalActionSpace(["left", "right", "stay"]),
        "pick": SelectEntityActionSpace(),
        "mode": GlobalCategoricalActionSpace(["calm", "bold"]),
    },
)


GAUSSIAN = (
    ObsSpace({"Ship": Entity(["x", "y"])}, ["time"]),
    {
        "thrust": ContinuousActionSpace(["dx", "dy"], low=-0.05, high=0.05),
        "throttle": GlobalContinuousActionSpace(["power"], low=[-0.02], high=[0.03]),
        "mode": GlobalCategoricalActionSpace(["calm", "bold"]),
    },
)
GAUSSIAN_WIDE = (
    ObsSpace({"Ship": Entity(["x", "y"])}),
    {"thrust": ContinuousActionSpace(["dx", "dy"], low=-100.0, high=100.0)},
)
STACK = 3


@pytest.fixture(scope="module")
def site(models: Path) -> Iterator[str]:
    with serve(models) as url:
        yield url


@pytest.fixture(scope="module")
def page(site: str) -> Iterator[Any]:
    with error_checked_page() as page:
        page.goto(f"{site}/index.html")
        page.wait_for_selector("body[data-ready=true]")
        yield page


def use(page: Any, model: str) -> None:
    """Load ``model`` in the page, unless it is the one loaded last."""
    if page.evaluate("() => window.entityrl.current") == model:
        return
    page.evaluate("(url) => window.entityrl.usePolicy(url, url)", f"/files/{model}")
    page.evaluate("(model) => { window.entityrl.current = model; }", model)


# ---------------------------------------------------------------------------- decisions
def assert_page_decides_as_python(
    page: Any,
    policy: OnnxPolicy,
    obs: Observation,
    new_episode: bool = False,
    tolerance: float = TOLERANCE,
) -> Decision:
    """The page's decision equals the Python runtime's within ``tolerance``; returns Python's."""
    got = page.evaluate(
        """async ([obs, newEpisode]) => {
            const d = await window.entityrl.decide(obs, { newEpisode });
            const rows = (table) => table.map((r) => Array.from(r));
            const probs = {}, mean = {}, std = {};
            for (const [name, a] of Object.entries(d.actions)) {
                if (a.mean) [mean[name], std[name]] = [rows(a.mean), Array.from(a.std)];
                else probs[name] = rows(a.probs);
            }
            return { probs, mean, std, value: d.value };
        }""",
        [observation_json(obs), new_episode],
    )
    want = policy.decide(obs, new_episode=new_episode)
    assert got["value"] == pytest.approx(want.value, abs=tolerance)
    for key, tables in (("probs", want.probs), ("mean", want.mean), ("std", want.std)):
        assert set(got[key]) == set(tables), key
        for name, table in tables.items():
            page_table = np.array(got[key][name], dtype=np.float32).reshape(table.shape)
            np.testing.assert_allclose(page_table, table, atol=tolerance, rtol=0)
    return want


def test_the_page_decides_as_onnxruntime_in_python_on_environment_observations(
    page, models
) -> None:
    for model, env in (
        ("cherry_pick.onnx", CherryPick()),
        ("minesweeper.onnx", MineSweeper(**MINESWEEPER)),
    ):
        use(page, model)
        policy = load(models / model, deterministic=True)
        env.seed(5)
        obs = env.reset()
        for _ in range(8):
            assert_page_decides_as_python(page, policy, obs)
            obs = env.reset() if obs.done else env.act(policy.act(obs))
        # No entity and no action: the exported mean over no entities (a ReduceMean in the
        # one-observation graph; CherryPick's network has no global token) is zeros in the
        # page as in Python.
        assert_page_decides_as_python(page, policy, Observation())


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(obs=observations(*EVERY_KIND))
def test_the_page_decides_as_onnxruntime_in_python_on_random_observations(
    page, models, obs
) -> None:
    """Every kind of action, ids and types naming actors, hidden entities, global features."""
    use(page, "every_kind.onnx")
    assert_page_decides_as_python(page, load(models / "every_kind.onnx"), obs)


def test_the_page_carries_a_memory_models_state_as_python_does(page, models) -> None:
    """Recall episodes one after another, each starting anew (newEpisode): the page feeds the
    state and carries the next one as the Python runtime does. Its delay steps look alike, so
    only the state tells their decisions apart."""
    use(page, "recall_memory.onnx")
    policy = load(models / "recall_memory.onnx")
    env = Recall(**RECALL)
    for seed in range(4):
        env.seed(seed)
        obs = env.reset()
        values = []
        for step in range(RECALL["delay"] + 1):
            decision = assert_page_decides_as_python(page, policy, obs, new_episode=step == 0)
            values.append(decision.value)
            obs = env.act({})
        assert len(set(values[1:])) > 1, "the state does not change the decisions"


def page_act(page: Any, obs: Observation) -> dict[str, Any]:
    """The page's most probable actions for ``obs``."""
    return page.evaluate(
        "async (obs) => (await window.entityrl.act(obs, { deterministic: true })).actions",
        observation_json(obs),
    )


def test_the_page_decides_and_acts_on_continuous_actions_as_python(page, models) -> None:
    """Per-actor and global Gaussians: means and standard deviations as onnxruntime's in
    Python; the most probable actions are the means clipped to the bounds, as Python's."""
    use(page, "continuous.onnx")
    policy = load(models / "continuous.onnx", deterministic=True)
    env = ContinuousMoveToOrigin()
    env.seed(2)
    obs = env.reset()
    for _ in range(10):
        assert_page_decides_as_python(page, policy, obs)
        want = policy.act(obs)
        got = page_act(page, obs)
        assert got["thrust"]["actors"] == to_json(want["thrust"].actors)
        np.testing.assert_allclose(got["thrust"]["values"], want["thrust"].values, atol=TOLERANCE)
        obs = env.act(want)
    use(page, "gaussian.onnx")
    policy = load(models / "gaussian.onnx", deterministic=True)
    rng = np.random.default_rng(0)
    clipped = 0
    for ships in (0, 1, 3, 5):
        obs = Observation(
            features={"Ship": rng.normal(size=(ships, 2)) * 3},
            ids={"Ship": [f"ship {i}" for i in range(ships)]},
            global_features=[float(rng.normal())],
            actions={"thrust": ContinuousActionMask(actor_types=["Ship"])},
        )
        if ships != 3:  # the global actions offered or not
            obs.actions["throttle"] = GlobalContinuousActionMask()
            obs.actions["mode"] = GlobalCategoricalActionMask()
        assert_page_decides_as_python(page, policy, obs)
        want, got = policy.act(obs), page_act(page, obs)
        # The page leaves out actions nobody takes (Python gives them without actors).
        assert set(got) == {n for n, a in want.items() if len(getattr(a, "actors", "global"))}
        if "throttle" in want:
            np.testing.assert_allclose(
                got["throttle"]["values"], want["throttle"].values, atol=TOLERANCE
            )
            clipped += np.isin(want["throttle"].values, np.float32([-0.02, 0.03])).sum()
        if ships:
            np.testing.assert_allclose(
                got["thrust"]["values"], want["thrust"].values, atol=TOLERANCE
            )
            clipped += np.isin(want["thrust"].values, np.float32([-0.05, 0.05])).sum()
    assert clipped, "no mean beyond a bound: clipping went untested"


def test_the_pages_sampled_continuous_actions_follow_the_gaussian(page, models) -> None:
    """3,000 seeded draws of each of two actors (bounds far away: no clipping): each
    component's mean and standard deviation within 5 standard errors of the decision's."""
    use(page, "gaussian_wide.onnx")
    obs = Observation(
        features={"Ship": [[0.5, -1.0], [2.0, 0.3]]},
        actions={"thrust": ContinuousActionMask(actor_types=["Ship"])},
    )
    draws = 3000
    values = np.array(
        page.evaluate(
            """async ([obs, draws]) => {
                const rng = new window.entityrl.Random(7);
                const out = [];
                for (let i = 0; i < draws; i++) out.push((await window.entityrl.act(obs, { rng })).actions.thrust.values);
                return out;
            }""",
            [observation_json(obs), draws],
        )
    )  # (draws, actors, dims)
    decision = load(models / "gaussian_wide.onnx").decide(obs)
    mean, std = decision.mean["thrust"], decision.std["thrust"]
    np.testing.assert_allclose(std, [0.5, 2.0], rtol=1e-5)
    assert np.all(np.abs(values.mean(axis=0) - mean) <= 5 * std / np.sqrt(draws))
    assert np.all(np.abs(values.std(axis=0) - std) <= 5 * std / np.sqrt(2 * draws))


@pytest.mark.parametrize("ids", ["int", "str"])
def test_the_page_stacks_observations_as_python_does(page, models, ids) -> None:
    """A policy trained 3 steps deep, fed raw Blinking observations (entities vanishing,
    coming back and changing places; int or str ids): the page stacks each episode's history
    as the Python runtime does, and starts it afresh with each episode."""
    model = f"blinking_{ids}_stacked.onnx"
    use(page, model)
    policy = load(models / model)
    env = Blinking(ids=ids)
    for seed in range(3):
        env.seed(seed)
        obs = env.reset()
        values = []
        for step in range(env.length):
            values.append(assert_page_decides_as_python(page, policy, obs, step == 0).value)
            obs = env.act({})
        assert len(set(values)) == len(values), "the history does not change the decisions"


# ---------------------------------------------------------------------------- rules
def compare_rules(page: Any, env_json: dict, state: dict, python_obs: list, actions: list) -> None:
    """``python_obs``: the Python environment's observations in JSON form, taken as they came
    (environments may reuse their lists for the next step)."""
    page_obs = page.evaluate(
        "([env, state, actions]) => window.entityrl.runRules(env, state, actions)",
        [env_json, state, [actions_json(a) for a in actions]],
    )
    assert len(page_obs) == len(python_obs)
    for got, want in zip(page_obs, python_obs, strict=True):
        assert got["done"] == want["done"] and got["reward"] == pytest.approx(want["reward"])
        assert got["actions"] == want["actions"]
        assert got.get("ids", {}) == want.get("ids", {})
        assert set(got["features"]) == set(want["features"])
        for name, rows in want["features"].items():
            np.testing.assert_allclose(
                np.array(got["features"][name], dtype=np.float32).reshape(np.shape(rows)),
                rows,
                atol=1e-6,
            )


def minesweeper_state(env: MineSweeper) -> dict[str, Any]:
    """The state the page's MineSweeper rules start from (setState)."""
    return to_json(
        {"mines": env.mines, "robots": env.robots, "cooldown": env.cooldown, "orbital_cannon": True}
    )


def test_the_pages_cherry_pick_rules_match_python(page) -> None:
    rng = np.random.default_rng(0)
    for seed in range(3):
        env = CherryPick(num_cherries=10)
        env.seed(seed)
        obs = env.reset()
        python_obs = [observation_json(obs)]
        state = {"cherries": list(env.cherries), "steps": 0}
        actions = []
        while not obs.done:
            left = len(env.cherries)
            actions.append(
                {
                    "Pick Cherry": SelectEntityAction(
                        [("Player", 0)], [("Cherry", int(rng.integers(left)))]
                    )
                }
            )
            obs = env.act(actions[-1])
            python_obs.append(observation_json(obs))
        compare_rules(
            page, {"id": "CherryPick", "kwargs": {"num_cherries": 10}}, state, python_obs, actions
        )


def test_the_pages_minesweeper_rules_match_python(page) -> None:
    rng = np.random.default_rng(1)
    for seed in range(4):
        env = MineSweeper(**MINESWEEPER)
        env.seed(seed)
        obs = env.reset()
        python_obs = [observation_json(obs)]
        state = minesweeper_state(env)
        actions = []
        while not obs.done:
            robots = obs.entity_ids("Robot")
            legal = np.array(obs.actions["Move"].mask, dtype=bool).reshape(len(robots), 5)
            moves = [int(rng.choice(np.flatnonzero(row))) for row in legal]
            step: dict[str, Action] = {
                "Move": CategoricalAction(list(robots), np.array(moves, dtype=np.int64))
            }
            if obs.actions["Fire Orbital Cannon"].actor_types and rng.random() < 0.3:
                targets = obs.named_entities(
                    ["Mine", "Robot", "Orbital Cannon"], None, ["Mine", "Robot"]
                )
                step["Fire Orbital Cannon"] = SelectEntityAction(
                    [("Orbital Cannon", 0)], [targets[int(rng.integers(len(targets)))]]
                )
            actions.append(step)
            obs = env.act(step)
            python_obs.append(observation_json(obs))
        compare_rules(
            page, {"id": "MineSweeper", "kwargs": MINESWEEPER}, state, python_obs, actions
        )


# ---------------------------------------------------------------------------- playing
def python_returns(policy: OnnxPolicy, env: Any, seeds: range) -> list[float]:
    """The return of an episode from each seed's reset (with memory, from zeros)."""
    returns = []
    for seed in seeds:
        env.seed(seed)
        obs = env.reset()
        policy.reset()
        total = 0.0
        while not obs.done:
            obs = env.act(policy.act(obs))
            total += obs.reward
        returns.append(total)
    return returns


def test_the_agent_plays_the_same_episodes_in_the_page_and_in_python(page, models) -> None:
    """Most probable actions from the same starts: the same returns, episode by episode (with
    memory too: each episode starts from zeros)."""
    cases = {
        "cherry_pick_sharp.onnx": (
            CherryPick(),
            lambda env: {"cherries": list(env.cherries), "steps": 0},
        ),
        "minesweeper_sharp.onnx": (MineSweeper(**MINESWEEPER), minesweeper_state),
        "minesweeper_memory_sharp.onnx": (MineSweeper(**MINESWEEPER), minesweeper_state),
    }
    for model, (env, state_of) in cases.items():
        use(page, model)
        policy = load(models / model, deterministic=True)
        states = []
        for seed in range(12):
            env.seed(seed)
            env.reset()
            states.append(state_of(env))
        python = python_returns(policy, env, range(12))
        in_page = page.evaluate(
            "(states) => window.entityrl.playEpisodes({ episodes: states.length, deterministic: true, initialStates: states })",
            states,
        )
        np.testing.assert_allclose(in_page, python, atol=1e-6)


def test_the_pages_evaluation_matches_python_within_noise(page, models, tmp_path) -> None:
    """The page's Evaluate button (its own random episodes and samples) against the Python
    runtime's evaluation of the same agent; a screenshot of the page is kept."""
    use(page, "cherry_pick_sharp.onnx")
    page.fill("#episodes", str(EPISODES))
    page.click("#evaluate")
    page.wait_for_selector("body[data-mean-return]", timeout=120_000)
    in_page = float(page.get_attribute("body", "data-mean-return"))
    policy = load(models / "cherry_pick_sharp.onnx", seed=0)
    python = np.array(python_returns(policy, CherryPick(), range(EPISODES)))
    # The page's returns have the same spread; 4 standard errors of the difference.
    tolerance = 4 * python.std() * np.sqrt(2 / EPISODES)
    assert abs(in_page - python.mean()) < tolerance, (in_page, python.mean(), tolerance)
    page.click("#step")
    page.screenshot(path=str(artifacts(tmp_path) / "web-cherry-pick.png"))


def test_the_replay_viewer_steps_through_recorded_episodes(page, tmp_path) -> None:
    """Episodes of an environment the page has no rules for, recorded from Python."""
    env = make_vec("TreasureHunt", 2, seed=0)
    path = tmp_path / "episodes.jsonl"
    with path.open("w") as out:
        recording = RecordingEnv(env, out, {"id": "TreasureHunt", "kwargs": {}})
        evaluate(RandomPolicy(env.action_space, seed=0), recording, episodes=4)
    _, steps = read_episodes(path)
    page.set_input_files("#replay-file", str(path))
    page.wait_for_selector("#replay-where:has-text('TreasureHunt')")
    where = page.text_content("#replay-where")
    assert where.startswith("TreasureHunt: episode 0, step 0:")
    page.click("#replay-next")
    second = f"episode {steps[1]['episode']}, step {steps[1]['step']}:"
    assert second in page.text_content("#replay-where")
    page.evaluate("(i) => window.entityrl.replay.show(i)", len(steps) - 1)
    last = steps[-1]
    assert f"return {last['return']:.3f}" in page.text_content("#replay-where")
    entities = sum(len(rows) for rows in last["observation"]["features"].values())
    # One table row per entity, one per actor of each action, and the header.
    actors = sum(len(chosen) for chosen in last["actions"].values())
    assert page.locator("#replay-details tr").count() == 1 + entities + actors
    page.locator("#replay").screenshot(path=str(artifacts(tmp_path) / "web-replay.png"))


# ---------------------------------------------------------------------------- images
@pytest.mark.parametrize("encoder", ["small", "impala"])
@pytest.mark.parametrize("form", ["nested", "base64"])
@settings(
    max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(obs=observations(IMAGE_SPACE, IMAGE_ACTIONS))
def test_the_page_feeds_images_and_decides_as_python(page, models, encoder, form, obs) -> None:
    """A uint8 RGB image and a two-channel float32 one, as a JavaScript environment gives them
    (nested arrays [h][w][c]) or as recordings hold them (base64 of their bytes)."""
    model = f"images_{encoder}.onnx"
    use(page, model)
    with_images(obs, IMAGE_SPACE, seed=len(obs.features))
    obs.done = False  # an observation the policy decides carries its images
    want = load(models / model).decide(obs)
    data = observation_json(obs)
    if form == "base64":
        data["images"] = {name: encoded_image(pixels) for name, pixels in obs.images.items()}
    got = page.evaluate(
        """async (obs) => {
            const d = await window.entityrl.decide(obs);
            const probs = {};
            for (const [name, a] of Object.entries(d.actions)) probs[name] = a.probs.map((r) => Array.from(r));
            return { probs, value: d.value };
        }""",
        data,
    )
    assert got["value"] == pytest.approx(want.value, abs=TOLERANCE)
    for name, table in want.probs.items():
        page_table = np.array(got["probs"][name], dtype=np.float32).reshape(table.shape)
        np.testing.assert_allclose(page_table, table, atol=TOLERANCE, rtol=0)


def test_the_page_names_an_image_that_does_not_fit(page, models) -> None:
    use(page, "images_small.onnx")
    obs = with_images(Observation(global_features=[0.0]), IMAGE_SPACE, seed=0)
    data = observation_json(obs)
    data["images"]["camera"] = data["images"]["camera"][:-1]  # a row short
    message = page.evaluate(
        "async (obs) => window.entityrl.decide(obs).then(() => 'decided', (e) => e.message)", data
    )
    assert message == "image camera: expected [12, 9, 3] of uint8 (324 values), got 297 values"
    data["images"]["camera"] = encoded_image(obs.images["camera"][:, :, :1])
    message = page.evaluate(
        "async (obs) => window.entityrl.decide(obs).then(() => 'decided', (e) => e.message)", data
    )
    assert message == "image camera: expected [12, 9, 3] of uint8, got [12, 9, 1] of uint8"


def drawn_images(page: Any, container: str) -> dict[str, np.ndarray]:
    """Each image's canvas in ``container`` (by the image's name): its pixels as drawn,
    (height, width, 4) RGBA."""
    drawn = page.evaluate(
        """(container) => Object.fromEntries([...document.querySelectorAll(`${container} canvas`)]
            .map((c) => [c.dataset.image, {
                size: [c.height, c.width],
                rgba: Array.from(c.getContext("2d").getImageData(0, 0, c.width, c.height).data),
            }]))""",
        container,
    )
    return {name: np.array(d["rgba"]).reshape(*d["size"], 4) for name, d in drawn.items()}


def assert_drawn(drawn: Mapping[str, np.ndarray], images: Mapping[str, np.ndarray]) -> None:
    """``drawn`` (:func:`drawn_images`) shows every image of ``images``, pixel for pixel:
    uint8 values as they are, float32 ones scaled to 0-255; 3 channels as RGB, any other
    count its first channel as grey; opaque."""
    assert set(drawn) == set(images)
    for name, pixels in images.items():
        rgba = drawn[name]
        assert rgba.shape[:2] == pixels.shape[:2], name
        scaled = np.round(pixels * 255) if pixels.dtype == np.float32 else pixels
        rgb = scaled if pixels.shape[2] == 3 else np.repeat(scaled[:, :, :1], 3, axis=2)
        np.testing.assert_allclose(rgba[:, :, :3], rgb, atol=1, err_msg=name)
        assert (rgba[:, :, 3] == 255).all(), name


GLIMPSE_CAPTIONS = [
    "camera: 8×8×3 uint8 (RGB)",
    "heat: 4×4×1 float32 (grey)",
    "radar: 3×3×2 float32 (first of 2 channels, as grey)",
]


def test_the_replay_viewer_draws_each_image_of_the_step(page, tmp_path) -> None:
    """Glimpse's RGB uint8 camera, one-channel float32 heat map and two-channel radar (its
    first channel drawn as grey), step after step."""
    env = SerialVecEnv(Glimpse, 2, seed=0)
    path = tmp_path / "glimpse.jsonl"
    with path.open("w") as out:
        recording = RecordingEnv(env, out, {"id": "Glimpse", "kwargs": {}})
        evaluate(RandomPolicy(env.action_space, seed=0), recording, episodes=2)
    _, steps = read_episodes(path)
    page.set_input_files("#replay-file", str(path))
    page.wait_for_selector("#replay-where:has-text('Glimpse')")
    assert page.locator("#replay-images figcaption").all_text_contents() == GLIMPSE_CAPTIONS
    for index in (0, 1, len(steps) - 1):
        page.evaluate("(i) => window.entityrl.replay.show(i)", index)
        images = steps[index]["observation"]["images"]
        want = {name: decoded_image(image) for name, image in images.items()}
        assert_drawn(drawn_images(page, "#replay-images"), want)
    page.locator("#replay").screenshot(path=str(artifacts(tmp_path) / "web-replay-images.png"))


def test_the_page_stacks_an_image_policys_features_and_feeds_each_steps_images(
    page, models
) -> None:
    """Glimpse, a policy stacked 3 deep whose observations carry three images (uint8 RGB,
    float32 grey and two-channel): the page stacks each episode's features and feeds each
    step's own images, deciding as the Python runtime does within IMAGE_TOLERANCE; where
    the history says something (the player moved), it is not the decision of a new episode."""
    use(page, "glimpse_stacked.onnx")
    policy, forgetful = load(models / "glimpse_stacked.onnx"), load(models / "glimpse_stacked.onnx")
    env, rng = Glimpse(), np.random.default_rng(0)
    differ = 0
    for seed in range(4):
        env.seed(seed)
        obs, first = env.reset(), True
        while not obs.done:
            want = assert_page_decides_as_python(page, policy, obs, first, IMAGE_TOLERANCE)
            anew = forgetful.decide(obs, new_episode=True).value
            differ += abs(anew - want.value) > 10 * IMAGE_TOLERANCE
            obs, first = (
                env.act({"move": CategoricalAction(["player"], rng.integers(2, size=1))}),
                False,
            )
    # 4 of the 8 later steps: on the others the player pushed against a wall and stood still,
    # which its history, its position repeated, says just as a new episode's does.
    assert differ == 4


def play_glimpse_live(page: Any, bare_end: bool = False) -> None:
    """The page playing glimpse.js (Glimpse in JavaScript) with the stacked Glimpse policy,
    from a reset; with ``bare_end``, a Glimpse whose final observation is only its reward and
    done (as the page's environment API allows)."""
    page.evaluate(
        """async (bareEnd) => {
            const { Glimpse } = await import("/files/glimpse.js");
            class BareEnd extends Glimpse {
                observe(reward) {
                    const obs = super.observe(reward);
                    return obs.done ? { reward, done: true } : obs;
                }
            }
            window.entityrl.registerEnvironment("Glimpse", bareEnd ? BareEnd : Glimpse);
            await window.entityrl.usePolicy("/files/glimpse_stacked.onnx", "glimpse_stacked.onnx");
            window.entityrl.current = "glimpse_stacked.onnx";
        }""",
        bare_end,
    )


def test_the_live_view_draws_each_image_the_policy_is_given(page, tmp_path) -> None:
    """The page plays Glimpse live: after the reset and after each step, a canvas per image
    under the board shows the observation's pixels (those of Python's Glimpse in the state
    the entity table shows), the episode's final observation too, which gets no decision."""
    play_glimpse_live(page)
    env = Glimpse()
    for steps in range(4):
        status = status_after(page, lambda: page.click("#step")) if steps else ""
        assert "error" not in (page.get_attribute("#status", "class") or ""), status
        assert page.locator("#board-images figcaption").all_text_contents() == GLIMPSE_CAPTIONS
        features = page.locator("#board-entities td").nth(2).text_content()  # the player's
        found = re.fullmatch(r"x=(\d)\.000 y=1\.000", features)
        assert found, features
        env.x, env.steps = int(found[1]), steps
        assert_drawn(drawn_images(page, "#board-images"), env.observe().images)
        page.locator("#play").screenshot(path=str(artifacts(tmp_path) / f"web-live-{steps}.png"))
    assert "episode over" in status, status
    assert page.locator("#decision table").count() == 0


def test_the_live_view_ends_an_episode_whose_final_observation_has_no_images(page) -> None:
    """The final observation may leave out every field, its images too: the page decides
    nothing on it (the model would refuse it), says that the episode is over, and captions
    each image as not in this step."""
    play_glimpse_live(page, bare_end=True)
    for _ in range(3):
        status = status_after(page, lambda: page.click("#step"))
    assert status.endswith("(episode over: Reset)"), status
    assert "error" not in (page.get_attribute("#status", "class") or "")
    captions = page.locator("#board-images figcaption").all_text_contents()
    assert captions == [f"{caption}: not in this step" for caption in GLIMPSE_CAPTIONS]
    assert page.locator("#board-images canvas").count() == 0
