"""PettingZoo parallel environments, every agent a row of one shared policy.

entityrl has no multi-player API yet (one observation per player, a policy per player); until
it does, a PettingZoo parallel environment becomes a batch in which each agent of each copy is
one row, and one policy acts for all of them. ``num_envs`` counts rows: a multiple of the
number of agents (``possible_agents``), copy ``c``'s agent ``a`` being row
``c * agents + a``. Agents therefore need the same observation and action spaces (each space
translated by the rule of :mod:`entityrl.interop.gym_spaces`); two global features are added:
which agent the row is (one-hot ``agent=<name>``) and ``active`` (0 once the agent is gone).

An agent that is done before the others waits in its row, taking no action and getting no
reward, until every agent of its copy is done; then the copy resets, and each row reports its
agent's episode. A row is truncated when its agent was cut off on the copy's last step.
AEC environments are not supported (use their ``parallel_env``).

Registry names: ``pettingzoo:<PettingZoo's id>``, such as ``pettingzoo:classic/rps-v2``;
constructor arguments go to ``pettingzoo.make("parallel", id, ...)``.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import pettingzoo
from gymnasium.vector.utils import concatenate, create_empty_array
from pettingzoo import ParallelEnv

from entityrl.env import BatchedEnvironment, ObsSpace, VecObs
from entityrl.env.actions import kind_of
from entityrl.interop.gym_spaces import ActionRule, ObservationRule, UnsupportedSpaceError
from entityrl.ragged import RaggedArray


def check_id(env_id: str) -> None:
    """Raise KeyError (with close matches) unless PettingZoo registers a parallel environment
    ``env_id``."""
    known = list(pettingzoo.parallel_registry)
    if env_id not in known:
        close = difflib.get_close_matches(env_id, known, n=3, cutoff=0.6)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise KeyError(f"PettingZoo has no parallel environment {env_id!r}.{hint}")


class PettingZooVecEnv(BatchedEnvironment):
    """``num_envs // agents`` copies of a PettingZoo parallel environment, one row per agent.

    ``env_id`` is PettingZoo's id (``classic/rps-v2``) or a function returning a
    :class:`pettingzoo.ParallelEnv` (called with ``env_kwargs``).
    """

    def __init__(
        self,
        num_envs: int,
        seed: int | None = None,
        *,
        validate: bool = False,
        env_id: str | Callable[[], ParallelEnv],
        **env_kwargs: Any,
    ) -> None:
        super().__init__(num_envs, seed, validate=validate)
        if isinstance(env_id, str):
            check_id(env_id)
            maker = functools.partial(pettingzoo.make, "parallel", env_id)
        else:
            maker = env_id
        first = maker(**env_kwargs)
        self.agents = list(first.possible_agents)
        name = str(first.metadata.get("name", env_id))
        if num_envs % len(self.agents):
            raise ValueError(
                f"{name}: num_envs counts rows, one per agent: expected a multiple of "
                f"{len(self.agents)} (agents {self.agents}), got {num_envs}"
            )
        self.copies = [first] + [
            maker(**env_kwargs) for _ in range(num_envs // len(self.agents) - 1)
        ]
        self.single_space = first.observation_space(self.agents[0])
        action = first.action_space(self.agents[0])
        for agent in self.agents[1:]:
            if (
                first.observation_space(agent) != self.single_space
                or first.action_space(agent) != action
            ):
                raise UnsupportedSpaceError(
                    f"{name}: agents {self.agents[0]!r} and {agent!r} have different spaces; one "
                    "shared policy needs the same observation and action spaces for all agents"
                )
        self.observation_rule = ObservationRule(self.single_space, env_name=name)
        self.action_rule = ActionRule(action, env_name=name)
        rule_space = self.observation_rule.obs_space
        self.obs_space = ObsSpace(
            entities=rule_space.entities,
            global_features=[
                *rule_space.global_features,
                *(f"agent={a}" for a in self.agents),
                "active",
            ],
        )
        self.action_space = dict(self.action_rule.action_space)
        empty = create_empty_array(self.single_space, 1)
        self._latest: list[Any] = [empty] * num_envs  # each row's latest observation
        self._active = np.zeros(num_envs, dtype=np.bool_)
        self._cut_off = np.zeros(num_envs, dtype=np.bool_)

    def reset_envs(self, envs: npt.NDArray[np.int64]) -> None:
        n = len(self.agents)
        for copy in np.unique(envs // n):
            observations, _ = self.copies[copy].reset(seed=int(self.rng.integers(2**31 - 1)))
            for a, agent in enumerate(self.agents):
                self._latest[copy * n + a] = observations[agent]
            self._active[copy * n : (copy + 1) * n] = True
            self._cut_off[copy * n : (copy + 1) * n] = False

    def step(
        self, actions: Mapping[str, RaggedArray]
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.bool_]]:
        # One column per choice (or per component of a Box's continuous action); rows of
        # agents that are gone keep zeros, which nobody receives.
        columns = []
        for name in self.action_space:
            given = actions[name]
            column = np.zeros((self.num_envs, given.features), dtype=given.dtype)
            column[given.lengths > 0] = given.data
            columns.append(column)
        decoded = self.action_rule.decode(np.concatenate(columns, axis=1))
        reward = np.zeros(self.num_envs, dtype=np.float32)
        done = np.zeros(self.num_envs, dtype=np.bool_)
        n = len(self.agents)
        for copy, env in enumerate(self.copies):
            rows = range(copy * n, (copy + 1) * n)
            acting = {
                a: decoded[r] for a, r in zip(self.agents, rows, strict=True) if self._active[r]
            }
            observations, rewards, terminated, truncated, _ = env.step(acting)
            for agent, row in zip(self.agents, rows, strict=True):
                if agent in acting:
                    reward[row] = rewards.get(agent, 0.0)
                    self._latest[row] = observations.get(agent, self._latest[row])
                    self._cut_off[row] = bool(truncated.get(agent)) and not terminated.get(agent)
                    self._active[row] = not (terminated.get(agent) or truncated.get(agent))
                else:  # gone earlier: its episode was not cut off on its copy's last step
                    self._cut_off[row] = False
            done[list(rows)] = not env.agents
        return reward, done

    def truncated(self, ended: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_] | None:
        return self._cut_off[ended]

    def observe(self) -> VecObs:
        rows = self.num_envs
        batch = concatenate(
            self.single_space, self._latest, create_empty_array(self.single_space, rows)
        )
        identity = np.tile(
            np.eye(len(self.agents), dtype=np.float32), (rows // len(self.agents), 1)
        )
        features = self.observation_rule.entities(batch, rows)
        entity_count = sum((f.lengths for f in features.values()), np.zeros(rows, np.int64))
        active = self._active.astype(np.int64)
        # Rows of agents that are gone take no action: no actor (the pseudo-entity) there.
        actor = RaggedArray(entity_count[self._active].reshape(-1, 1), active)
        return VecObs(
            features=features,
            global_features=np.concatenate(
                [
                    self.observation_rule.global_features(batch, rows),
                    identity,
                    self._active.astype(np.float32).reshape(-1, 1),
                ],
                axis=1,
            ),
            action_masks={
                name: kind_of(space).vec_mask(actor) for name, space in self.action_space.items()
            },
            reward=np.zeros(rows, dtype=np.float32),
            done=np.zeros(rows, dtype=np.bool_),
        )

    def get_state(self) -> bytes:
        # Not every PettingZoo environment can be pickled; a resumed run starts new episodes.
        raise NotImplementedError("PettingZoo environments cannot save their state")

    def close(self) -> None:
        for env in self.copies:
            env.close()


ADAPTER = PettingZooVecEnv
"""What ``pettingzoo:<id>`` names in entityrl's registry."""
