"""The light runtime: exported agents act on Observations as the trained agent does, from a
process without torch; ``entityrl export`` and the runtime's errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from entityrl.cli.main import main
from entityrl.env import EnvValidationError, Observation
from entityrl.envs import MineSweeper
from entityrl.inference import OnnxPolicy, PolicyFileError, load, signature
from entityrl.training import load_agent, train

pytest.importorskip("onnxruntime", reason="the runtime needs onnxruntime (the 'inference' extra)")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A second of PPO on small MineSweeper boards (categorical and select-entity actions)."""
    directory = tmp_path_factory.mktemp("run")
    overrides = {
        "env.kwargs": "{width: 4, height: 4, nmines: 3, orbital_cannon: true, cooldown_period: 1}",
        "rollout.num_envs": 8,
        "rollout.steps": 8,
        "total_timesteps": 512,
        "net.d_model": 16,
        "net.n_layer": 1,
        "net.precision": "float32",
        "ppo.update_epochs": 1,
        "log.run_dir": directory,
        "log.tensorboard": "false",
        "log.progress": "false",
        "torch_threads": 1,
    }
    train("MineSweeper", overrides=[f"{key}={value}" for key, value in overrides.items()])
    return directory


@pytest.fixture(scope="module")
def model(run_dir: Path) -> Path:
    assert main(["export", str(run_dir)]) == 0
    return run_dir / "agent.onnx"


def episode_observations(steps: int = 12) -> list[Observation]:
    """Observations of a few MineSweeper episodes under random moves."""
    env = MineSweeper(width=4, height=4, nmines=3, orbital_cannon=True, cooldown_period=1)
    env.seed(3)
    rng = np.random.default_rng(3)
    found = [env.reset()]
    for _ in range(steps):
        obs = found[-1]
        if obs.done:
            found.append(env.reset())
            continue
        robots = obs.entity_ids("Robot")
        moves = {"Move": _categorical(robots, rng.integers(0, 5, len(robots)))}
        found.append(env.act(moves))
    return found


def plain(per_obs: list[dict]) -> list[dict]:
    """Actions as comparable dicts: ``{actor id: choice or selected id}`` per action."""
    return [{name: action.as_dict() for name, action in actions.items()} for actions in per_obs]


def _categorical(actors, indices):
    from entityrl.env import CategoricalAction

    return CategoricalAction(list(actors), np.asarray(indices, dtype=np.int64))


def test_export_writes_a_model_with_its_spaces_and_version(model: Path, run_dir: Path) -> None:
    props = {p.key: p.value for p in onnx.load(model).metadata_props}
    assert props[signature.FORMAT_KEY] == signature.FORMAT
    assert props[signature.VERSION_KEY]
    spaces = json.loads(props[signature.SPACES_KEY])
    assert spaces["entities"]["Robot"] == ["x", "y"]
    assert spaces["actions"]["Move"]["choices"] == ["+x", "-x", "+y", "-y", "Defuse Mines"]
    assert json.loads(props[signature.ENV_KEY])["id"] == "MineSweeper"
    policy = load(model)
    assert policy.env["kwargs"]["width"] == 4
    assert list(policy.action_space) == ["Move", "Fire Orbital Cannon"]


def test_deterministic_actions_equal_the_trained_agents(model: Path, run_dir: Path) -> None:
    agent = load_agent(run_dir, deterministic=True)
    policy = load(model, deterministic=True)
    from entityrl.env import Batcher

    batcher = Batcher(agent.obs_space, agent.action_space)
    observations = episode_observations()
    want = batcher.unbatch(agent.act(batcher.batch(observations)), observations)
    assert any(plain(want)), "the observations offer no action at all"
    assert plain(policy.act_batch(observations)) == plain(want)
    assert plain([policy.act(obs) for obs in observations]) == plain(want)
    # Actions name entities by id, and the environment takes them.
    env = MineSweeper(width=4, height=4, nmines=3, orbital_cannon=True, cooldown_period=1)
    env.seed(0)
    obs = env.reset()
    for _ in range(5):
        obs = env.act(policy.act(obs))


def test_a_run_directory_loads_directly_through_torch(model: Path, run_dir: Path) -> None:
    observations = episode_observations(4)
    direct, exported = load(run_dir), load(model)
    for obs in observations:
        a, b = direct.decide(obs), exported.decide(obs)
        assert a.value == pytest.approx(b.value, abs=1e-6)
        for name in a.probs:
            np.testing.assert_allclose(a.probs[name], b.probs[name], atol=1e-6)


def test_seeded_sampling_repeats_and_follows_the_probabilities(model: Path) -> None:
    obs = episode_observations(0)[0]
    first = plain([load(model, seed=7).act(obs) for _ in range(2)])
    assert first[0] == first[1]
    policy = load(model, seed=1)
    probs = policy.decide(obs).probs["Move"][0]
    draws = 4000
    counts = np.zeros(probs.shape[0])
    for _ in range(draws):
        counts[policy.act(obs)["Move"].indices[0]] += 1
    # Every frequency within 5 standard errors of its probability; illegal moves never drawn.
    tolerance = 5 * np.sqrt(probs * (1 - probs) / draws) + 1e-9
    assert np.all(np.abs(counts / draws - probs) <= tolerance)
    assert np.all(counts[probs == 0] == 0)


def test_bad_observations_are_rejected_naming_the_field(model: Path) -> None:
    obs = episode_observations(0)[0]
    obs.features = {**obs.features, "Robot": [(1.0, 2.0, 3.0)]}
    with pytest.raises(EnvValidationError, match="Robot"):
        load(model).act(obs)
    with pytest.raises(ValueError, match="threads must be >= 1, got 0"):
        load(model, threads=0)


def test_files_that_are_not_entityrl_policies_are_refused(tmp_path: Path, model: Path) -> None:
    with pytest.raises(PolicyFileError, match="no such file"):
        load(tmp_path / "missing.onnx")
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"not a model")
    with pytest.raises(PolicyFileError, match="not an ONNX model"):
        load(garbage)
    stripped = onnx.load(model)
    del stripped.metadata_props[:]
    plain = tmp_path / "plain.onnx"
    onnx.save(stripped, plain)
    with pytest.raises(PolicyFileError, match=r"entityrl\.format"):
        OnnxPolicy(plain)


def test_export_reports_bad_arguments_in_one_line(tmp_path: Path, run_dir: Path, capsys) -> None:
    assert main(["export", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("entityrl export: error: no checkpoint") and err.count("\n") == 1
    assert main(["export", str(run_dir), "--out", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err


BLOCKED_IMPORT = """
import sys

class Blocked:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "omegaconf"):
            raise ImportError(f"{name} is blocked in this test")
        return None

sys.meta_path.insert(0, Blocked())
from entityrl.env import CategoricalActionMask, Observation
from entityrl.inference import load

obs = Observation(
    features={"Mine": [[0, 0]], "Robot": [[1, 1], [3, 2]]},
    ids={"Robot": ["left", "right"]},
    actions={"Move": CategoricalActionMask(actor_types=["Robot"])},
)
actions = load(sys.argv[1], seed=0).act(obs)
assert actions["Move"].actors == ["left", "right"], actions
assert not [m for m in sys.modules if m.startswith(("torch", "entityrl.training", "entityrl.nn"))]
print("ok")
"""


def test_the_runtime_imports_and_acts_without_torch(model: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", BLOCKED_IMPORT, str(model)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
