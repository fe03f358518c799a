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
from export.torch_reference import recall_episodes

from entityrl.cli.main import main
from entityrl.env import Batcher, EnvValidationError, Observation
from entityrl.envs import MineSweeper
from entityrl.inference import OnnxPolicy, PolicyFileError, load, signature
from entityrl.training import load_agent, train

pytest.importorskip("onnxruntime", reason="the runtime needs onnxruntime (the 'inference' extra)")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A second of PPO on small MineSweeper boards (categorical and select-entity actions)."""
    return tiny_run(
        "MineSweeper",
        tmp_path_factory.mktemp("run"),
        "env.kwargs={width: 4, height: 4, nmines: 3, orbital_cannon: true, cooldown_period: 1}",
        "rollout.num_envs=8",
        "total_timesteps=512",
    )


def tiny_run(env_id: str, directory: Path, *overrides: str) -> Path:
    """A run of a small float32 network (one layer, one epoch a rollout of 8 steps) in
    ``directory``, with ``overrides``."""
    settings = ["rollout.steps=8", "net.d_model=16", "net.n_layer=1", "net.precision=float32",
                "ppo.update_epochs=1", f"log.run_dir={directory}", "log.tensorboard=false",
                "log.progress=false", "torch_threads=1"]  # fmt: skip
    train(env_id, overrides=[*settings, *overrides])
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


# The start of the scripts below: a process in which importing torch or omegaconf fails.
WITHOUT_TORCH = """
import sys

class Blocked:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "omegaconf"):
            raise ImportError(f"{name} is blocked in this test")
        return None

sys.meta_path.insert(0, Blocked())
"""

BLOCKED_IMPORT = (
    WITHOUT_TORCH
    + """from entityrl.env import CategoricalActionMask, Observation
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
)


