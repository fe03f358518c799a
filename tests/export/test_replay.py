"""Recorded episodes for the replay viewer: complete episodes, step by step, whose rewards
add up to the returns the evaluation reports; ``entityrl eval --replay`` writes them."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import numpy as np
import pytest
from nn.image_envs import Glimpse

from entityrl.cli.main import main
from entityrl.env import RandomPolicy, SerialVecEnv
from entityrl.envs import make_vec
from entityrl.export.replay import (
    FORMAT,
    RecordingEnv,
    decoded_image,
    encoded_image,
    read_episodes,
)
from entityrl.training import evaluate, train


def test_recorded_episodes_are_complete_and_add_up_to_the_evaluated_returns(tmp_path) -> None:
    env = make_vec("CherryPick", 3, seed=0, num_cherries=6)
    out = io.StringIO()
    recording = RecordingEnv(env, out, {"id": "CherryPick", "kwargs": {"num_cherries": 6}})
    result = evaluate(RandomPolicy(env.action_space, seed=0), recording, episodes=7)
    path = tmp_path / "episodes.jsonl"
    path.write_text(out.getvalue())
    header, steps = read_episodes(path)
    assert header["format"] == FORMAT and header["env"]["kwargs"] == {"num_cherries": 6}
    assert header["spaces"]["actions"] == {
        "Pick Cherry": {"kind": "SelectEntityActionSpace", "choices": []}
    }
    episodes = {}
    for step in steps:
        episodes.setdefault(step["episode"], []).append(step)
    assert len(episodes) >= 7
    for lines in episodes.values():
        assert [s["step"] for s in lines] == [0, 1, 2]  # three picks of six cherries
        cherries = [len(s["observation"]["features"]["Cherry"]) for s in lines]
        assert cherries == [6, 5, 4]
        assert lines[-1]["return"] == pytest.approx(sum(s["reward"] for s in lines))
        # The pick is a position among the actees, who are the cherries (entities 0..n-1).
        picked = lines[0]["actions"]["Pick Cherry"][0]
        quality = lines[0]["observation"]["features"]["Cherry"][picked][0]
        assert lines[0]["reward"] == pytest.approx(quality, abs=1e-6)
    recorded = sorted(lines[-1]["return"] for lines in episodes.values())
    for value in result.returns:  # every evaluated episode is among the recorded ones
        assert np.isclose(recorded, value, atol=1e-6).any()


def test_eval_records_episodes_from_the_command_line(tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    train(
        "MoveToOrigin",
        overrides=[
            "env.kwargs={max_steps: 4}",
            "rollout.num_envs=4",
            "rollout.steps=8",
            "total_timesteps=64",
            "net.d_model=8",
            "net.n_head=1",
            "net.n_layer=1",
            f"log.run_dir={run}",
            "log.tensorboard=false",
            "log.progress=false",
            "torch_threads=1",
        ],
    )
    record = tmp_path / "out" / "episodes.jsonl"
    assert (
        main(["eval", str(run), "--episodes", "5", "--num-envs", "2", "--replay", str(record)]) == 0
    )
    header, steps = read_episodes(record)
    assert header["env"]["id"] == "MoveToOrigin"
    assert len({s["episode"] for s in steps}) >= 5
    assert all(len(s["observation"]["features"]["Spaceship"]) == 1 for s in steps)
    assert not list(record.parent.glob(".*.tmp"))


def test_continuous_actions_are_recorded_with_every_component(tmp_path) -> None:
    """Each actor's chosen values, all of them (the viewer shows them), not the first only."""
    env = make_vec("ContinuousMoveToOrigin", 2, seed=0)
    out = io.StringIO()
    recording = RecordingEnv(env, out, {"id": "ContinuousMoveToOrigin", "kwargs": {}})
    evaluate(RandomPolicy(env.action_space, seed=0), recording, episodes=2)
    path = tmp_path / "episodes.jsonl"
    path.write_text(out.getvalue())
    _, steps = read_episodes(path)
    chosen = np.array([step["actions"]["thrust"] for step in steps])  # (steps, actors, dims)
    assert chosen.shape == (len(steps), 1, 2)
    assert np.all(np.abs(chosen) <= 0.01) and len(np.unique(chosen[:, 0, 1])) > 1


def test_images_are_recorded_with_each_step_as_base64_of_their_bytes(tmp_path) -> None:
    env = SerialVecEnv(Glimpse, 2, seed=0)
    out = io.StringIO()
    recording = RecordingEnv(env, out, {"id": "nn.image_envs:Glimpse", "kwargs": {}})
    evaluate(RandomPolicy(env.action_space, seed=0), recording, episodes=2)
    path = tmp_path / "episodes.jsonl"
    path.write_text(out.getvalue())
    header, steps = read_episodes(path)
    assert header["spaces"]["images"]["heat"] == {"shape": [4, 4, 1], "dtype": "float32"}
    replayed = Glimpse()
    replayed.seed(0)  # the first environment of the batch, seeded as SerialVecEnv seeds it
    first = [s for s in steps if s["episode"] == 0]
    assert len(first) == 3
    for step in first:
        images = step["observation"]["images"]
        assert images["camera"]["shape"] == [8, 8, 3] and images["camera"]["dtype"] == "uint8"
        assert images["radar"]["dtype"] == "float32"
        x = int(step["observation"]["features"]["Player"][0][0])
        camera, heat = decoded_image(images["camera"]), decoded_image(images["heat"])
        assert camera.dtype == np.uint8 and heat.dtype == np.float32
        np.testing.assert_array_equal(camera[0, 2 * x], [255, 128, 0])
        assert heat[1, x, 0] == 1.0 and heat.sum() == 1.0
        np.testing.assert_allclose(decoded_image(images["radar"]), step["step"] / 3, rtol=1e-6)


def test_image_entries_round_trip_and_bad_ones_are_refused() -> None:
    pixels = np.random.default_rng(0).random((3, 2, 4), dtype=np.float32)
    entry = encoded_image(pixels)
    assert base64.b64decode(entry["data"]) == pixels.astype("<f4").tobytes()
    np.testing.assert_array_equal(decoded_image(entry), pixels)
    big_endian = pixels.astype(">f4")
    assert encoded_image(big_endian) == entry
    with pytest.raises(ValueError, match=r"expected 24 values of float32 for shape \[3, 2, 4\]"):
        decoded_image({**entry, "data": entry["data"][:8]})
    with pytest.raises(ValueError, match=r"expected one of .*'uint8'.*got 'int16'"):
        decoded_image({**entry, "dtype": "int16"})
