"""entityrl's multi-player games as PettingZoo parallel environments.

The reverse of :mod:`entityrl.interop.pettingzoo` (which brings PettingZoo's games into
entityrl): :class:`EntityParallelEnv` wraps a
:class:`~entityrl.env.multiplayer.MultiPlayerEnvironment` as a ``pettingzoo.ParallelEnv``, so
PettingZoo-speaking trainers (SuperSuit, RLlib, BenchMARL, a CleanRL loop) can play it. Each
agent (a player) gets the fixed-size padded layout of the Gymnasium adapter
(:class:`~entityrl.interop.padded.PaddedLayout`; see
:class:`~entityrl.interop.gymnasium.EntityGymnasiumEnv`): with ``observation="dict"`` a Dict of
the entities padded to ``max_entities`` per type, their presence masks, the global features and
``<action>_mask`` per action; with ``observation="global"`` a Box of the global features alone.
The action is a Discrete (one global action) or a MultiDiscrete of every action's components.
Every agent's legal choices, flattened as MaskablePPO reads them, are ``infos[agent]
["action_mask"]``.

The game's rules carry over: an agent whose observation is ``done`` is terminated (or
truncated, when the game cut it off) and leaves ``agents`` after that step; an agent that joins
mid-game appears in ``agents`` (and the step's observations) from the step it joins; the episode
ends when no agent is left. An agent's reward is its own plus its group's
(:meth:`~entityrl.env.multiplayer.MultiPlayerEnvironment.group_reward`) while it is in play
(PettingZoo has no reward for an agent that has left, so a group's reward after an agent left
does not reach it; an agent joining gets 0 for the step it joins, as in entityrl's own batches). Entities hidden from a player (``visible=False``) are left out of its
observation. An agent's last ``info`` holds the game's metrics for it.

Built-in games by name: :func:`parallel_env` (``parallel_env("CoinDuel")``), and
:func:`names` lists them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
from gymnasium import spaces
from pettingzoo import ParallelEnv

from entityrl.env import Batcher, Observation, VecObs
from entityrl.env.multiplayer import MultiPlayerEnvironment
from entityrl.interop.padded import Bounds, PaddedLayout

MASK_INFO = "action_mask"
"""The key of an agent's flattened legal choices in its ``info``."""


