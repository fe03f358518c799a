"""Recordings of environments whose observations carry images: each step's images, in their
dtype, come back as recorded, and behaviour cloning learns from them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
from nn.image_envs import Glimpse, LitLamp

from entityrl.env import Observation, RandomPolicy, SelectEntityAction, SerialVecEnv
from entityrl.recording import FunctionExpert, Recording, RecordingVecEnv, record
from entityrl.recording.format import Header, make_schema
from entityrl.training import evaluate, load_agent, make_eval_env, train


def test_images_are_fixed_size_columns_of_their_dtype() -> None:
    env = Glimpse()
    schema = make_schema(Header(env.obs_space(), env.action_space()))
    assert schema.field("image/camera").type == pa.list_(pa.uint8(), 8 * 8 * 3)
    assert schema.field("image/heat").type == pa.list_(pa.float32(), 4 * 4 * 1)
    assert schema.field("image/radar").type == pa.list_(pa.float32(), 3 * 3 * 2)


def test_images_read_back_as_recorded(tmp_path: Path) -> None:
    path = tmp_path / "demo.arrow"
    env = SerialVecEnv(Glimpse, 3, seed=0)
    policy = RandomPolicy(env.action_space, seed=0)
    seen = []
    with RecordingVecEnv(env, path, env_id="nn.image_envs:Glimpse") as recording:
        obs = recording.reset()
        for _ in range(7):  # two episodes of 3 steps per environment, the third cut off
            seen.append(obs)
            obs = recording.act(policy.act(obs))
    episodes = list(Recording(path).episodes())
    assert len(episodes) == 6
    # Episodes end together (3 steps each), in environment order.
    for number, episode in enumerate(episodes):
        first, row = 3 * (number // 3), number % 3
        assert episode.length == 3
        for name, image in Glimpse().obs_space().images.items():
            got = episode.obs.images[name]
            assert got.dtype == np.dtype(image.dtype) and got.shape == (3, *image.shape)
            want = np.stack([seen[first + s].images[name][row] for s in range(3)])
            np.testing.assert_array_equal(got, want)


def pick_the_lit_lamp(obs: Observation) -> dict[str, SelectEntityAction]:
    """LitLamp's expert: the lamp on the side the camera shows lit."""
    lit = int(obs.images["camera"][0, -1, 0] > 0)  # the right half is lit
    lamp = int(np.flatnonzero(np.asarray(obs.features["Lamp"])[:, 0] == lit)[0])
    return {"pick": SelectEntityAction(["picker"], [obs.ids["Lamp"][lamp]])}


def test_bc_learns_from_recorded_images(tmp_path: Path) -> None:
    """Neither the lamps nor the image alone say which lamp to pick: the clone of the expert
    (return 1.0; a random policy's 0.5) must read both."""
    demos = tmp_path / "demo.arrow"
    env = SerialVecEnv(LitLamp, 8, seed=0)
    record(FunctionExpert(pick_the_lit_lamp, env), env, demos, 256, env_id="nn.image_envs:LitLamp")
    assert Recording(demos).obs_space.images == LitLamp().obs_space().images
    run_dir = tmp_path / "bc"
    train(
        "nn.image_envs:LitLamp",
        overrides=["log.tensorboard=false", "log.progress=false", "torch_threads=1",
                   "net.d_model=16", "net.n_head=1", "net.n_layer=1", "algo=bc",
                   f"bc.demos=[{demos}]", "bc.epochs=20", "bc.eval_episodes=0", "optim.bs=64",
                   "optim.lr=0.003", f"log.run_dir={run_dir}"],
    )  # fmt: skip
    agent = load_agent(run_dir, seed=0, deterministic=True)
    with make_eval_env(agent, num_envs=8, seed=1) as eval_env:
        assert evaluate(agent, eval_env, episodes=64).mean() >= 0.9
