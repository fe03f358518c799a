"""Trained agents: loading a run, acting, space checks, evaluation, unreadable checkpoints."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest
import torch

from entityrl.env import Action, Entity, Observation, ObsSpace, RandomPolicy, SerialVecEnv
from entityrl.envs import MoveToOrigin, make_vec
from entityrl.training import (
    Agent,
    AgentError,
    evaluate,
    load_agent,
    make_eval_env,
    train,
)
from entityrl.training.checkpoint import CheckpointError

MAX_STEPS = 6  # episode length of the run's environment


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of about a second: ten PPO iterations of a small network on short episodes."""
    directory = tmp_path_factory.mktemp("run")
    train(
        "MoveToOrigin",
        overrides=[
            f"env.kwargs={{max_steps: {MAX_STEPS}}}",
            "rollout.num_envs=8",
            "rollout.steps=12",
            "total_timesteps=960",
            "net.d_model=16",
            "net.n_layer=1",
            "optim.bs=48",
            "ppo.update_epochs=1",
            f"log.run_dir={directory}",
            "log.tensorboard=false",
            "log.progress=false",
            "torch_threads=1",
        ],
    )
    return directory


class RandomLengthMoveToOrigin(MoveToOrigin):
    """MoveToOrigin whose episodes also end at random (so environments finish at different
    times) and report their length as the metric ``steps_taken``."""

    def act(self, actions: Mapping[str, Action]) -> Observation:
        obs = super().act(actions)
        obs.done = obs.done or bool(self.rng.random() < 0.3)
        if obs.done:
            obs.metrics = {"steps_taken": float(self.steps)}
        return obs


class RenamedFeature(MoveToOrigin):
    def obs_space(self) -> ObsSpace:
        features = list(super().obs_space().entities["Spaceship"].features)
        features[-1] = "time"
        return ObsSpace(entities={"Spaceship": Entity(features)})


# ---------------------------------------------------------------------------- loading
def test_a_run_directory_and_its_checkpoint_file_load_the_trained_network(run_dir):
    from_dir = load_agent(run_dir)
    from_file = load_agent(run_dir / "checkpoint.pt")
    saved = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    for agent in (from_dir, from_file):
        assert isinstance(agent, Agent)
        assert agent.step == 960
        assert agent.config.env.id == "MoveToOrigin"
        assert agent.config.env.kwargs == {"max_steps": MAX_STEPS}
        assert agent.config.net.d_model == 16
        state = agent.net.state_dict()
        assert state.keys() == saved["model"].keys()
        for key, value in saved["model"].items():
            torch.testing.assert_close(state[key], value, rtol=0, atol=0)
    assert from_dir.path == from_file.path == run_dir / "checkpoint.pt"


def test_actions_fit_the_environment_and_keep_acting_across_episodes(run_dir):
    agent = load_agent(run_dir, seed=0)
    with make_eval_env(agent, num_envs=3, seed=0) as env:
        obs = env.reset()
        ended = 0
        for _ in range(2 * MAX_STEPS):
            actions = agent.act(obs)
            assert set(actions) == {"horizontal_thruster", "vertical_thruster"}
            for name, chosen in actions.items():
                np.testing.assert_array_equal(chosen.lengths, obs.action_masks[name].actors.lengths)
            obs = env.act(actions)  # the environment checks the actions
            ended += int(obs.done.sum())
    assert ended == 2 * 3


def test_sampling_is_reproducible_by_seed_and_leaves_torchs_generator_alone(run_dir):
    def sampled(agent: Agent) -> list[np.ndarray]:
        with make_eval_env(agent, num_envs=4, seed=1) as env:
            obs = env.reset()
            taken = []
            for _ in range(MAX_STEPS):
                actions = agent.act(obs)
                taken.append(actions["horizontal_thruster"].data.ravel().copy())
                obs = env.act(actions)
        return taken

    torch.manual_seed(123)
    global_state = torch.get_rng_state()
    first = sampled(load_agent(run_dir, seed=5))
    assert torch.equal(torch.get_rng_state(), global_state)
    np.testing.assert_array_equal(first, sampled(load_agent(run_dir, seed=5)))
    other = sampled(load_agent(run_dir, seed=6))
    assert any(not np.array_equal(a, b) for a, b in zip(first, other, strict=True))


