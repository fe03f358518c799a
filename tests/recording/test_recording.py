"""Recordings: what goes in comes out, episodes survive a crash, bad files are named."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from entityrl.env import CategoricalActionSpace, Entity, ObsSpace, RandomPolicy, VecObs
from entityrl.envs import make_vec
from entityrl.recording import (
    EpisodeRecorder,
    EpisodeWriter,
    Header,
    Recording,
    RecordingError,
    RecordingVecEnv,
    TruncatedRecordingWarning,
    read_recordings,
    record,
)

# Categorical + select-entity actions with masks; a global action; entities without features;
# continuous actions.
ENVS = [
    ("MineSweeper", {"orbital_cannon": True, "cooldown_period": 1}),
    ("TreasureHunt", {"max_steps": 30}),
    ("CherryPick", {"num_cherries": 6}),
    ("ContinuousMoveToOrigin", {"max_steps": 10}),  # continuous values, no mask
]


def _play(name: str, kwargs: dict, path: Path, steps: int, num_envs: int = 3):
    """Step a random policy through a recording env; returns every (obs, actions, after)."""
    env = make_vec(name, num_envs, seed=0, **kwargs)
    policy = RandomPolicy(env.action_space, seed=0)
    steps_seen: list[tuple[VecObs, dict, VecObs]] = []
    with RecordingVecEnv(env, path, env_id=name, env_kwargs=kwargs) as recording:
        obs = recording.reset()
        for _ in range(steps):
            actions = policy.act(obs)
            after = recording.act(actions)
            steps_seen.append((obs, actions, after))
            obs = after
    return steps_seen


def _expected_episodes(steps_seen, num_envs: int):
    """Per complete episode, its rows as (env, step) pairs, in the order they ended."""
    start = [0] * num_envs
    episodes = []
    for t, (_, _, after) in enumerate(steps_seen):
        for env in np.flatnonzero(after.done):
            episodes.append([(int(env), s) for s in range(start[env], t + 1)])
            start[env] = t + 1
    return episodes


@pytest.mark.parametrize(("name", "kwargs"), ENVS)
def test_episodes_read_back_as_recorded(tmp_path: Path, name: str, kwargs: dict) -> None:
    path = tmp_path / "demo.arrow"
    steps_seen = _play(name, kwargs, path, steps=40)
    expected = _expected_episodes(steps_seen, 3)
    recording = Recording(path)
    assert recording.header.env_id == name
    assert recording.header.env_kwargs == kwargs
    episodes = list(recording.episodes())
    assert len(episodes) == len(expected) > 2
    for episode, rows in zip(episodes, expected, strict=True):
        assert episode.length == len(rows)
        assert episode.obs.done.tolist() == [False] * (len(rows) - 1) + [True]
        for i, (env, step) in enumerate(rows):
            obs, actions, after = steps_seen[step]
            one = obs.take(np.array([env]))
            for entity_type, features in one.features.items():
                np.testing.assert_array_equal(episode.obs.features[entity_type][i], features[0])
            np.testing.assert_array_equal(episode.obs.global_features[i], one.global_features[0])
            assert episode.obs.reward[i] == after.reward[env]
            for action, taken in actions.items():
                np.testing.assert_array_equal(episode.actions[action][i], taken[env])
                mask, recorded = one.action_masks[action], episode.obs.action_masks[action]
                np.testing.assert_array_equal(recorded.actors[i], mask.actors[0])
                if mask.mask is not None:
                    assert recorded.mask is not None
                    np.testing.assert_array_equal(recorded.mask[i], mask.mask[0])


def test_ids_are_recorded_as_strings(tmp_path: Path) -> None:
    path = tmp_path / "demo.arrow"
    _play("CherryPick", {"num_cherries": 4}, path, steps=4)
    episode = next(Recording(path).episodes())
    assert episode.ids("Player")[0] == ["('Player', 0)"]
    assert len(episode.ids("Cherry")[0]) == 4


def test_a_crash_keeps_every_complete_episode(tmp_path: Path) -> None:
    path = tmp_path / "demo.arrow"
    script = f"""
import os
from entityrl.env import RandomPolicy
from entityrl.envs import make_vec
from entityrl.recording import RecordingVecEnv
env = RecordingVecEnv(make_vec("CherryPick", 2, seed=0, num_cherries=4), {str(path)!r})
policy = RandomPolicy(env.action_space, seed=0)
obs = env.reset()
for _ in range(5):  # two episodes per environment end, a third is in progress
    obs = env.act(policy.act(obs))
