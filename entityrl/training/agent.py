"""Trained agents: load one from a checkpoint, let it act, build its environment, evaluate it.

``load_agent("runs/CherryPick-...")`` rebuilds the network a run trained, with the spaces and
network config saved in its checkpoint. The agent acts on any :class:`~entityrl.env.VecObs`
of an environment with the same spaces; :func:`make_eval_env` builds that environment from the
run's config, and :func:`evaluate` plays complete episodes with it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt
import torch

from entityrl.env.decisions import deciding
from entityrl.env.space_data import space_differences
from entityrl.env.spaces import ActionSpace, ObsSpace
from entityrl.env.stacking import stacking
from entityrl.env.vec_env import EnvFactory, SerialVecEnv, VecEnv
from entityrl.env.vec_obs import VecObs
from entityrl.nn.device import resolve_device
from entityrl.nn.recurrent import fresh_episodes
from entityrl.nn.rogue_net import PolicyOutput, RogueNet
from entityrl.ragged import RaggedArray
from entityrl.training.checkpoint import (
    CheckpointError,
    load_checkpoint,
    resolve,
    spaces_from_data,
)
from entityrl.training.config import ConfigError, TrainConfig, from_dict
from entityrl.training.threads import INFERENCE_THREADS, using_threads

DEFAULT_MAX_EPISODE_STEPS = 100_000
"""The longest episode :func:`evaluate` waits for by default."""


class Policy(Protocol):
    """Anything that chooses actions for a batch of observations: an :class:`Agent`, a
    :class:`~entityrl.env.RandomPolicy`, or a scripted policy."""

    def act(self, obs: VecObs) -> dict[str, RaggedArray]: ...


class AgentError(ValueError):
    """A trained agent cannot be used as asked: its environment is unknown, differs from the
    one it was trained on, or never ends an episode under it."""


class Agent:
    """The one object that acts with a RogueNet policy: it owns the network (and so the
    device), the acting mode (sampled actions, or with ``deterministic`` the most probable
    choice of every actor), the random generator samples are drawn from, and with
    ``net.memory`` the recurrent state of every row it acts for.

    The trainer's sampler, evaluation, matches (through
    :class:`~entityrl.training.players.NetworkPlayer`), ``entityrl play`` and export act
    through an Agent. :meth:`act` is the plain use: actions in the form a
    :class:`~entityrl.env.VecEnv` takes, each row's state carried from one call to the next and
    started afresh where ``obs.done`` says a new episode begins. A sampler uses
    :meth:`act_on` (outputs with log-probabilities and values, for a subset of the rows, no
    implicit reset) and says where episodes end with :meth:`end_episodes`. Sampling draws from
    the agent's own generator on its device (see :meth:`seed`, or pass ``generator``), so it
    neither disturbs nor depends on torch's global one.

    A trained agent (:func:`load_agent`) also knows its run's ``config``, how many
    environment steps it was trained for (``step``) and its checkpoint (``path``).
    """

    def __init__(
        self,
        net: RogueNet,
        config: TrainConfig | None = None,
        *,
        step: int = 0,
        path: Path | None = None,
        deterministic: bool = False,
        seed: int | None = None,
        generator: torch.Generator | None = None,
    ) -> None:
        self.net = net
        self.config = config
        self.step = step
        self.path = path
        self.deterministic = deterministic
        if generator is None:
            self.seed(seed)
        else:
            self.generator = generator
        # With net.memory: each row's state, carried from one call to the next.
        self.state: torch.Tensor | None = None
        # The states the rows of the last act_on call acted from.
        self.acted_from: torch.Tensor | None = None
        # Multi-player games: the rows whose seat was out of play at the last act call.
        self.out_of_play: npt.NDArray[np.bool_] | None = None

    @property
    def obs_space(self) -> ObsSpace:
        return self.net.obs_space

    @property
    def action_space(self) -> dict[str, ActionSpace]:
        return self.net.action_space

    def seed(self, seed: int | None) -> None:
        """Make the sampled actions reproducible (None: seed from the operating system)."""
        self.generator = torch.Generator(self.net.device)
        if seed is None:
            self.generator.seed()
        else:
            self.generator.manual_seed(seed)

    def decide(self, obs: VecObs, state: torch.Tensor | None) -> PolicyOutput:
        """The policy's output for ``obs`` from the rows' ``state`` (None: fresh episodes),
        keeping nothing: what a player whose states are kept elsewhere calls."""
        return self.net.act(
            obs, deterministic=self.deterministic, generator=self.generator, state=state
        )

    def act(self, obs: VecObs) -> dict[str, RaggedArray]:
        """One action per actor of every row of ``obs``, for every action of the space; each
        row's state goes on from the last call, afresh where ``obs.done`` (and for all rows
        when ``obs`` has another number of rows than the last call: other environments)."""
        unknown = sorted(set(obs.action_masks) ^ set(self.action_space))
        if unknown:
            raise AgentError(
                f"the observation's actions {sorted(obs.action_masks)} differ from the agent's "
                f"{sorted(self.action_space)} (in one but not the other: {unknown})"
            )
        if self.state is not None and self.state.shape[0] != obs.num_rows:
            self.state, self.out_of_play = None, None
        # In a multi-player game a row's episode also starts after a step its seat was out of
        # play (its game restarting, or its player joining).
        ended = obs.done if self.out_of_play is None else obs.done | self.out_of_play
        self.end_episodes(ended)
        actions = self.act_on(obs).actions(obs)
        self.out_of_play = None if obs.active is None else ~obs.active
        return actions

    def act_on(self, obs: VecObs, rows: npt.NDArray[np.int64] | None = None) -> PolicyOutput:
        """The policy's output for ``obs``, which holds the agent's rows ``rows`` (None: all
        of them, in order), from their states; their new states are kept. No row is reset
        here (see :meth:`end_episodes`)."""
        state = self.state
        if state is None and rows is None:
            state = self.net.initial_state(obs.num_rows)
        if state is None and self.net.memory is not None:
            raise AgentError(
                "act_on for some rows needs the state of every row: set agent.state first "
                "(net.initial_state(rows))"
            )
        acted_from = state if rows is None or state is None else state[torch.from_numpy(rows)]
        out = self.decide(obs, acted_from)
        self.acted_from = acted_from
        if state is not None and out.state is not None:
            self.state = (
                out.state if rows is None else state.index_put((torch.from_numpy(rows),), out.state)
            )
        return out

    def end_episodes(self, ended: npt.NDArray[np.bool_]) -> None:
        """The rows whose episodes ended (``ended``, one flag per row) start afresh."""
        if self.state is not None:
            self.state = fresh_episodes(self.state, ended)

    def reset(self) -> None:
        """Forget the rows' states (net.memory): the next observation starts new episodes."""
        self.state, self.out_of_play = None, None

    def check_env(self, env: VecEnv) -> None:
        """Raise :class:`AgentError` naming every difference between the spaces the agent was
        trained on and ``env``'s."""
        differences = space_differences(
            (self.obs_space, self.action_space), (env.obs_space, env.action_space)
        )
        if differences:
            raise AgentError(
                f"the environment does not match the agent trained on {self._env_name()}: "
                + "; ".join(differences)
            )

    def __repr__(self) -> str:
        where = f" from {self.path}" if self.path else ""
        return f"<Agent for {self._env_name()}, trained {self.step:,} steps{where}>"

    def _env_name(self) -> str:
        return "an unnamed environment" if self.config is None else self.config.env.id


