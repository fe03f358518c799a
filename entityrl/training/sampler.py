"""Collecting rollouts: the current policy acting in a vectorized environment.

:class:`Sampler` steps all environments together in this process: compute actions, step,
repeat. :class:`WorkerSampler` works with environments in worker processes, each of which also
runs a copy of the policy, so that every core steps and infers at once. Its asynchronous
sibling, :class:`~entityrl.training.async_sampler.AsyncSampler` (``rollout.mode=async``),
collects the next rollout while the learner updates.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import torch

from entityrl.algorithms.common.rollout import Rollout
from entityrl.env.process_vec_env import ProcessVecEnv
from entityrl.env.vec_env import CUT_OFF_METRIC, SerialVecEnv, VecEnv
from entityrl.env.vec_obs import VecObs
from entityrl.nn.rogue_net import RogueNet
from entityrl.ragged import RaggedArray
from entityrl.training.agent import Agent


@dataclass
class _Transition:
    """One step of one group of environments: what the policy saw and did, and what followed."""

    obs: VecObs
    actions: dict[str, RaggedArray]
    logprobs: dict[str, RaggedArray]
    values: npt.NDArray[np.float32]
    reward: npt.NDArray[np.float32] | None = None
    done: npt.NDArray[np.bool_] | None = None
    # Per row, the value of the observation that ended a truncated episode (else 0), and
    # whether the row's episode was truncated.
    bootstrap: npt.NDArray[np.float32] | None = None
    cut: npt.NDArray[np.bool_] | None = None
    # With net.memory, per row, the state the policy acted from.
    state: npt.NDArray[np.float32] | None = None
    # In multi-player games, per row: whether its player was in play (acted); its group's
    # reward for the step; whether its game ended with the step.
    active: npt.NDArray[np.bool_] | None = None
    group_reward: npt.NDArray[np.float32] | None = None
    game_over: npt.NDArray[np.bool_] | None = None


# A step's transition and the episode metrics it reported.
_Step = tuple[_Transition, dict[str, npt.NDArray[np.float64]]]


def _run(agent: Agent, env: VecEnv, obs: VecObs, steps: int) -> tuple[list[_Step], VecObs]:
    """``steps`` steps of ``env`` from ``obs`` with ``agent``'s actions (and states); the steps
    and the observations after the last."""
    transitions = []
    for _ in range(steps):
        transition = _act(agent, obs)
        obs = env.act(transition.actions)
        transition.reward, transition.done = obs.reward, obs.done
        transition.bootstrap, transition.cut = _truncation_values(agent.net, obs, agent.state)
        transitions.append((transition, with_cut_offs(obs.metrics, obs, obs.done)))
        agent.end_episodes(obs.done)
    return transitions, obs


def _act(agent: Agent, obs: VecObs, rows: npt.NDArray[np.int64] | None = None) -> _Transition:
    """``agent``'s sampled actions for ``obs`` (its rows ``rows``, None: all): the step's
    transition so far, what the policy saw and did (the agent keeps the rows' new states)."""
    out = agent.act_on(obs, rows)
    actions = out.actions(obs)
    logprobs = {
        name: RaggedArray(head.logprob.numpy().reshape(-1, 1), actions[name].lengths)
        for name, head in out.heads.items()
    }
    transition = _Transition(obs, actions, logprobs, out.values.numpy())
    if agent.acted_from is not None:
        transition.state = agent.acted_from.numpy()
    return transition


def with_cut_offs(
    metrics: dict[str, npt.NDArray[np.float64]], obs: VecObs, ended: npt.NDArray[np.bool_]
) -> dict[str, npt.NDArray[np.float64]]:
    """A step's episode ``metrics`` plus :data:`CUT_OFF_METRIC` for the rows ``ended``
    (a mask), in their order, as the other episode metrics are."""
    if not ended.any():
        return metrics
    cut = np.zeros(int(ended.sum())) if obs.truncated is None else obs.truncated[ended]
    return {**metrics, CUT_OFF_METRIC: cut.astype(np.float64)}


def _truncation_values(
    net: RogueNet, obs: VecObs, state: torch.Tensor | None
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.bool_]]:
    """Per row, the value of the final observation of an episode cut off on this step (0 for
    rows that went on or ended by the task), and whether it was cut off; ``state``: the
    policy's, before the reset."""
    values = np.zeros(obs.num_rows, dtype=np.float32)
    if obs.truncated is None or obs.final is None:
        return values, np.zeros(obs.num_rows, dtype=np.bool_)
    final_state = None if state is None else state[torch.from_numpy(obs.truncated)]
    values[obs.truncated] = net.values(obs.final, final_state).numpy()
    return values, obs.truncated


