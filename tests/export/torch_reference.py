"""Helpers of the export and inference tests: untrained agents for any spaces, and the torch
policy's decisions (and, with memory, its next state) to compare exported models with."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np
import pytest
import torch

from entityrl.env import ActionSpace, Batcher, Observation, ObsSpace
from entityrl.env.actions import kind_of
from entityrl.envs import Recall
from entityrl.inference import Decision
from entityrl.nn.kernels.build import torch_path
from entityrl.nn.rogue_net import RogueNet, RogueNetConfig
from entityrl.training.agent import Agent
from entityrl.training.config import EnvConfig, TrainConfig

# Decisions of image policies, against torch or between runtimes (onnxruntime-web in the
# page). A CNN sums hundreds of products per cell, so torch and onnxruntime round its float32
# sums apart by a few 1e-7; the sharpened heads (x40) carry that to ~1e-5 in a probability
# (measured: up to 1.1e-5 on random observations). A wrong or missing image moves them far more.
IMAGE_TOLERANCE = 1e-4


def untrained_agent(
    obs_space: ObsSpace,
    action_space: Mapping[str, ActionSpace],
    env_id: str = "Test",
    seed: int = 0,
    config: RogueNetConfig | None = None,
    **net: object,
) -> Agent:
    """A float32 agent on the plain torch path with random weights and random input
    statistics (so that normalization matters): of ``config`` with the ``net`` fields
    replaced (the defaults if None)."""
    generator = torch.Generator().manual_seed(seed)
    config = dataclasses.replace(config or RogueNetConfig(), precision="float32", **net)  # type: ignore[arg-type]
    with torch_path(), torch.random.fork_rng(devices=()):
        torch.manual_seed(seed)
        network = RogueNet(obs_space, action_space, config)
    with torch.no_grad():
        for name, buffer in network.named_buffers():
            if name.endswith("scale_mean"):
                buffer.copy_(torch.randn(buffer.shape, generator=generator))
            elif name.endswith("scale_inv_std"):
                buffer.copy_(torch.rand(buffer.shape, generator=generator) + 0.5)
    return Agent(network, TrainConfig(env=EnvConfig(id=env_id)), seed=seed)


def sharpened(agent: Agent, factor: float = 40.0) -> Agent:
    """The agent with its action heads' weights scaled up by ``factor``: a policy far from
    uniform, so that feeding the wrong input (an entity, a state) shows in its decisions, and
    its most probable actions are far more probable than the next (float rounding cannot swap
    them)."""
    with torch.no_grad():
        for name, param in agent.net.named_parameters():
            if name.startswith("heads.") and name.endswith("weight"):
                param.mul_(factor)
    return agent


def torch_decision(
    agent: Agent, obs: Observation, state: torch.Tensor | None = None
) -> tuple[Decision, torch.Tensor | None]:
    """For one observation, the torch policy's decision: the probability of every choice of
    every actor (each scored as the chosen action, one forward pass per choice index); per
    continuous action each actor's mean (its deterministic action) and the standard deviation
    (from the log-probability of the mean plus one in each component); the value. With memory
    also the state after ``obs`` ((1, size); ``state`` is the one before it, None: a new
    episode)."""
    net = agent.net
    batch = Batcher(net.obs_space, net.action_space).batch([obs])
    actors = {name: int(m.actors.lengths[0]) for name, m in batch.action_masks.items()}
    widths = {}
    for name, mask in batch.action_masks.items():
        space = net.action_space[name]
        if kind_of(space).discrete:
            widths[name] = len(space) if hasattr(space, "choices") else mask_width(mask)
    decision = Decision(
        {name: np.zeros((actors[name], widths[name]), np.float32) for name in widths}, 0.0
    )
    with torch_path(), torch.no_grad():
        prepared = net.prepare(batch)
        out = net(prepared, deterministic=True, state=state)
        decision.value, next_state = float(out.values[0]), out.state
        for name in set(net.action_space) - set(widths):
            mean = out.heads[name].actions
            decision.mean[name] = mean.numpy()
            decision.std[name] = continuous_std(agent, prepared, out, name, state)
        for k in range(max([*widths.values(), 1])):
            chosen = {
                name: out.heads[name].actions
                if name not in widths
                else torch.full((actors[name],), min(k, max(widths[name] - 1, 0)))
                for name in net.action_space
            }
            scored = net(prepared, chosen, state=state)
            for name in widths:
                if k < widths[name] and actors[name]:
                    decision.probs[name][:, k] = scored.heads[name].logprob.exp().numpy()
    return decision, next_state


def continuous_std(
    agent: Agent, prepared, out, name: str, state: torch.Tensor | None
) -> np.ndarray:
    """The standard deviation of continuous action ``name`` (components,), from what the torch
    policy scores: a value one away from the mean in component d scores ``1 / (2 std_d**2)``
    less than the mean (none without actors: nothing to score)."""
    mean = out.heads[name].actions
    if mean.shape[0] == 0:
        return np.zeros(0, np.float32)
    std = []
    for d in range(mean.shape[1]):
        chosen = {n: head.actions for n, head in out.heads.items()}
        chosen[name] = mean + torch.nn.functional.one_hot(torch.tensor(d), mean.shape[1])
        drop = (
            out.heads[name].logprob[0]
            - agent.net(prepared, chosen, state=state).heads[name].logprob[0]
        )
        std.append(float((0.5 / drop.double()) ** 0.5))
    return np.asarray(std, np.float32)


def assert_same_decision(got: Decision, want: Decision, tolerance: float) -> None:
    """``got`` (the exported model's) equals ``want`` (torch's) within ``tolerance``, every
    action's probabilities or Gaussian and the value (continuous actions without actors have
    no standard deviation to compare)."""
    assert got.value == pytest.approx(want.value, abs=tolerance)
    assert got.probs.keys() == want.probs.keys() and got.mean.keys() == want.mean.keys()
    for name, probs in want.probs.items():
        np.testing.assert_allclose(got.probs[name], probs, atol=tolerance, rtol=0)
    for name, mean in want.mean.items():
        np.testing.assert_allclose(got.mean[name], mean, atol=tolerance, rtol=0)
        if mean.shape[0]:
            np.testing.assert_allclose(got.std[name], want.std[name], rtol=1e-4)


def mask_width(mask: object) -> int:
    """Candidates of the first row of a select-entity mask."""
    return int(mask.actees.lengths[0])  # type: ignore[attr-defined]


def recall_episodes(seeds: range, delay: int = 3) -> list[list[Observation]]:
    """The observations the policy acts on in Recall episodes (the final one, after the
    answer, excluded), one episode per seed. What the policy answers does not change them."""
    env = Recall(delay=delay)
    episodes = []
    for seed in seeds:
        env.seed(seed)
        obs = env.reset()
        episode = []
        while not obs.done:
            episode.append(obs)
            obs = env.act({})
        episodes.append(episode)
    return episodes