def test_deterministic_takes_the_most_probable_choice(run_dir):
    agent = load_agent(run_dir, deterministic=True)
    with make_eval_env(agent, num_envs=8, seed=2) as env:
        obs = env.reset()
    greedy = agent.net.act(obs, deterministic=True).actions(obs)
    for _ in range(3):
        actions = agent.act(obs)
        for name, chosen in actions.items():
            np.testing.assert_array_equal(chosen.data, greedy[name].data)


# ---------------------------------------------------------------------------- spaces
def test_an_environment_with_other_spaces_is_refused_with_every_difference_named(run_dir):
    agent = load_agent(run_dir)
    with pytest.raises(AgentError) as caught:
        agent.check_env(make_vec("Count", 1))
    message = str(caught.value)
    assert "agent trained on MoveToOrigin" in message
    assert "entity type 'Spaceship' is missing from the environment" in message
    assert "entity type 'Bean' is unknown to the agent" in message
    assert "action 'horizontal_thruster' is missing from the environment" in message
    assert "action 'count' is unknown to the agent" in message


def test_a_renamed_feature_is_a_difference_even_with_the_same_count(run_dir):
    agent = load_agent(run_dir)
    expected = (
        r"entity type 'Spaceship': the environment has features \[.*'time'\], "
        r"the agent expects features \[.*'step'\]"
    )
    with pytest.raises(AgentError, match=expected):
        make_eval_env(agent, env=RenamedFeature)
    with pytest.raises(AgentError, match=expected):
        evaluate(agent, SerialVecEnv(RenamedFeature, 1, seed=0), 1)


def test_observations_with_other_actions_are_refused(run_dir):
    agent = load_agent(run_dir)
    obs = make_vec("Count", 1, seed=0).reset()
    with pytest.raises(AgentError, match=r"in one but not the other: \['count', "):
        agent.act(obs)


def test_a_custom_environment_must_be_passed(run_dir, tmp_path):
    saved = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    saved["config"]["env"]["id"] = "MyOwnWorld"
    torch.save(saved, tmp_path / "custom.pt")
    agent = load_agent(tmp_path / "custom.pt")
    with pytest.raises(
        AgentError,
        match="'MyOwnWorld', which is not a registered environment: pass the environment",
    ):
        make_eval_env(agent)
    with make_eval_env(agent, num_envs=2, env=MoveToOrigin) as env:
        assert evaluate(agent, env, 2).episodes == 2