class Sampler:
    """Steps ``env`` with ``net``'s sampled actions, ``steps`` steps per rollout.

    The network acts through an :class:`~entityrl.training.agent.Agent`, which draws the
    actions from ``generator`` (on the network's device; a new unseeded one if None) and
    keeps each environment's recurrent state (net.memory). The sampler keeps the
    environments' latest observation between rollouts, so consecutive rollouts continue the
    same episodes. With ``decisions`` (``env.decisions``), its rollouts learn from each row's
    decisions only (:attr:`Rollout.decisions`).
    """

    def __init__(
        self,
        env: VecEnv,
        net: RogueNet,
        steps: int,
        generator: torch.Generator | None = None,
        decisions: bool = False,
    ) -> None:
        self.env = env
        self.steps = steps
        self.decisions = decisions
        self.agent = Agent(net, generator=generator or _new_generator(net.device))
        self.obs: VecObs = env.reset()
        self.agent.state = net.initial_state(env.num_envs)

    @property
    def net(self) -> RogueNet:
        """The network the agent acts with (the learner's)."""
        return self.agent.net

    @property
    def state(self) -> torch.Tensor | None:
        """With net.memory, the state each environment's policy acts from next."""
        return self.agent.state

    @state.setter
    def state(self, value: torch.Tensor | None) -> None:
        self.agent.state = value

    def collect(self) -> Rollout:
        """The next ``steps`` steps of every environment (advantages not estimated yet: the
        algorithm decides the rewards they are estimated from)."""
        transitions, self.obs = _run(self.agent, self.env, self.obs, self.steps)
        return self._rollout([transitions], self.obs, self.state)

    def after_update(self) -> dict[str, float]:
        """Called once the learner has learned from the rollout :meth:`collect` returned:
        an asynchronous sampler takes in the one it collected meanwhile. The metrics to log
        (none here)."""
        return {}

    @property
    def num_rows(self) -> int:
        """Rows of each step of a rollout (the environments the learner acts in)."""
        return self.env.num_envs

    def learner_next(
        self, obs: VecObs, state: torch.Tensor | None
    ) -> tuple[VecObs, torch.Tensor | None]:
        """What follows a rollout's last step for the learner, from the environments' latest
        observation ``obs`` and the policy's ``state`` of them: all of them here (a sampler
        of games keeps the learner's seats)."""
        return obs, state

    def _rollout(
        self, groups: list[list[_Step]], next_obs: VecObs, next_state: torch.Tensor | None
    ) -> Rollout:
        """Assemble the steps of groups of environments (in environment order) into a
        Rollout whose rows are ordered (step, environment); ``next_obs`` (and the policy's
        ``next_state``) follow the last step."""
        steps = [[group[t][0] for group in groups] for t in range(self.steps)]
        parts: dict[str, list[npt.NDArray[np.float64]]] = {}
        for t in range(self.steps):
            for group in groups:
                for key, values in group[t][1].items():
                    parts.setdefault(key, []).append(values)
        flat = [t for step in steps for t in step]
        values = np.stack([np.concatenate([t.values for t in step]) for step in steps])
        rewards = np.stack([np.concatenate([t.reward for t in step]) for step in steps])  # type: ignore[misc]
        dones = np.stack([np.concatenate([t.done for t in step]) for step in steps])  # type: ignore[misc]
        bootstrap = np.stack([np.concatenate([t.bootstrap for t in step]) for step in steps])  # type: ignore[misc]
        next_values = self.net.values(next_obs, next_state).numpy()

        def stacked(field: str) -> npt.NDArray[Any] | None:
            """(steps, envs) of a per-row field that only some environments give."""
            if getattr(flat[0], field) is None:
                return None
            return np.stack([np.concatenate([getattr(t, field) for t in step]) for step in steps])

        names = list(self.env.action_space)
        return Rollout(
            obs=VecObs.concat([t.obs for t in flat], self.env.choices),
            actions={n: RaggedArray.concat([t.actions[n] for t in flat]) for n in names},
            logprobs={n: RaggedArray.concat([t.logprobs[n] for t in flat]) for n in names},
            values=values.reshape(-1),
            rewards=rewards,
            dones=dones,
            bootstrap=bootstrap,
            next_obs=next_obs,
            next_values=next_values,
            metrics={key: np.concatenate(values) for key, values in parts.items()},
            states=None if next_state is None else np.concatenate([t.state for t in flat]),  # type: ignore[misc]
            cut=stacked("cut"),
            active=stacked("active"),
            group_rewards=stacked("group_reward"),
            game_over=stacked("game_over"),
            decisions=self.decisions,
        )