def run_without_torch(script: str, model: Path) -> None:
    """Run ``script`` (which prints "ok" when done) on ``model`` in a process where importing
    torch or omegaconf fails."""
    done = subprocess.run(
        [sys.executable, "-c", script, str(model)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_the_runtime_imports_and_acts_without_torch(model: Path) -> None:
    run_without_torch(BLOCKED_IMPORT, model)


# ---------------------------------------------------------------------------- memory
RECALL_DELAY = 3


@pytest.fixture(scope="module")
def memory_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A second of PPO on Recall with net.memory (a GRU state per environment)."""
    return tiny_run(
        "Recall",
        tmp_path_factory.mktemp("memory_run"),
        f"env.kwargs={{delay: {RECALL_DELAY}}}",
        "net.memory=true",
        "rollout.num_envs=4",
        "total_timesteps=64",
    )


@pytest.fixture(scope="module")
def memory_model(memory_run: Path) -> Path:
    assert main(["export", str(memory_run), "--out", str(memory_run / "memory.onnx")]) == 0
    return memory_run / "memory.onnx"


def test_export_of_a_memory_run_declares_its_state(memory_model: Path) -> None:
    props = {p.key: p.value for p in onnx.load(memory_model).metadata_props}
    assert json.loads(props[signature.STATE_KEY]) == {"size": 16, "initial": "zeros"}
    policy = load(memory_model)
    assert policy.state_size == 16 and policy.state is None


def test_the_runtime_carries_and_resets_the_state_as_the_trained_agent(
    memory_run: Path, memory_model: Path
) -> None:
    """Episode after episode, the same actions and the same state after every step as the
    torch agent, which carries its state and forgets it on reset(); the runtime is told of
    new episodes by new_episode on odd episodes and by reset() on even ones."""
    agent = load_agent(memory_run, deterministic=True)
    policy = load(memory_model, deterministic=True)
    batcher = Batcher(agent.obs_space, agent.action_space)
    for e, episode in enumerate(recall_episodes(range(6), RECALL_DELAY)):
        agent.reset()
        if e % 2 == 0:
            policy.reset()
        for t, obs in enumerate(episode):
            want = batcher.unbatch(agent.act(batcher.batch([obs])), [obs])
            got = policy.act(obs, new_episode=e % 2 == 1 and t == 0)
            assert plain([got]) == plain(want)
            assert policy.state is not None and agent.state is not None
            np.testing.assert_allclose(policy.state, agent.state.numpy(), atol=1e-5)


def test_decide_and_act_are_steps_of_the_episode(memory_model: Path) -> None:
    """Each call is the episode's next step: another policy deciding the same observations
    decides and keeps the same states; new_episode starts over from the first step's state,
    and a call without it goes on from the last state instead."""
    episode = recall_episodes(range(1), RECALL_DELAY)[0]
    policy = load(memory_model)
    first = policy.decide(episode[0])
    state = policy.state
    second = policy.decide(episode[1])
    fresh = load(memory_model)
    assert fresh.decide(episode[0]).value == first.value
    np.testing.assert_array_equal(fresh.state, state)
    assert fresh.decide(episode[1]).value == second.value
    restarted = policy.decide(episode[0], new_episode=True)
    assert restarted.value == first.value
    np.testing.assert_array_equal(policy.state, state)
    # A state not reset is another state: the checks above can tell.
    assert policy.decide(episode[0]).value != first.value


def test_act_batch_carries_one_state_per_observation(memory_model: Path) -> None:
    """Two rows of episodes, batched, the second row's episode ending first: row by row the
    same actions and states as two policies each playing one row, with new_episode flagging
    the row whose episode starts."""
    a, b, c, d = recall_episodes(range(4), RECALL_DELAY)
    calls = [
        ([a[0], b[0]], [True, True]),
        ([a[1], b[1]], False),
        ([a[2], b[2]], [False, False]),
        ([a[3], c[0]], [False, True]),
        ([d[0], c[1]], [True, False]),
    ]
    batched = load(memory_model, deterministic=True)
    alone = [load(memory_model, deterministic=True) for _ in range(2)]
    for observations, new_episode in calls:
        flags = np.broadcast_to(new_episode, (2,))
        got = batched.act_batch(observations, new_episode=new_episode)
        want = [
            policy.act(obs, new_episode=bool(flag))
            for policy, obs, flag in zip(alone, observations, flags, strict=True)
        ]
        assert plain(got) == plain(want)
        # The batched model and the one-observation model round differently.
        want_state = np.concatenate([p.state for p in alone])
        np.testing.assert_allclose(batched.state, want_state, atol=1e-5)


def test_episodes_that_do_not_continue_are_refused_naming_the_counts(memory_model: Path) -> None:
    """A call of another number of observations continues no episode of the last call: it
    must say they are new; a refused call keeps the states."""
    a, b = recall_episodes(range(2), RECALL_DELAY)
    policy = load(memory_model)
    policy.act_batch([a[0], b[0]])
    state = policy.state
    with pytest.raises(
        ValueError, match=r"1 observation\(s\) given, but the policy carries the states of 2"
    ):
        policy.act(a[1])
    with pytest.raises(
        ValueError, match=r"new_episode: expected one flag, or one per observation \(2\), got 3"
    ):
        policy.act_batch([a[1], b[1]], new_episode=[True, False, True])
    np.testing.assert_array_equal(policy.state, state)
    policy.act(a[0], new_episode=True)
    assert policy.state is not None and policy.state.shape == (1, 16)
    policy.reset()
    policy.act_batch([a[0], b[0], a[0]])
    assert policy.state is not None and policy.state.shape == (3, 16)


def test_a_model_without_memory_carries_nothing(model: Path) -> None:
    observations = episode_observations(3)
    policy = load(model, deterministic=True)
    assert policy.state_size is None
    want = plain(policy.act_batch(observations))
    assert plain(policy.act_batch(observations[:2], new_episode=[True, False])) == want[:2]
    assert policy.state is None


def test_a_state_declared_but_not_in_the_model_is_refused(tmp_path: Path, model: Path) -> None:
    declared = onnx.load(model)
    onnx.helper.set_model_props(
        declared,
        {
            **{p.key: p.value for p in declared.metadata_props},
            signature.STATE_KEY: signature.state_metadata(16),
        },
    )
    path = tmp_path / "declared.onnx"
    onnx.save(declared, path)
    with pytest.raises(PolicyFileError, match=r"declares a state .* lacks the input 'state'"):
        load(path)


BLOCKED_MEMORY = (
    WITHOUT_TORCH
    + """from entityrl.env import CategoricalActionMask, Observation
from entityrl.inference import load

def recall(question, cue):
    return Observation(
        features={"Player": [[question]], "Cue": [[1.0, 0.0]] if cue else []},
        actions={"answer": CategoricalActionMask(actor_types=["Player"])},
    )

policy = load(sys.argv[1], seed=0)
for new_episode in (True, False):
    policy.act(recall(0.0, True), new_episode=new_episode)
    policy.act(recall(0.0, False))
    policy.act(recall(1.0, False))
assert policy.state.shape == (1, 16), policy.state
policy.reset()
assert policy.state is None
assert not [m for m in sys.modules if m.startswith(("torch", "entityrl.training", "entityrl.nn"))]
print("ok")
"""
)


def test_the_runtime_carries_the_state_without_torch(memory_model: Path) -> None:
    run_without_torch(BLOCKED_MEMORY, memory_model)
