"""PettingZoo environments as multi-player games: every agent a player.

A PettingZoo parallel environment becomes a :class:`~entityrl.env.multiplayer.MultiPlayerEnvironment`
whose players are its ``possible_agents``; ``make_vec`` then batches one row per (copy, agent)
(:mod:`entityrl.env.multiplayer_vec`), so ``algo=ppo`` trains one shared policy for every
agent, ``algo=selfplay`` pits the learner against its snapshots and ``algo=poca`` trains a
cooperative group. The agents need the same observation and action spaces (each translated by
the rule of :mod:`entityrl.interop.gym_spaces`); a one-hot global feature ``agent=<name>``
says which agent a player is, so roles can differ.

An agent that is terminated or truncated leaves the game (its observation is ``done``;
truncated ones keep their final observation for bootstrapping); an agent that appears later
joins it; the game ends when no agent is left. Environments with only the turn-based AEC API
are :class:`PettingZooTurns`: only the agent whose turn it is acts.

Registry names: ``pettingzoo:<PettingZoo's id>``, such as ``pettingzoo:classic/rps-v2``, and
the Multi-Agent Particle Environments of the mpe2 package as ``pettingzoo:simple_tag_v3``,
``pettingzoo:mpe/simple_tag_v3`` or ``mpe2:simple_tag_v3``;
constructor arguments go to ``pettingzoo.make("parallel" or "aec", id, ...)``. ``num_envs`` counts
copies (games).

The other way round (entityrl's multi-player games as PettingZoo parallel environments):
:mod:`entityrl.interop.pettingzoo_parallel`.
"""

from __future__ import annotations

import difflib
import functools
import pkgutil
import re
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pettingzoo
from gymnasium import spaces
from gymnasium.vector.utils import concatenate, create_empty_array

from entityrl.env import Action, GlobalCategoricalActionMask, Observation, ObsSpace
from entityrl.env.actions import kind_of
from entityrl.env.multiplayer import MultiPlayerEnvironment, PlayerActions
from entityrl.env.spaces import ActionSpace
from entityrl.interop.gym_spaces import ActionRule, ObservationRule, UnsupportedSpaceError

MASK_KEY = "action_mask"
"""PettingZoo's key for the legal actions in a Dict observation."""


MPE_NAMESPACE = "mpe"
"""The Multi-Agent Particle Environments moved from PettingZoo to the mpe2 package; their tasks
are registered with PettingZoo here as ``mpe/<task>`` on first use."""


def _mpe2_tasks() -> list[str] | None:
    """The tasks of the installed mpe2 package, as its modules name them (``simple_tag_v3``;
    None: mpe2 is not installed)."""
    try:
        import mpe2
    except ImportError:
        return None
    modules = (m.name for m in pkgutil.iter_modules(mpe2.__path__))
    return [name for name in modules if re.fullmatch(r"\w+_v\d+", name)]


def resolve_id(env_id: str) -> str:
    """PettingZoo's id for ``env_id``: itself when PettingZoo registers it; for an MPE task of
    the mpe2 package (``simple_tag_v3``, ``mpe/simple_tag_v3`` or ``mpe/simple_tag-v3``),
    ``mpe/simple_tag-v3`` (PettingZoo's form), registered with PettingZoo (both APIs) the first
    time; else ``env_id`` unchanged."""
    if env_id in pettingzoo.parallel_registry or env_id in pettingzoo.aec_registry:
        return env_id
    task = re.sub(r"-v(\d+)$", r"_v\1", env_id.removeprefix(f"{MPE_NAMESPACE}/"))
    if task not in (_mpe2_tasks() or []):
        return env_id
    name, version = task.rsplit("_v", 1)
    registered = f"{MPE_NAMESPACE}/{name}-v{version}"
    if registered in pettingzoo.parallel_registry:
        return registered
    pettingzoo.register("parallel", registered, f"mpe2.{task}:parallel_env")
    pettingzoo.register("aec", registered, f"mpe2.{task}:env")
    return registered