class WorkerSampler(Sampler):
    """A sampler for environments in worker processes where the workers also run the policy.

    Every worker holds a copy of the network; at the start of each rollout it receives the
    current parameters (and input statistics) and a seed, then steps its environments with
    its own sampled actions for the whole rollout, and sends back its transitions. The
    processes exchange one message per worker per rollout instead of two per step, and all
    cores step and infer at once (rlpyt's parallel CPU sampler). The rollout has exactly the
    layout of :class:`Sampler`'s; the actions are drawn from each worker's own generator,
    seeded from ``rng``, so a run is as reproducible as with the other samplers.
    """

    env: ProcessVecEnv
    # What each worker runs for a rollout, given the arguments of :meth:`_requests`.
    _work: ClassVar[Callable[..., Any]]

    def __init__(
        self,
        env: ProcessVecEnv,
        net: RogueNet,
        steps: int,
        rng: np.random.Generator,
        decisions: bool = False,
        **sampler: Any,
    ) -> None:
        if net.device.type != "cpu":
            raise ValueError(
                f"WorkerSampler runs the policy in CPU worker processes; the network is on "
                f"{net.device} (use Sampler: the environments still step in their processes)"
            )
        super().__init__(env, net, steps, decisions=decisions, **sampler)
        self.rng = rng
        # Pickled here, by value: sent as tensors, the parameters would be moved into shared
        # memory, and each worker's copy would alias the trainer's.
        policy = pickle.dumps(net)
        env.call(_install_policy, [(policy,)] * env.num_workers)

    def collect(self) -> Rollout:
        return self._adopt(self.env.call(self._work, self._requests()))

    def _requests(self) -> list[tuple[Any, ...]]:
        """Per worker, the arguments of :func:`_worker_rollout`: the current parameters, the
        state of its environments' policy and a seed."""
        # As numpy arrays: torch tensors would cross the pipe through shared-memory files.
        params = {name: value.numpy() for name, value in self.net.state_dict().items()}
        seeds = self.rng.integers(2**63, size=self.env.num_workers)
        bounds = self.env.bounds
        states = [
            None if self.state is None else self.state[bounds[k] : bounds[k + 1]].numpy()
            for k in range(self.env.num_workers)
        ]
        return [(params, state, self.steps, int(s)) for state, s in zip(states, seeds, strict=True)]

    def _adopt(
        self, parts: list[tuple[list[_Step], VecObs, npt.NDArray[np.float32] | None]]
    ) -> Rollout:
        """The rollout of the workers' answers to :meth:`_requests`; their environments'
        latest observations (and policy states) become the sampler's."""
        self.obs = self.env.assemble([latest for _, latest, _ in parts])
        if self.state is not None:
            self.state = torch.cat([torch.from_numpy(state) for _, _, state in parts])
        groups = [transitions for transitions, _, _ in parts]
        return self._rollout(groups, *self.learner_next(self.obs, self.state))


def _install_policy(envs: SerialVecEnv, context: dict[str, Any], policy: bytes) -> None:
    """In a worker: keep the pickled network ``policy`` for the rollouts to come."""
    # One core per worker: the workers run at once.
    torch.set_num_threads(1)
    context["net"] = pickle.loads(policy)


def _worker_rollout(
    envs: SerialVecEnv,
    context: dict[str, Any],
    params: dict[str, npt.NDArray[Any]],
    state: npt.NDArray[np.float32] | None,
    steps: int,
    seed: int,
) -> tuple[list[_Step], VecObs, npt.NDArray[np.float32] | None]:
    """In a worker: ``steps`` steps of its environments with the policy of ``params``, from
    the policy's ``state`` of its environments (net.memory)."""
    agent = _worker_agent(context, params, state, seed)
    transitions, latest = _run(agent, envs, envs.observation, steps)
    # As numpy, like everything else sent back (see WorkerSampler.collect).
    return transitions, latest, None if agent.state is None else agent.state.numpy()


def _worker_agent(
    context: dict[str, Any],
    params: dict[str, npt.NDArray[Any]],
    state: npt.NDArray[np.float32] | None,
    seed: int,
) -> Agent:
    """In a worker: the installed policy with ``params``, acting from ``state`` (net.memory)
    with actions drawn from a generator seeded with ``seed``."""
    net: RogueNet = context["net"]
    # Copied (torch.tensor), not wrapped: Ray hands a worker read-only arrays, which
    # torch.from_numpy would wrap with a warning.
    net.load_state_dict({name: torch.tensor(value) for name, value in params.items()})
    generator = torch.Generator()
    generator.manual_seed(seed)
    agent = Agent(net, generator=generator)
    agent.state = None if state is None else torch.tensor(state)
    return agent


WorkerSampler._work = staticmethod(_worker_rollout)


def _new_generator(device: torch.device) -> torch.Generator:
    generator = torch.Generator(device)
    generator.seed()
    return generator


def make_sampler(
    env: VecEnv,
    net: RogueNet,
    steps: int,
    rng: np.random.Generator,
    generator: torch.Generator | None = None,
    decisions: bool = False,
) -> Sampler:
    """A :class:`WorkerSampler` for environments in worker processes when the policy runs on
    the CPU (each worker runs a copy of it, its actions drawn from a generator seeded from
    ``rng``), a :class:`~entityrl.training.player_sampler.PlayerSampler` for multi-player games
    (the policy plays every seat), else a :class:`Sampler` drawing from ``generator`` (on another device the
    training process runs the policy for all environments, which still step in their worker
    processes)."""
    from entityrl.env.multiplayer_vec import MultiPlayerVecEnv
    from entityrl.training.player_sampler import PlayerSampler

    if isinstance(env, MultiPlayerVecEnv):
        return PlayerSampler(env, net, steps, generator, decisions=decisions)
    if isinstance(env, ProcessVecEnv) and net.device.type == "cpu":
        return WorkerSampler(env, net, steps, rng, decisions)
    return Sampler(env, net, steps, generator, decisions)