def load_agent(
    path: str | Path,
    *,
    device: str = "cpu",
    deterministic: bool = False,
    seed: int | None = None,
) -> Agent:
    """The agent of a checkpoint file or run directory, on ``device`` (any device, whichever
    the run trained on; see :func:`~entityrl.nn.device.resolve_device`).

    Raises :class:`~entityrl.training.checkpoint.CheckpointError` (one line, naming the file)
    when the checkpoint is missing, corrupt, not an entityrl checkpoint, or inconsistent.
    """
    file = resolve(path)
    saved = load_checkpoint(file)
    try:
        # The environment may be a custom class that is not registered here: do not look it up.
        config = from_dict(saved["config"], check_env=False, require_algorithm=False)
    except ConfigError as err:
        raise CheckpointError(f"{file}: its config does not fit this entityrl: {err}") from None
    try:
        obs_space, action_space = spaces_from_data(saved["spaces"])
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise CheckpointError(f"{file}: its record of the spaces is malformed ({err!r})") from None
    # Initial weights are drawn and then overwritten: keep torch's global generator untouched.
    with torch.random.fork_rng(devices=()):
        net = RogueNet(obs_space, action_space, config.net, device=resolve_device(device))
    try:
        net.load_state_dict(saved["model"])
    except (RuntimeError, TypeError, AttributeError) as err:
        # torch lists every mismatch under a generic heading; the first one says enough.
        lines = str(err).strip().splitlines()
        reason = lines[1].strip() if len(lines) > 1 else lines[0]
        raise CheckpointError(
            f"{file}: its weights do not fit the network its config and spaces describe: {reason}"
        ) from None
    return Agent(
        net,
        config,
        step=int(saved["step"]),
        path=file,
        deterministic=deterministic,
        seed=seed,
    )


