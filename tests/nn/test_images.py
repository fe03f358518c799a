"""Images in observations: declared, validated, batched densely, encoded into tokens that join
each row's entities."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from image_envs import LitLamp

from entityrl.env import (
    Batcher,
    Entity,
    EnvValidationError,
    GlobalCategoricalActionMask,
    GlobalCategoricalActionSpace,
    Image,
    Observation,
    ObsSpace,
    ProcessVecEnv,
    SerialVecEnv,
    VecObs,
    validate_observation,
    validate_spaces,
    validate_vec_obs,
)
from entityrl.env.grid_sensor import GridSensor
from entityrl.env.space_data import space_differences, spaces_from_data, spaces_to_data
from entityrl.env.stacking import StackedVecEnv
from entityrl.interop.gymnasium import EntityGymnasiumEnv
from entityrl.nn.images import ImpalaEncoder, SmallEncoder, image_slot_name
from entityrl.nn.layout import build_layout
from entityrl.nn.rogue_net import RogueNet, RogueNetConfig
from entityrl.training import load_agent, train


def lamp_rows(lits: list[int], orders: list[list[int]]) -> list[Observation]:
    env = LitLamp()
    return [env.observe(lit, np.array(xs)) for lit, xs in zip(lits, orders, strict=True)]


def batch(observations: list[Observation]) -> VecObs:
    env = LitLamp()
    return Batcher(env.obs_space(), env.action_space()).batch(observations)


# ---------------------------------------------------------------------------- the env API
def test_image_declarations_are_checked() -> None:
    with pytest.raises(ValueError, match=r"\(height, width, channels\)"):
        Image((8, 8))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="dtype must be one of"):
        Image((8, 8, 3), "int16")
    with pytest.raises(ValueError, match=r"images\['cam'\]: expected an Image"):
        ObsSpace(images={"cam": (8, 8, 3)})  # type: ignore[dict-item]
    with pytest.raises(EnvValidationError, match="expected image names to be non-empty strings"):
        validate_spaces(ObsSpace(images={"": Image((8, 8, 3))}), {})


def test_the_validator_names_what_is_wrong_with_an_image() -> None:
    env = LitLamp()
    space, actions = env.obs_space(), env.action_space()
    good = env.observe(0, np.array([0, 1]))
    validate_observation(good, space, actions)
    cases = [
        ({"camera": good.images["camera"][:4]}, r"images\['camera'\]: expected an array of "
         r"shape \(8, 8, 3\).*got shape \(4, 8, 3\)"),
        ({"camera": good.images["camera"].astype(np.float32)}, "expected dtype uint8, got float32"),
        ({"camera": good.images["camera"].tolist()}, "got list"),
        ({**good.images, "radar": good.images["camera"]}, "unknown image 'radar'"),
        ({}, "expected one image per declared image .*none for 'camera'"),
    ]  # fmt: skip
    for images, message in cases:
        good.images = images
        with pytest.raises(EnvValidationError, match=message):
            validate_observation(good, space, actions)
    # An observation that ends its episode (uncut) needs no images: it is never shown.
    validate_observation(Observation(done=True), space, actions)
    with pytest.raises(EnvValidationError, match="none for 'camera'"):
        validate_observation(Observation(done=True, truncated=True), space, actions)
    grey = ObsSpace(images={"depth": Image((2, 2, 1), "float32")})
    with pytest.raises(EnvValidationError, match=r"at \[1, 0, 0\]: expected a value in \[0, 1\]"):
        depth = np.array([[[0.5], [1.0]], [[np.nan], [0.0]]], np.float32)
        validate_observation(Observation(images={"depth": depth}), grey, {})


def test_batches_stack_images_densely_and_keep_them_through_take_and_concat() -> None:
    envs = SerialVecEnv(LitLamp, num_envs=3, seed=0)
    obs = envs.reset()
    camera = obs.images["camera"]
    assert camera.shape == (3, 8, 8, 3) and camera.dtype == np.uint8
    validate_vec_obs(obs, envs.obs_space, envs.action_space, rows=3)
    # Each row's image lights the half its environment chose.
    for row, env in enumerate(envs.envs):
        lit = slice(env.lit * 4, env.lit * 4 + 4)
        assert (camera[row, :, lit] == 255).all() and camera[row].sum() == 255 * 8 * 4 * 3
    taken = obs.take(np.array([2, 0]))
    np.testing.assert_array_equal(taken.images["camera"], camera[[2, 0]])
    joined = type(obs).concat([obs, taken], envs.choices)
    np.testing.assert_array_equal(joined.images["camera"], np.concatenate([camera, camera[[2, 0]]]))
    workers = ProcessVecEnv(LitLamp, 3, seed=0, num_workers=2)
    try:
        np.testing.assert_array_equal(workers.reset().images["camera"], camera)
    finally:
        workers.close()
    obs.images["camera"] = camera[:, :4]
    with pytest.raises(EnvValidationError, match=r"VecObs.images\['camera'\]: expected an array"):
        validate_vec_obs(obs, envs.obs_space, envs.action_space)


def test_spaces_with_images_survive_plain_data_and_differences_name_them() -> None:
    env = LitLamp()
    space, actions = env.obs_space(), env.action_space()
    data = spaces_to_data(space, actions)
    assert data["images"] == {"camera": {"shape": [8, 8, 3], "dtype": "uint8"}}
    assert spaces_from_data(data)[0] == space
    assert "images" not in spaces_to_data(ObsSpace(), actions)  # old data unchanged
    other = ObsSpace(entities=space.entities, images={"camera": Image((4, 4, 3))})
    assert space_differences((space, actions), (other, actions)) == [
        "image 'camera': the environment has shape (4, 4, 3) of uint8, the agent expects "
        "shape (8, 8, 3) of uint8"
    ]


# ---------------------------------------------------------------------------- the network
@pytest.mark.parametrize(
    ("encoder", "shape", "cells"),
    [(SmallEncoder, (56, 56, 3), (7, 7)), (SmallEncoder, (8, 8, 1), (4, 4)),
     (ImpalaEncoder, (64, 64, 3), (8, 8)), (ImpalaEncoder, (56, 40, 4), (7, 5))],
)  # fmt: skip
def test_encoders_give_the_cells_they_announce(encoder, shape, cells) -> None:
    cnn = encoder(shape)
    out = cnn(torch.zeros(2, shape[2], shape[0], shape[1]))
    assert cnn.out_cells == cells and out.shape == (2, cnn.out_channels, *cells)


def test_image_tokens_follow_each_rows_entities_and_global_token() -> None:
    obs = batch(lamp_rows([0, 1], [[0, 1], [1, 0]]))
    layout = build_layout(obs, ["Lamp", "Picker"], True, grids=False, tokens={"__image__cam": 4})
    # Per row: 2 lamps, 1 picker, the global token, then 4 image cells.
    np.testing.assert_array_equal(layout.lengths, [8, 8])
    np.testing.assert_array_equal(layout.type_positions["Lamp"], [0, 1, 8, 9])
    np.testing.assert_array_equal(layout.type_positions["__global__"], [3, 11])
    np.testing.assert_array_equal(
        layout.type_positions["__image__cam"], [4, 5, 6, 7, 12, 13, 14, 15]
    )


@pytest.mark.parametrize("encoder", ["small", "impala"])
@pytest.mark.parametrize("grids", [False, True], ids=["packed", "grids"])
def test_each_row_sees_its_own_image_and_no_other_rows(encoder: str, grids: bool) -> None:
    torch.manual_seed(0)
    env = LitLamp()
    net = RogueNet(env.obs_space(), env.action_space(), RogueNetConfig(image_encoder=encoder))
    net.grid_layout = grids
    assert net.encoder.images is not None
    assert net.encoder.images.cells == {image_slot_name("camera"): 16 if encoder == "small" else 1}
    rows = lamp_rows([0, 1, 0], [[0, 1], [0, 1], [1, 0]])
    together = net(net.prepare(batch(rows)), {"pick": torch.zeros(3, dtype=torch.int64)})
    for i, row in enumerate(rows):
        alone = net(net.prepare(batch([row])), {"pick": torch.zeros(1, dtype=torch.int64)})
        torch.testing.assert_close(alone.values, together.values[i : i + 1])
        torch.testing.assert_close(
            alone.heads["pick"].logprob, together.heads["pick"].logprob[i : i + 1]
        )
    # Rows 0 and 1 differ only in the image: the policy sees it.
    assert not torch.allclose(together.heads["pick"].logprob[0], together.heads["pick"].logprob[1])


def test_the_network_refuses_a_batch_without_its_images() -> None:
    env = LitLamp()
    net = RogueNet(env.obs_space(), env.action_space())
    obs = batch(lamp_rows([0], [[0, 1]]))
    obs.images = {}
    with pytest.raises(
        ValueError, match=r"image 'camera': the network expects \(8, 8, 3\) per row, got none"
    ):
        net.prepare(obs)
    with pytest.raises(ValueError, match=r"net\.image_encoder must be one of"):
        RogueNetConfig(image_encoder="resnet")  # type: ignore[arg-type]


# Adam steps of 32 rows: 10 already pick right on all 256 unseen rows (with blank images: 48%).
STEPS = 20


def test_a_policy_learns_what_only_image_and_entities_together_tell() -> None:
    """Which lamp to pick depends on the image (the lit side) and on the lamps' features
    (which lamp is where): fitting the right picks takes both, through attention."""
    torch.manual_seed(1)
    rng = np.random.default_rng(1)
    env = LitLamp()
    net = RogueNet(env.obs_space(), env.action_space())
    optimizer = torch.optim.Adam(net.parameters(), lr=3e-3)
    lits = rng.integers(2, size=512)
    orders = [rng.permutation(2) for _ in lits]
    right = np.array(
        [int(np.flatnonzero(xs == lit)[0]) for lit, xs in zip(lits, orders, strict=True)]
    )
    obs = batch(lamp_rows(list(lits), [list(o) for o in orders]))
    train, test = np.arange(256), np.arange(256, 512)
    for step in range(STEPS):
        rows = train[(step * 32) % 256 :][:32]
        out = net(net.prepare(obs.take(rows)), {"pick": torch.from_numpy(right[rows])})
        loss = -out.heads["pick"].logprob.mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    picked = net.act(obs.take(test), deterministic=True).heads["pick"].actions.numpy()
    assert (picked == right[test]).mean() >= 0.95


def test_the_gymnasium_wrapper_refuses_images_by_name() -> None:
    """Offering an entityrl environment with images to Gymnasium says so instead of dropping
    the images (export, recordings and replays carry them: tests/export, tests/recording)."""
    with pytest.raises(ValueError, match=r"LitLamp: observations with images \('camera'\)"):
        EntityGymnasiumEnv(LitLamp(), max_entities=3)


def test_a_grid_sensor_image_reaches_the_policy() -> None:
    """A float32 image (here a grid sensor's) is encoded as is: moving one entity within the
    grid changes the policy's choice scores."""
    entities = ObsSpace(entities={"Food": Entity(["x", "y"])})
    sensor = GridSensor(entities, {"Food": []}, size=(4, 4))
    space = ObsSpace(images={"grid": sensor.image})
    actions = {"move": GlobalCategoricalActionSpace(["left", "right"])}

    def row(x: float) -> Observation:
        food = Observation(features={"Food": np.array([[x, 1.0]])})
        return Observation(
            actions={"move": GlobalCategoricalActionMask()}, images={"grid": sensor(food)}
        )

    rows = [row(0.0), row(3.0)]
    for obs in rows:
        validate_observation(obs, space, actions)
    torch.manual_seed(0)
    net = RogueNet(space, actions)
    obs = Batcher(space, actions).batch(rows)
    assert obs.images["grid"].dtype == np.float32
    scores = net.choice_scores(obs)["move"].scores
    assert not torch.allclose(scores[0], scores[1])


def test_stacking_keeps_the_current_steps_images() -> None:

    inner = SerialVecEnv(LitLamp, 2, seed=0)
    stacked = StackedVecEnv(SerialVecEnv(LitLamp, 2, seed=0), k=2)
    assert stacked.obs_space.images == inner.obs_space.images
    np.testing.assert_array_equal(stacked.reset().images["camera"], inner.reset().images["camera"])


def test_a_run_with_images_trains_and_its_checkpoint_loads_with_its_encoder(tmp_path) -> None:
    train(
        "image_envs:LitLamp",
        overrides=[
            "rollout.num_envs=8",
            "rollout.steps=4",
            "total_timesteps=64",
            "net.d_model=16",
            "net.n_layer=1",
            "net.image_encoder=impala",
            "optim.bs=16",
            f"log.run_dir={tmp_path}",
            "log.tensorboard=false",
            "log.progress=false",
            "torch_threads=1",
        ],
    )
    agent = load_agent(tmp_path)
    assert agent.obs_space.images == {"camera": Image((8, 8, 3))}
    assert isinstance(agent.net.encoder.images.tokenizers["camera"].cnn, ImpalaEncoder)
    envs = SerialVecEnv(LitLamp, 2, seed=0)
    obs = envs.reset()
    envs.act(agent.act(obs))
