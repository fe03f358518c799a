"""Helpers of the export and inference tests: untrained agents for any spaces, and the torch
policy's action probabilities (and, with memory, its next state) to compare exported models
with."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np
import torch

from entityrl.env import ActionSpace, Batcher, Observation, ObsSpace
from entityrl.envs import Recall
from entityrl.nn.kernels.build import torch_path
from entityrl.nn.rogue_net import RogueNet, RogueNetConfig
from entityrl.training.agent import Agent
from entityrl.training.config import EnvConfig, TrainConfig


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
) -> tuple[dict[str, np.ndarray], float, torch.Tensor | None]:
    """The torch policy's probability of every choice of every actor (each scored as the
    chosen action, one forward pass per choice index), the value, and with memory the state
    after ``obs`` ((1, size); ``state`` is the one before it, None: a new episode), for one
    observation."""
    net = agent.net
    batch = Batcher(net.obs_space, net.action_space).batch([obs])
    widths = {}
    for name, mask in batch.action_masks.items():
        space = net.action_space[name]
        widths[name] = len(space) if hasattr(space, "choices") else mask_width(mask)
    actors = {name: int(m.actors.lengths[0]) for name, m in batch.action_masks.items()}
    probs = {name: np.zeros((actors[name], widths[name]), np.float32) for name in widths}
    value = float("nan")
    next_state = None
    with torch_path(), torch.no_grad():
        prepared = net.prepare(batch)
        for k in range(max([*widths.values(), 1])):
            chosen = {
                name: torch.full((actors[name],), min(k, max(widths[name] - 1, 0)))
                for name in widths
            }
            out = net(prepared, chosen, state=state)
            value, next_state = float(out.values[0]), out.state
            for name, head in out.heads.items():
                if k < widths[name] and actors[name]:
                    probs[name][:, k] = head.logprob.exp().numpy()
    return probs, value, next_state


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