def check_id(env_id: str) -> None:
    """Raise KeyError (with close matches) unless PettingZoo registers an environment
    ``env_id`` (parallel or AEC) or it names a task of the mpe2 package; an MPE-looking name
    without mpe2 installed says to install it."""
    resolved = resolve_id(env_id)
    known = [*pettingzoo.parallel_registry, *pettingzoo.aec_registry]
    if resolved in known:
        return
    tasks = _mpe2_tasks()
    if tasks is None and env_id.startswith((f"{MPE_NAMESPACE}/", "simple")):
        raise KeyError(
            f"PettingZoo has no environment {env_id!r}: the Multi-Agent Particle Environments "
            "(simple_tag_v3, simple_spread_v3, ...) moved to the mpe2 package: pip install "
            "'entityrl[mpe2]', then name them pettingzoo:simple_tag_v3 or mpe2:simple_tag_v3"
        )
    close = difflib.get_close_matches(env_id, [*known, *(tasks or [])], n=3, cutoff=0.6)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise KeyError(f"PettingZoo has no environment {env_id!r}.{hint}")


def adapter_for(env_id: str) -> type[MultiPlayerEnvironment]:
    """The game class for PettingZoo's ``env_id``: its parallel API when it has one, else its
    turn-based (AEC) one."""
    return PettingZooGame if resolve_id(env_id) in pettingzoo.parallel_registry else PettingZooTurns


class _PettingZooPlayers(MultiPlayerEnvironment):
    """What both of PettingZoo's APIs share: every agent a player, its spaces translated by the
    rules of :mod:`entityrl.interop.gym_spaces` (the same for every agent), and a one-hot
    ``agent=<name>`` global feature. A Dict observation's ``action_mask`` (PettingZoo's
    convention) masks a Discrete action's choices instead of being observed."""

    api = ""

    def __init__(self, env_id: str | Callable[..., Any], **env_kwargs: Any) -> None:
        if isinstance(env_id, str):
            check_id(env_id)
            maker = functools.partial(pettingzoo.make, self.api, resolve_id(env_id))
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
        masked = isinstance(self.space, spaces.Dict) and MASK_KEY in self.space.spaces
        self.mask_key = MASK_KEY if masked and isinstance(action, spaces.Discrete) else None
        self.observation_rule = ObservationRule(
            self.space, ignore=[self.mask_key] if self.mask_key else (), env_name=name
        )
        self.action_rule = ActionRule(action, env_name=name)
        rule_space = self.observation_rule.obs_space
        self._obs_space = ObsSpace(
            entities=rule_space.entities,
            global_features=[*rule_space.global_features, *(f"agent={a}" for a in self.agents)],
        )
        self._action_space = dict(self.action_rule.action_space)
        self._masks = {n: kind_of(s).mask() for n, s in self._action_space.items()}
        self._identity = np.eye(len(self.agents), dtype=np.float32)

    def players(self) -> list[str]:
        return self.agents

    def obs_space(self) -> ObsSpace:
        return self._obs_space

    def action_space(self) -> Mapping[str, ActionSpace]:
        return self._action_space

    def _decode(self, chosen: Mapping[str, Action]) -> Any:
        """One agent's entityrl actions -> its PettingZoo action."""
        return self.action_rule.decode(self.action_rule.values(chosen))[0]

    def _observe(
        self, agent: str, raw: Any, reward: float, done: bool, truncated: bool, acts: bool
    ) -> Observation:
        """Agent ``agent``'s observation ``raw`` (PettingZoo's) as entityrl's; ``acts``: it
        takes an action now."""
        batch = concatenate(self.space, [raw], create_empty_array(self.space, 1))
        features = self.observation_rule.entities(batch, 1)
        identity = self._identity[self.agents.index(agent)]
        masks: Mapping[str, Any] = {}
        if acts and not done:
            masks = self._masks
            if self.mask_key is not None:
                legal = np.asarray(raw[self.mask_key], dtype=np.bool_).reshape(-1)
                masks = {"action": GlobalCategoricalActionMask(mask=legal)}
        return Observation(
            features={name: rows.data for name, rows in features.items()},
            global_features=np.concatenate(
                [self.observation_rule.global_features(batch, 1)[0], identity]
            ),
            actions=masks,
            reward=reward,
            done=done,
            truncated=truncated,
        )

    def render(self) -> str:
        return str(self.env.render())

    def close(self) -> None:
        self.env.close()