os._exit(1)  # no close(), no flush beyond what the writer did itself
"""
    subprocess.run([sys.executable, "-c", script], check=False)
    assert len(list(Recording(path).episodes())) == 4


def test_a_truncated_tail_warns_and_keeps_the_episodes_before_it(tmp_path: Path) -> None:
    path = tmp_path / "demo.arrow"
    _play("CherryPick", {"num_cherries": 4}, path, steps=6, num_envs=2)
    assert len(list(Recording(path).episodes())) == 6
    path.write_bytes(path.read_bytes()[:-100])  # cut inside the last episode
    with pytest.warns(TruncatedRecordingWarning, match=r"ends inside episode 6 .* 5 complete"):
        assert len(list(Recording(path).episodes())) == 5


def test_appending_continues_after_the_last_complete_episode(tmp_path: Path) -> None:
    path = tmp_path / "demo.arrow"
    _play("CherryPick", {"num_cherries": 4}, path, steps=6, num_envs=2)
    path.write_bytes(path.read_bytes()[:-100])
    env = make_vec("CherryPick", 1, seed=1, num_cherries=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncatedRecordingWarning)
        total = record(RandomPolicy(env.action_space, seed=1), env, path, 3, append=True)
    assert total == 8
    recording = Recording(path)
    assert len(list(recording.episodes())) == 8
    assert recording.header.env_id == "CherryPick"  # the file keeps its own header


def test_corrupt_data_names_the_file_and_the_last_good_episode(tmp_path: Path) -> None:
    path = tmp_path / "demo.arrow"
    _play("CherryPick", {"num_cherries": 4}, path, steps=6, num_envs=2)
    data = bytearray(path.read_bytes())
    third = _episode_offsets(path)[2]
    data[third + 12 : third + 40] = b"\x00" * 28  # inside the third episode's message
    path.write_bytes(bytes(data))
    with pytest.raises(
        RecordingError, match=r"demo.arrow is corrupt after episode 2 \(the last good"
    ):
        list(Recording(path).episodes())


def _episode_offsets(path: Path) -> list[int]:
    """Where each episode's message starts."""
    with pa.memory_map(str(path)) as source:
        reader = pa.ipc.open_stream(source)
        starts = [source.tell()]
        for _ in reader:
            starts.append(source.tell())
    return starts[:-1]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "is empty"),
        (b"hello, this is not arrow at all", "not a readable recording"),
    ],
)
def test_unreadable_files_are_named(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.arrow"
    path.write_bytes(content)
    with pytest.raises(RecordingError, match=message):
        Recording(path)
    with pytest.raises(RecordingError, match="no recording at"):
        Recording(tmp_path / "missing.arrow")


def test_other_arrow_streams_are_not_recordings(tmp_path: Path) -> None:
    path = tmp_path / "table.arrow"
    schema = pa.schema([("x", pa.int64())])
    with pa.ipc.new_stream(str(path), schema) as writer:
        writer.write_batch(pa.record_batch([pa.array([1])], schema=schema))
    with pytest.raises(RecordingError, match="not an entityrl recording"):
        Recording(path)


def test_space_mismatch_names_the_entity_type_feature_and_action(tmp_path: Path) -> None:
    path = tmp_path / "demo.arrow"
    _play("MineSweeper", {}, path, steps=3)
    recording = Recording(path)
    entities = dict(recording.obs_space.entities)
    entities["Robot"] = Entity(["x", "y", "battery"])
    del entities["Orbital Cannon"]
    actions = dict(recording.action_space)
    actions["Move"] = CategoricalActionSpace(["up", "down"])
    with pytest.raises(RecordingError) as caught:
        recording.check_spaces(ObsSpace(entities), actions)
    message = str(caught.value)
    assert "entity type 'Orbital Cannon' is missing from the environment" in message
    assert (
        "entity type 'Robot': the environment has features ['x', 'y', 'battery'], "
        "the recording expects features ['x', 'y']" in message
    )
    assert "action 'Move': the environment has a CategoricalActionSpace with choices" in message
    treasure = make_vec("TreasureHunt", 1)
    with pytest.raises(RecordingError, match="action 'move' is unknown to the recording"):
        read_recordings([path], treasure.obs_space, treasure.action_space)


def test_writer_is_usable_without_a_vec_env(tmp_path: Path) -> None:
    """A scripted loop can hand steps to an EpisodeRecorder directly."""
    env = make_vec("CherryPick", 2, seed=0, num_cherries=4)
    header = Header(env.obs_space, env.action_space, "CherryPick")
    policy = RandomPolicy(env.action_space, seed=0)
    with EpisodeWriter(tmp_path / "demo.arrow", header, compression="lz4") as writer:
        recorder = EpisodeRecorder(writer, env.num_envs)
        obs = env.reset()
        for _ in range(4):
            actions = policy.act(obs)
            after = env.act(actions)
            recorder.record(obs, actions, after)
            obs = after
    episodes = list(Recording(tmp_path / "demo.arrow").episodes())
    assert [e.length for e in episodes] == [2, 2, 2, 2]
    assert episodes[0].ids("Cherry") is None


def test_reading_does_not_import_torch(tmp_path: Path) -> None:
    path = tmp_path / "demo.arrow"
    _play("CherryPick", {"num_cherries": 4}, path, steps=4)
    script = (
        "import sys\nfrom entityrl.recording import Recording\n"
        f"n = len(list(Recording({str(path)!r}).episodes()))\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\nprint(n)"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "6"  # 3 environments, 2 episodes each


def test_hidden_entities_stay_hidden(tmp_path: Path) -> None:
    """RockPaperScissors hides the opponent's move from the policy."""
    path = tmp_path / "demo.arrow"
    steps_seen = _play("RockPaperScissors", {}, path, steps=4, num_envs=2)
    hidden = [obs.visible for obs, _, _ in steps_seen]
    assert any(hidden)
    episode = next(Recording(path).episodes())
    for name, flags in steps_seen[0][0].visible.items():
        np.testing.assert_array_equal(episode.obs.visible[name][0], flags[0])
