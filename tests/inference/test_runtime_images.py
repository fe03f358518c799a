"""The light runtime on policies whose observations carry images: it feeds them (one observation
directly, many through the batched model), acts as the torch agent does, refuses images of the
wrong shape or dtype naming them, and does all this without torch."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from export.torch_reference import IMAGE_TOLERANCE, sharpened, untrained_agent
from inference.test_runtime import WITHOUT_TORCH, plain, run_without_torch, tiny_run
from inference.test_runtime_kinds import stacked_agent, torch_steps
from nn.image_envs import ACTIONS, SPACE, Glimpse, LitLamp, with_images

from entityrl.cli.main import main
from entityrl.env import Batcher, EnvValidationError, Observation
from entityrl.export import export_bytes, export_onnx
from entityrl.inference import Decision, OnnxPolicy, load
from entityrl.training import load_agent

pytest.importorskip("onnxruntime", reason="the runtime needs onnxruntime (the 'inference' extra)")


def lamp_observations(count: int) -> list[Observation]:
    env = LitLamp()
    found = []
    for seed in range(count):
        env.seed(seed)
        found.append(env.reset())
    return found


@pytest.mark.parametrize("encoder", ["small", "impala"])
def test_actions_equal_the_torch_agents_one_and_many_at_a_time(
    encoder: str, tmp_path: Path
) -> None:
    env = LitLamp()
    agent = sharpened(untrained_agent(env.obs_space(), env.action_space(), image_encoder=encoder))
    agent.deterministic = True
    model = export_onnx(agent, tmp_path / "lamp.onnx")
    policy = load(model, deterministic=True)
    observations = lamp_observations(8)
    batcher = Batcher(agent.obs_space, agent.action_space)
    want = plain(batcher.unbatch(agent.act(batcher.batch(observations)), observations))
    # Both lamps are picked somewhere: the choice follows each observation, not a constant.
    assert len({actions["pick"]["picker"] for actions in want}) == 2
    assert plain(policy.act_batch(observations)) == want
    assert plain([policy.act(obs) for obs in observations]) == want
    # The general path (the batcher, a row of the one-observation model) agrees.
    policy.single = None
    assert plain([policy.act(obs) for obs in observations]) == want


def blacked_out(observations: list[Observation]) -> list[Observation]:
    """``observations`` with every image black (zeros): what a policy sees that does not read
    the step's own images."""
    return [
        dataclasses.replace(obs, images={n: np.zeros_like(i) for n, i in obs.images.items()})
        for obs in observations
    ]


def apart(decisions: list[Decision], values: np.ndarray) -> bool:
    """Whether some decision's value is another than ``values``' by far more than rounding."""
    return bool(np.any(np.abs([d.value for d in decisions] - values) > 10 * IMAGE_TOLERANCE))


def test_a_stacked_image_policy_fed_raw_observations_decides_as_the_stacked_agent() -> None:
    """Glimpse stacked 3 deep, two environments over three episodes each: the trainer's
    StackedVecEnv stacks the player's features and passes each step's own three images (uint8
    RGB, float32 grey and two-channel). The runtime, given the raw observations, stacks them
    itself: its values are the torch agent's within IMAGE_TOLERANCE and its most probable
    actions are the agent's. Controls: with the images blacked out, or without the history
    (each step a new episode), the values differ."""
    agent = stacked_agent(Glimpse())
    model = export_bytes(agent)
    policy, acting = OnnxPolicy(model), OnnxPolicy(model, deterministic=True)
    blind, forgetful = OnnxPolicy(model), OnnxPolicy(model)
    batcher = Batcher(Glimpse().obs_space(), agent.action_space)
    without_images = without_history = 0
    for stacked, observations, fresh, out in torch_steps(Glimpse, agent, 2, 12):
        want = out.values.numpy()
        got = [d.value for d in policy.decide_batch(observations, new_episode=fresh)]
        np.testing.assert_allclose(got, want, atol=IMAGE_TOLERANCE, rtol=0)
        actions = plain(batcher.unbatch(out.actions(stacked), observations))
        assert plain(acting.act_batch(observations, new_episode=fresh)) == actions
        unseen = blind.decide_batch(blacked_out(observations), new_episode=fresh)
        without_images += apart(unseen, want)
        without_history += apart(forgetful.decide_batch(observations, new_episode=True), want)
    assert without_images == 12
    assert without_history == 8  # every step but the episodes' first


@pytest.fixture(scope="module")
def image_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    agent = untrained_agent(SPACE, ACTIONS)
    return export_onnx(agent, tmp_path_factory.mktemp("images") / "images.onnx")


def an_observation() -> Observation:
    obs = Observation(
        features={"Unit": np.zeros((2, 3), np.float32), "Wall": np.zeros((1, 2), np.float32)},
        global_features=[0.5],
    )
    return with_images(obs, SPACE, 0)


@pytest.mark.parametrize("check", [True, False])
@pytest.mark.parametrize(
    ("image", "pixels", "said"),
    [
        ("camera", np.zeros((9, 12, 3), np.uint8), r"\(12, 9, 3\).*\(9, 12, 3\)"),
        ("heat", np.zeros((5, 6, 2), np.float64), "float32.*float64"),
        ("camera", None, "none"),
    ],
)
def test_images_of_the_wrong_shape_or_dtype_are_refused_naming_them(
    image_model: Path, check: bool, image: str, pixels, said: str
) -> None:
    policy = load(image_model, check=check)
    obs = an_observation()
    if pixels is None:
        del obs.images[image]
    else:
        obs.images[image] = pixels
    error = EnvValidationError if check else ValueError
    for act in (policy.act, lambda o: policy.act_batch([o, an_observation()])):
        with pytest.raises(error, match=f"(?s){image}.*{said}"):
            act(obs)


BLOCKED_IMAGES = (
    WITHOUT_TORCH
    + """import numpy as np
from entityrl.env import Observation
from entityrl.inference import load

rng = np.random.default_rng(0)
obs = Observation(
    features={"Unit": rng.random((2, 3)), "Wall": rng.random((1, 2))},
    global_features=[0.5],
    images={
        "camera": rng.integers(0, 256, (12, 9, 3)).astype(np.uint8),
        "heat": rng.random((5, 6, 2), dtype=np.float32),
    },
)
policy = load(sys.argv[1], seed=0)
one, many = policy.decide(obs), policy.decide_batch([obs, obs])
assert abs(one.value - many[1].value) < 1e-5, (one.value, many[1].value)
assert not [m for m in sys.modules if m.startswith(("torch", "entityrl.training", "entityrl.nn"))]
print("ok")
"""
)


def test_image_policies_run_without_torch(image_model: Path) -> None:
    run_without_torch(BLOCKED_IMAGES, image_model)


def test_an_image_run_exports_from_the_command_line_and_acts_as_trained(tmp_path: Path) -> None:
    run_dir = tiny_run(
        "nn.image_envs:LitLamp",
        tmp_path,
        "rollout.num_envs=8",
        "total_timesteps=64",
        "net.image_encoder=impala",
    )
    assert main(["export", str(run_dir)]) == 0
    agent = load_agent(run_dir, deterministic=True)
    policy = load(run_dir / "agent.onnx", deterministic=True)
    assert policy.obs_space.images == agent.obs_space.images
    observations = lamp_observations(8)
    batcher = Batcher(agent.obs_space, agent.action_space)
    want = plain(batcher.unbatch(agent.act(batcher.batch(observations)), observations))
    assert plain(policy.act_batch(observations)) == want
    assert plain([policy.act(obs) for obs in observations]) == want