class PettingZooGame(_PettingZooPlayers):
    """One copy of a PettingZoo parallel environment: every agent acts every step.

    ``env_id`` is PettingZoo's id (``classic/rps-v2``) or a function returning a
    :class:`pettingzoo.ParallelEnv` (called with ``env_kwargs``).
    """

    api = "parallel"

    def reset(self) -> dict[str, Observation]:
        observations, _ = self.env.reset(seed=int(self.rng.integers(2**31 - 1)))
        self._latest = dict(observations)
        return {
            a: self._observe(a, raw, 0.0, False, False, True) for a, raw in observations.items()
        }

    def act(self, actions: PlayerActions) -> dict[str, Observation]:
        decoded = {agent: self._decode(chosen) for agent, chosen in actions.items()}
        observations, rewards, terminated, truncated, _ = self.env.step(decoded)
        self._latest.update(observations)
        answered = {}
        for agent in actions:
            ended, cut = bool(terminated.get(agent)), bool(truncated.get(agent))
            reward = float(rewards.get(agent, 0.0))
            raw = self._latest[agent]
            answered[agent] = self._observe(
                agent, raw, reward, ended or cut, cut and not ended, True
            )
        for agent in observations.keys() - actions.keys():  # an agent that appeared: joins
            answered[agent] = self._observe(agent, observations[agent], 0.0, False, False, True)
        return answered


class PettingZooTurns(_PettingZooPlayers):
    """One copy of a PettingZoo AEC environment: agents take turns (board games such as
    ``classic/tictactoe-v3``). Every agent is in play; only the one whose turn it is has actions
    (the others act in no way), and a step is one agent's move. Each player's reward is what
    PettingZoo gave it since its last observation.

    ``env_id`` is PettingZoo's id or a function returning a :class:`pettingzoo.AECEnv` (called
    with ``env_kwargs``).
    """

    api = "aec"

    def reset(self) -> dict[str, Observation]:
        self.env.reset(seed=int(self.rng.integers(2**31 - 1)))
        return self._observe_all(list(self.env.agents))

    def act(self, actions: PlayerActions) -> dict[str, Observation]:
        mover = self.env.agent_selection
        if mover not in actions or not actions[mover]:
            raise ValueError(
                f"{type(self).__name__}: it is {mover!r}'s turn, but it was given no action"
            )
        in_play = list(actions)
        self.env.step(self._decode(actions[mover]))
        self._gained = {agent: float(self.env.rewards.get(agent, 0.0)) for agent in in_play}
        # PettingZoo removes a finished agent when it is stepped with None on its turn.
        while self.env.agents and self._finished(self.env.agent_selection):
            self.env.step(None)
            for agent in in_play:
                self._gained[agent] += float(self.env.rewards.get(agent, 0.0))
        return self._observe_all(in_play)

    def _finished(self, agent: str) -> bool:
        return bool(self.env.terminations.get(agent) or self.env.truncations.get(agent))

    def _observe_all(self, agents: list[str]) -> dict[str, Observation]:
        gained = getattr(self, "_gained", {})
        answered = {}
        for agent in agents:
            ended = bool(self.env.terminations.get(agent)) or agent not in self.env.agents
            cut = bool(self.env.truncations.get(agent)) and not ended
            answered[agent] = self._observe(
                agent,
                self.env.observe(agent),
                gained.get(agent, 0.0),
                ended or cut,
                cut,
                agent == self.env.agent_selection,
            )
        self._gained = {}
        return answered


ADAPTER = PettingZooGame
"""What ``pettingzoo:<id>`` names in entityrl's registry for a parallel environment (see
:func:`adapter_for`)."""
