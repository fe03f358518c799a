"""Recurrent policies (net.memory): the state through rollouts, chunks, agents and learning."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from entityrl.env.vec_obs import VecObs
from entityrl.envs import make, make_vec
from entityrl.envs.recall import Recall
from entityrl.nn.rogue_net import RogueNet, RogueNetConfig
from entityrl.training import Agent, evaluate, load_agent, load_config, make_eval_env, train
from entityrl.training.config import ConfigError
from entityrl.training.sampler import make_sampler

QUIET = ["log.tensorboard=false", "log.progress=false", "torch_threads=1"]


def _question(env: Recall) -> dict[str, np.ndarray]:
    obs = env.reset()
    for _ in range(env.delay):
        obs = env.act({})
    return {name: np.asarray(f) for name, f in obs.features.items()}


def test_the_question_looks_the_same_whatever_the_cue() -> None:
    """Why a memoryless policy cannot beat 0.5: when asked, it sees the same for both cues."""
    first: dict[str, np.ndarray] | None = None
    cues = set()
    for seed in range(20):
        env = make("Recall")
        env.seed(seed)
        assert isinstance(env, Recall)
        question = _question(env)
        cues.add(env.cue)
        first = first or question
        for name, features in question.items():
            np.testing.assert_array_equal(features, first[name])
    assert cues == {0, 1}
    assert first is not None and first["Player"].tolist() == [[1.0]]
    assert first["Cue"].shape[0] == 0


@pytest.fixture(params=["serial", "workers"])
def sampler(request: pytest.FixtureRequest):
    env = make_vec("Recall", 6, seed=0, processes=0 if request.param == "serial" else 2)
    torch.manual_seed(0)
    net = RogueNet(env.obs_space, env.action_space, RogueNetConfig(d_model=16, memory=True))
    with torch.no_grad():  # a memory that matters: a large projection of the state
        net.memory.proj.weight.mul_(20.0)  # type: ignore[union-attr]
    yield make_sampler(env, net, 8, np.random.default_rng(0))
    env.close()


def test_chunks_replay_the_states_the_policy_acted_from(sampler) -> None:
    """Episodes of 5 steps end inside the chunks of 4 steps: the update's replay from the
    stored chunk starts, reset at episode ends, gives back every stored log-probability and
    value; replayed without the states (every row a fresh episode), it does not."""
    sampler.collect()  # the second rollout starts mid-episode, from carried states
    rollout = sampler.collect()
    assert rollout.states is not None and np.abs(rollout.states).sum() > 0
    rollout.estimate_advantages(rollout.rewards, 0.99, 0.95)
    rows = rollout.shuffled_rows(np.random.default_rng(1), 4)
    batch = rollout.minibatch(rows, rollout.advantages[rows], seq_len=4)
    with torch.no_grad():
        replayed = sampler.net.evaluate(batch.obs, batch.actions, batch.sequences)
        forgetful = sampler.net.evaluate(batch.obs, batch.actions)
    stored = batch.logprobs["answer"]
    torch.testing.assert_close(replayed.heads["answer"].logprob, stored, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(replayed.values, batch.values, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(forgetful.heads["answer"].logprob, stored, atol=1e-3)


def test_an_agent_carries_each_row_s_state_and_resets_it_when_an_episode_ends() -> None:
    env = make_vec("Recall", 2, seed=0)
    config = load_config("Recall", ["net.d_model=16"])
    agent = Agent(RogueNet(env.obs_space, env.action_space, config.net), config, seed=0)
    obs = env.reset()
    agent.act(obs)
    assert agent.state is not None and agent.state.shape == (2, 16)
    carried = agent.state.clone()
    ended = VecObs(**{**obs.__dict__, "done": np.array([True, False])})
    agent.act(ended)
    assert agent.acted_from is not None
    assert torch.equal(agent.acted_from[0], torch.zeros(16))
    assert torch.equal(agent.acted_from[1], carried[1])
    # act_on leaves ending episodes to end_episodes: row 1 acts from its carried state.
    carried = agent.state.clone()
    agent.act_on(obs.take(np.array([1])), np.array([1]))
    assert torch.equal(agent.acted_from[0], carried[1])
    assert torch.equal(agent.state[0], carried[0]) and not torch.equal(agent.state[1], carried[1])
    agent.end_episodes(np.array([False, True]))
    assert torch.equal(agent.state[1], torch.zeros(16))
    agent.reset()
    assert agent.state is None


def test_memory_learns_recall_and_no_memory_stays_at_chance(tmp_path: Path) -> None:
    returns = {}
    for memory in (True, False):
        run_dir = tmp_path / str(memory)
        # Without memory, a quarter of the budget shows where it stays.
        budget = [] if memory else ["total_timesteps=10240"]
        train(
            "Recall",
            overrides=[*QUIET, f"net.memory={memory}", *budget, f"log.run_dir={run_dir}"],
        )
        agent = load_agent(run_dir, seed=0)
        with make_eval_env(agent, num_envs=16, seed=123) as env:
            returns[memory] = evaluate(agent, env, 400).mean()
    assert returns[True] >= 0.95
    assert returns[False] <= 0.6


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["ppo.seq_len=5"], r"ppo.seq_len \(5\) must divide rollout.steps \(16\)"),
        (["ppo.seq_len=16", "optim.bs=40"], r"optim.bs \(40\) per process must be a multiple"),
        (["net.separate_value=true"], "net.memory and net.separate_value cannot be combined"),
    ],
)
def test_settings_memory_cannot_train_with_are_refused(overrides: list[str], message: str) -> None:
    with pytest.raises((ConfigError, ValueError), match=message):
        load_config("Recall", overrides)
