"""PettingZoo parallel environments as multi-player games: every agent a player.

A PettingZoo parallel environment becomes a :class:`~entityrl.env.multiplayer.MultiPlayerEnvironment`
whose players are its ``possible_agents``; ``make_vec`` then batches one row per (copy, agent)
(:mod:`entityrl.env.multiplayer_vec`), so ``algo=ppo`` trains one shared policy for every
agent, ``algo=selfplay`` pits the learner against its snapshots and ``algo=poca`` trains a
cooperative group. The agents need the same observation and action spaces (each translated by
the rule of :mod:`entityrl.interop.gym_spaces`); a one-hot global feature ``agent=<name>``
says which agent a player is, so roles can differ.

An agent that is terminated or truncated leaves the game (its observation is ``done``;
truncated ones keep their final observation for bootstrapping); an agent that appears later
joins it; the game ends when no agent is left. AEC environments are not supported (use their
``parallel_env``, or PettingZoo's ``aec_to_parallel``).

Registry names: ``pettingzoo:<PettingZoo's id>``, such as ``pettingzoo:classic/rps-v2``;
constructor arguments go to ``pettingzoo.make("parallel", id, ...)``. ``num_envs`` counts
copies (games).
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pettingzoo
from gymnasium.vector.utils import concatenate, create_empty_array
from pettingzoo import ParallelEnv

from entityrl.env import Action, Observation, ObsSpace
from entityrl.env.actions import kind_of
from entityrl.env.multiplayer import MultiPlayerEnvironment, PlayerActions
from entityrl.env.spaces import ActionSpace
from entityrl.interop.gym_spaces import ActionRule, ObservationRule, UnsupportedSpaceError


def check_id(env_id: str) -> None:
    """Raise KeyError (with close matches) unless PettingZoo registers a parallel environment
    ``env_id``."""
    known = list(pettingzoo.parallel_registry)
    if env_id not in known:
        close = difflib.get_close_matches(env_id, known, n=3, cutoff=0.6)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise KeyError(f"PettingZoo has no parallel environment {env_id!r}.{hint}")


class PettingZooGame(MultiPlayerEnvironment):
    """One copy of a PettingZoo parallel environment, each of its agents a player.

    ``env_id`` is PettingZoo's id (``classic/rps-v2``) or a function returning a
    :class:`pettingzoo.ParallelEnv` (called with ``env_kwargs``).
    """

    def __init__(self, env_id: str | Callable[..., ParallelEnv], **env_kwargs: Any) -> None:
        if isinstance(env_id, str):
            check_id(env_id)
            maker = functools.partial(pettingzoo.make, "parallel", env_id)
        else:
            maker = env_id
        self.env = maker(**env_kwargs)
        self.agents = list(self.env.possible_agents)
        name = str(self.env.metadata.get("name", env_id))
        self.space = self.env.observation_space(self.agents[0])
        action = self.env.action_space(self.agents[0])
        for agent in self.agents[1:]:
            if (
                self.env.observation_space(agent) != self.space
                or self.env.action_space(agent) != action
            ):
                raise UnsupportedSpaceError(
                    f"{name}: agents {self.agents[0]!r} and {agent!r} have different spaces; one "
                    "shared policy needs the same observation and action spaces for all agents"
                )
        self.observation_rule = ObservationRule(self.space, env_name=name)
        self.action_rule = ActionRule(action, env_name=name)
        rule_space = self.observation_rule.obs_space
        self._obs_space = ObsSpace(
            entities=rule_space.entities,
            global_features=[*rule_space.global_features, *(f"agent={a}" for a in self.agents)],
        )
        self._action_space = dict(self.action_rule.action_space)
        self._masks = {n: kind_of(s).mask() for n, s in self._action_space.items()}
        self._identity = np.eye(len(self.agents), dtype=np.float32)
        self._latest: dict[str, Any] = {}  # each agent's latest observation

    def players(self) -> list[str]:
        return self.agents

    def obs_space(self) -> ObsSpace:
        return self._obs_space

    def action_space(self) -> Mapping[str, ActionSpace]:
        return self._action_space

    def reset(self) -> dict[str, Observation]:
        observations, _ = self.env.reset(seed=int(self.rng.integers(2**31 - 1)))
        self._latest = dict(observations)
        return {agent: self._observe(agent, 0.0, False, False) for agent in observations}

    def act(self, actions: PlayerActions) -> dict[str, Observation]:
        decoded = {agent: self._decode(chosen) for agent, chosen in actions.items()}
        observations, rewards, terminated, truncated, _ = self.env.step(decoded)
        self._latest.update(observations)
        answered = {}
        for agent in actions:
            ended, cut = bool(terminated.get(agent)), bool(truncated.get(agent))
            reward = float(rewards.get(agent, 0.0))
            answered[agent] = self._observe(agent, reward, ended or cut, cut and not ended)
        for agent in observations.keys() - actions.keys():  # an agent that appeared: joins
            answered[agent] = self._observe(agent, 0.0, False, False)
        return answered

    def _decode(self, chosen: Mapping[str, Action]) -> Any:
        """One agent's entityrl actions -> its PettingZoo action."""
        values = []
        for name in self._action_space:
            action = chosen[name]
            # A global categorical action's choice, or a Box's continuous values.
            chosen_values = action.index if hasattr(action, "index") else action.values  # type: ignore[union-attr]
            values.append(np.atleast_1d(chosen_values))
        return self.action_rule.decode(np.concatenate(values).reshape(1, -1))[0]

    def _observe(self, agent: str, reward: float, done: bool, truncated: bool) -> Observation:
        batch = concatenate(self.space, [self._latest[agent]], create_empty_array(self.space, 1))
        features = self.observation_rule.entities(batch, 1)
        identity = self._identity[self.agents.index(agent)]
        return Observation(
            features={name: rows.data for name, rows in features.items()},
            global_features=np.concatenate(
                [self.observation_rule.global_features(batch, 1)[0], identity]
            ),
            actions={} if done else self._masks,
            reward=reward,
            done=done,
            truncated=truncated,
        )

    def render(self) -> str:
        return str(self.env.render())

    def close(self) -> None:
        self.env.close()


ADAPTER = PettingZooGame
"""What ``pettingzoo:<id>`` names in entityrl's registry."""