# ---------------------------------------------------------------------------- environments
def make_eval_env(
    agent: Agent, num_envs: int = 1, seed: int = 0, env: EnvFactory | None = None
) -> VecEnv:
    """``num_envs`` copies of the agent's environment, seeded with ``seed``.

    Registered environments, and custom ones named by import path (``module:Class``), are built
    from the run's config (name and constructor arguments). A run on another custom environment
    needs it passed as ``env`` (its class or a zero-argument factory). Raises
    :class:`AgentError` if the environment cannot be built or its spaces differ from the
    agent's.
    """
    from entityrl.envs import REGISTRY, make_vec

    env_config = agent.config.env
    # The agent decides at the times it was trained to.
    decisions = env_config.decisions if env_config.decisions.enabled else None
    if env is not None:
        if decisions is not None:
            env = functools.partial(deciding, env, decisions)
        vec_env: VecEnv = SerialVecEnv(env, num_envs, seed)
    elif env_config.id not in REGISTRY and ":" not in env_config.id:
        raise AgentError(
            f"the agent was trained on {env_config.id!r}, which is not a registered "
            f"environment: pass the environment from Python (make_eval_env(agent, "
            f"env={env_config.id})), or register it first "
            f"(entityrl.envs.register({env_config.id!r}, {env_config.id}))"
        )
    else:
        try:
            vec_env = make_vec(
                env_config.id, num_envs, seed=seed, decisions=decisions, **env_config.kwargs
            )
        except KeyError as err:  # a "module:Class" path that does not import here
            raise AgentError(f"cannot build the agent's environment: {err.args[0]}") from None
        except (TypeError, ValueError) as err:
            raise AgentError(
                f"cannot build {env_config.id} with the run's arguments {env_config.kwargs}: {err}"
            ) from None
    wrap = stacking(env_config.stack)
    if wrap is not None:  # the agent saw stacked observations in training
        vec_env = wrap(vec_env)
    try:
        agent.check_env(vec_env)
    except AgentError:
        vec_env.close()
        raise
    return vec_env


# ---------------------------------------------------------------------------- evaluation
@dataclass
class Evaluation:
    """The metrics of the evaluated episodes: per metric, one value per episode that reported
    it (``episode_return``, ``episode_length`` and the environment's own metrics)."""

    episodes: int
    metrics: dict[str, npt.NDArray[np.float64]]

    @property
    def returns(self) -> npt.NDArray[np.float64]:
        return self.metrics["episode_return"]

    def mean(self, name: str = "episode_return") -> float:
        return float(np.mean(self.metrics[name]))

    def std(self, name: str = "episode_return") -> float:
        return float(np.std(self.metrics[name]))


def evaluate(
    agent: Policy,
    env: VecEnv,
    episodes: int,
    max_steps: int = DEFAULT_MAX_EPISODE_STEPS,
    threads: int | None = INFERENCE_THREADS,
) -> Evaluation:
    """Let ``agent`` (a trained :class:`Agent` or any other :class:`Policy`) play ``episodes``
    complete episodes in ``env`` (reset first), with ``threads`` torch threads (None: as torch
    is set; the count is restored afterwards).

    Environment ``i`` contributes its first ``episodes // num_envs`` episodes (one more for the
    first ``episodes % num_envs``), so short episodes are not over-represented: the result is
    the same as playing each environment's share one after the other. An episode still needed
    that lasts more than ``max_steps`` steps raises :class:`AgentError`: the environment may
    never end it under this agent.
    """
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    if max_steps < 1:
        raise ValueError(f"max_steps must be >= 1, got {max_steps}")
    if isinstance(agent, Agent):
        agent.check_env(env)
        agent.reset()  # the environments start new episodes: so does the agent's memory
    with using_threads(threads):
        return _play(agent, env, episodes, max_steps)


def _play(agent: Policy, env: VecEnv, episodes: int, max_steps: int) -> Evaluation:
    """:func:`evaluate`'s episodes."""
    quota = np.full(env.num_envs, episodes // env.num_envs)
    quota[: episodes % env.num_envs] += 1
    counted = np.zeros(env.num_envs, dtype=np.int64)
    lengths = np.zeros(env.num_envs, dtype=np.int64)  # of each environment's current episode
    collected: dict[str, list[npt.NDArray[np.float64]]] = {}
    obs = env.reset()
    while (counted < quota).any():
        obs = env.act(agent.act(obs))
        # In a multi-player game the agent plays every seat, and an episode is a whole game.
        done = obs.done if obs.game_over is None else obs.game_over
        lengths += 1
        lengths[done] = 0
        _check_episode_lengths(lengths, counted < quota, max_steps)
        ended = np.flatnonzero(done)
        if not ended.size:
            continue
        keep = counted[ended] < quota[ended]
        counted[ended] += 1
        for name, values in obs.metrics.items():
            if values.shape[0] == ended.shape[0]:
                collected.setdefault(name, []).append(values[keep])
            elif keep.all():
                # A metric only some of the ended episodes reported cannot be matched to its
                # environments; it is kept only when every episode of this step counts.
                collected.setdefault(name, []).append(values)
    return Evaluation(episodes, {name: np.concatenate(v) for name, v in collected.items()})


def _check_episode_lengths(
    lengths: npt.NDArray[np.int64], needed: npt.NDArray[np.bool_], max_steps: int
) -> None:
    """Raise if an environment whose episode is still ``needed`` has played ``max_steps``
    steps of it without an end."""
    stuck = np.flatnonzero(needed & (lengths >= max_steps))
    if stuck.size:
        raise AgentError(
            f"the episode of environment {stuck[0]} has not ended after {max_steps:,} steps "
            "(max_steps): under this agent its episodes may never end. Give the environment "
            "a step limit, or allow longer episodes with a larger max_steps"
        )


__all__ = [
    "Agent",
    "AgentError",
    "Evaluation",
    "Policy",
    "evaluate",
    "load_agent",
    "make_eval_env",
    "space_differences",
]