# ---------------------------------------------------------------------------- evaluation
@pytest.mark.parametrize("episodes, num_envs", [(7, 3), (2, 4)])
def test_evaluation_counts_the_first_episodes_of_each_environment(run_dir, episodes, num_envs):
    seed = 11
    agent = load_agent(run_dir, seed=seed)
    with make_eval_env(agent, num_envs, seed, env=RandomLengthMoveToOrigin) as env:
        result = evaluate(agent, env, episodes)

    # The same play, counted by hand: environment i contributes its first `quota[i]` episodes,
    # listed in the order they end (environment order within a step).
    quota = [episodes // num_envs + (i < episodes % num_envs) for i in range(num_envs)]
    agent.seed(seed)
    with make_eval_env(agent, num_envs, seed, env=RandomLengthMoveToOrigin) as env:
        obs = env.reset()
        running = np.zeros(num_envs)
        lengths = np.zeros(num_envs, dtype=int)
        done_count = [0] * num_envs
        returns, steps = [], []
        while any(d < q for d, q in zip(done_count, quota, strict=True)):
            obs = env.act(agent.act(obs))
            running += obs.reward
            lengths += 1
            for i in np.flatnonzero(obs.done):
                if done_count[i] < quota[i]:
                    returns.append(running[i])
                    steps.append(lengths[i])
                done_count[i] += 1
                running[i], lengths[i] = 0.0, 0

    assert result.episodes == episodes
    np.testing.assert_allclose(result.returns, returns, rtol=1e-5)
    np.testing.assert_array_equal(result.metrics["episode_length"], steps)
    np.testing.assert_array_equal(result.metrics["steps_taken"], steps)
    assert len(set(steps)) > 1  # the environments really finished at different times
    assert result.mean() == pytest.approx(np.mean(returns), rel=1e-5)
    assert result.std("episode_length") == pytest.approx(np.std(steps))


def test_any_policy_can_be_evaluated():
    # A random policy has no trained spaces to check; it plays like an agent.
    with SerialVecEnv(RandomLengthMoveToOrigin, 3, seed=5) as env:
        result = evaluate(RandomPolicy(env.action_space, seed=0), env, 5)
    assert result.episodes == 5
    assert result.metrics["episode_length"].shape == (5,)
    np.testing.assert_array_equal(result.metrics["episode_length"], result.metrics["steps_taken"])


def test_evaluation_needs_at_least_one_episode(run_dir):
    agent = load_agent(run_dir)
    with make_eval_env(agent) as env, pytest.raises(ValueError, match="episodes must be >= 1"):
        evaluate(agent, env, 0)


class Endless(MoveToOrigin):
    """MoveToOrigin whose episodes never end."""

    def act(self, actions: Mapping[str, Action]) -> Observation:
        obs = super().act(actions)
        obs.done = False
        return obs


def test_evaluation_gives_up_on_an_episode_that_does_not_end(run_dir):
    agent = load_agent(run_dir, seed=0)
    with (
        make_eval_env(agent, num_envs=2, env=Endless) as env,
        pytest.raises(
            AgentError, match="the episode of environment 0 has not ended after 50 steps"
        ),
    ):
        evaluate(agent, env, 2, max_steps=50)


def test_episodes_of_exactly_max_steps_are_evaluated(run_dir):
    agent = load_agent(run_dir, seed=0)
    with make_eval_env(agent, num_envs=2) as env:
        assert evaluate(agent, env, 4, max_steps=MAX_STEPS).returns.shape == (4,)
        with pytest.raises(AgentError, match=f"has not ended after {MAX_STEPS - 1} steps"):
            evaluate(agent, env, 4, max_steps=MAX_STEPS - 1)
        with pytest.raises(ValueError, match="max_steps must be >= 1, got 0"):
            evaluate(agent, env, 4, max_steps=0)


# ---------------------------------------------------------------------------- bad checkpoints
def _truncated(run_dir: Path, path: Path) -> None:
    data = (run_dir / "checkpoint.pt").read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _random_bytes(run_dir: Path, path: Path) -> None:
    path.write_bytes(np.random.default_rng(0).bytes(4096))


def _foreign_torch_file(run_dir: Path, path: Path) -> None:
    torch.save({"weights": torch.zeros(3)}, path)


def _empty(run_dir: Path, path: Path) -> None:
    path.write_bytes(b"")


def _weights_of_another_network(run_dir: Path, path: Path) -> None:
    saved = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    saved["config"]["net"]["d_model"] = 32
    torch.save(saved, path)


def _unknown_config_key(run_dir: Path, path: Path) -> None:
    saved = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    saved["config"]["ppo"]["no_such_key"] = 1
    torch.save(saved, path)


@pytest.mark.parametrize(
    "corrupt, reason",
    [
        (_truncated, "not a readable checkpoint"),
        (_random_bytes, "is not a checkpoint: expected a checkpoint.pt written by entityrl train"),
        (_empty, "not a readable checkpoint"),
        (_foreign_torch_file, "not an entityrl checkpoint"),
        (
            _weights_of_another_network,
            "weights do not fit the network its config and spaces describe: size mismatch for ",
        ),
        (_unknown_config_key, "config does not fit this entityrl"),
    ],
)
def test_unusable_checkpoints_give_a_one_line_error_naming_the_file(
    run_dir, tmp_path, corrupt, reason
):
    path = tmp_path / "checkpoint.pt"
    corrupt(run_dir, path)
    with pytest.raises(CheckpointError) as caught:
        load_agent(tmp_path)
    message = str(caught.value)
    assert str(path) in message and reason in message
    assert "\n" not in message


def test_a_missing_checkpoint_is_named(tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint at"):
        load_agent(tmp_path)
    with pytest.raises(CheckpointError, match="no checkpoint at"):
        load_agent(tmp_path / os.path.join("nowhere", "checkpoint.pt"))