class EntityParallelEnv(ParallelEnv):  # type: ignore[misc]
    """A :class:`MultiPlayerEnvironment` as a PettingZoo ``ParallelEnv`` (see the module's
    docstring). ``max_entities``, ``observation`` and ``bounds`` as in
    :class:`~entityrl.interop.gymnasium.EntityGymnasiumEnv`."""

    metadata: dict[str, Any] = {"render_modes": [], "is_parallelizable": True}  # noqa: RUF012

    def __init__(
        self,
        game: MultiPlayerEnvironment,
        max_entities: int | Mapping[str, int] | None = None,
        *,
        observation: str = "dict",
        bounds: Bounds | Mapping[str, Bounds] | None = None,
    ) -> None:
        self.game = game
        name = type(game).__name__
        self.metadata = {**self.metadata, "name": name}
        self.possible_agents: list[str] = list(game.players())
        self.agents: list[str] = []
        obs_space, action_space = game.obs_space(), dict(game.action_space())
        self.layout = PaddedLayout(name, obs_space, action_space, max_entities, observation,
                                   bounds)  # fmt: skip
        self.batcher = Batcher(obs_space, action_space)
        self.observation_spaces = dict.fromkeys(self.possible_agents, self.layout.observation_space)
        self.action_spaces = dict.fromkeys(self.possible_agents, self.layout.action_space)
        self.groups = dict(game.groups())
        self._last: dict[str, Observation] = {}
        self._batch: VecObs | None = None

    def observation_space(self, agent: str) -> spaces.Space[Any]:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space[Any]:
        return self.action_spaces[agent]

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        if seed is not None:
            self.game.seed(seed)
        first = self.game.reset()
        self.agents = [agent for agent in self.possible_agents if agent in first]
        self._last = {agent: first[agent] for agent in self.agents}
        observations, masks = self._observe()
        return observations, {agent: {MASK_INFO: masks[agent]} for agent in self.agents}

    def step(self, actions: Mapping[str, Any]) -> tuple[
        dict[str, Any], dict[str, float], dict[str, bool], dict[str, bool], dict[str, Any]
    ]:  # fmt: skip
        if self._batch is None or not self.agents:
            raise RuntimeError(f"{self.metadata['name']}: call reset() before step()")
        missing = [agent for agent in self.agents if agent not in actions]
        if missing:
            raise ValueError(
                f"{self.metadata['name']}: no action for agents {missing} in play "
                f"(agents: {self.agents})"
            )
        picks = np.stack([np.reshape(actions[agent], -1) for agent in self.agents])
        per_row = self.layout.actions(self._batch, picks)
        observations = [self._last[agent] for agent in self.agents]
        chosen = self.batcher.unbatch(per_row, observations)
        result = self.game.act(dict(zip(self.agents, chosen, strict=True)))
        shared = self.game.group_reward()
        # Those in play, then any joining now, in the players' order.
        stepped = self.agents + [
            agent for agent in self.possible_agents if agent in result and agent not in self.agents
        ]
        rewards, terminations, truncations, infos = {}, {}, {}, {}
        for agent in stepped:
            obs = result[agent]
            group = self.groups.get(agent)
            if agent in self.agents:
                rewards[agent] = float(obs.reward) + float(shared.get(group, 0.0) if group else 0)
            else:  # joining: not in play during the step, so no reward for it
                rewards[agent] = 0.0
            truncations[agent] = bool(obs.done and obs.truncated)
            terminations[agent] = bool(obs.done) and not truncations[agent]
            infos[agent] = dict(obs.metrics) if obs.done else {}
        self.agents = stepped
        self._last = {agent: result[agent] for agent in stepped}
        obs_out, masks = self._observe()
        for agent in stepped:
            infos[agent][MASK_INFO] = masks[agent]
        staying = [row for row, agent in enumerate(stepped) if not result[agent].done]
        if len(staying) < len(stepped):  # the rows of those in play, for the next step
            assert self._batch is not None
            self._batch = self._batch.take(np.array(staying, dtype=np.int64))
        self.agents = [stepped[row] for row in staying]
        self._last = {agent: self._last[agent] for agent in self.agents}
        return obs_out, rewards, terminations, truncations, infos

    def _observe(self) -> tuple[dict[str, Any], dict[str, npt.NDArray[np.int8]]]:
        """Every stepped agent's observation and flattened legal choices."""
        batch = self._batch = self.batcher.batch([self._last[agent] for agent in self.agents])
        stacked = self.layout.observe(batch)
        masks = self.layout.action_masks(batch).astype(np.int8)
        observations = {}
        for row, agent in enumerate(self.agents):
            observations[agent] = (
                stacked[row] if self.layout.flat else {k: v[row] for k, v in stacked.items()}
            )
        return observations, dict(zip(self.agents, masks, strict=True))

    def game_observation(self, agent: str) -> Observation:
        """The game's own latest observation of an agent in play (entityrl's form)."""
        return self._last[agent]

    def render(self) -> None:
        return None

    def close(self) -> None:
        self.game.close()


def names() -> list[str]:
    """The multi-player games of entityrl's registry (what :func:`parallel_env` makes)."""
    from entityrl.envs import REGISTRY

    return [name for name, cls in REGISTRY.items()
            if isinstance(cls, type) and issubclass(cls, MultiPlayerEnvironment)]  # fmt: skip


def parallel_env(
    name: str,
    max_entities: int | Mapping[str, int] | None = None,
    *,
    observation: str = "dict",
    bounds: Bounds | Mapping[str, Bounds] | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    **more_env_kwargs: Any,
) -> EntityParallelEnv:
    """The registered multi-player game ``name`` (one of :func:`names`) as a PettingZoo
    parallel environment; the game's constructor arguments are the other keyword arguments
    (``env_kwargs`` for those whose names this function takes itself)."""
    from entityrl.envs import make

    if name not in names():
        raise KeyError(
            f"{name!r} is not a multi-player game of entityrl's registry; expected one of "
            f"{', '.join(names())} (single-player environments: entityrl.interop.gymnasium)"
        )
    game = make(name, **{**(env_kwargs or {}), **more_env_kwargs})
    return EntityParallelEnv(game, max_entities, observation=observation, bounds=bounds)


__all__ = ["MASK_INFO", "EntityParallelEnv", "names", "parallel_env"]
