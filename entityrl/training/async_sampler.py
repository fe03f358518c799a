"""Asynchronous sampling (``rollout.mode=async``): the worker processes collect the next
rollout while the learner learns from the last one.

How. :class:`AsyncSampler` is a :class:`~entityrl.training.sampler.WorkerSampler` (each
worker runs a copy of the policy on its environments for a whole rollout) whose request for
the next rollout leaves before the learner's update and whose answer is taken in after it
(:meth:`~entityrl.env.process_vec_env.ProcessVecEnv.start_call` / ``finish_call``). The
rollouts are double-buffered: while the learner reads one, the workers fill the next in
their own memory and send it back in one message each, as in sync mode. The learner waits
only for what sampling takes beyond its update (``perf/wait_seconds``; assembling and
correcting the rollout it then receives: ``perf/correct_seconds``); with slow
simulators (``env.id=Slow``) the waiting of many workers overlaps and the update hides in it.

Policy lag. The learner's version counts its updates. A rollout is collected with the
parameters the learner sends when the rollout is requested, so every rollout but the first is
one update old when learned from (``async/policy_lag`` = 1; the first, collected before any
update, 0). The lag is fixed, not a matter of timing, so a run is reproducible from its seed;
it is *not* bit-exact on resume (see below).

Correction: V-trace (IMPALA), rather than APPO-style clipping of the learner-to-acting-policy
ratio. Clipping that ratio is what PPO's surrogate does when it is given the acting policy's
log-probabilities: every step whose ratio the lag has already pushed outside
[1 - clip, 1 + clip] then gives no gradient, so the lag eats the update's trust region (on
CherryPick, seed 1, such a variant ended at a return of 0.874, this design at 0.918; see
benchmarks/RESULTS.md). Instead the learner evaluates each rollout it receives once (its
log-probabilities of the actions taken and its values), and the rollout is handed to the
algorithm as if the learner had acted: PPO's ratios start at 1 and it clips around the
learner's policy, as in sync mode. What the lag changed goes into the advantages: V-trace's
importance ratios, truncated at 1 (which bounds their variance), weigh each step's error and
the trace through it, giving the value targets, and each step's policy gradient is weighted
by its own ratio, as in IMPALA. With ratios of 1 it is exactly GAE, so the first rollout and
sync mode are unchanged. A row's ratio is the product over its actors of the learner's to the
acting policy's probability (``async/truncated``: the fraction of rows cut at 1;
``async/abs_log_ratio``: their mean |log ratio|). :mod:`entityrl.algorithms.common.gae`
holds the estimate (``Rollout.ratios``), used by any algorithm that calls
``Rollout.estimate_advantages``; PPO needed no change.

Memory (``net.memory``). Each worker carries its environments' recurrent states across
rollouts: the final states come back with a rollout, and the request for the next leaves
right after, with them (as in sync mode). The rollout stores the state the acting policy
acted from at every step; the learner's evaluation replays each environment's whole rollout
as one sequence from the state stored at its first step, reset after every step that ended an
episode (as the update replays its chunks: :meth:`Rollout.sequences`), in batches of whole
environments, and values the observation after the last step from the states its replay ends
in. With unchanged parameters it gives exactly the acting policy's log-probabilities.

Decisions (``env.decisions``). A row without a decision has no actors, so its ratio is 1;
the advantages run over each row's decisions with the decisions' ratios
(:func:`~entityrl.algorithms.common.gae.decision_gae`).

Multi-player games (self-play, MA-POCA, independent learners): the workers own whole games and
play every seat, :mod:`entityrl.training.async_games`.

Checkpoints are written between iterations, when no rollout is in flight. The one received
after the last update is not in the checkpoint: a resumed run continues the environments from
where that rollout left them and collects its next rollout afresh, so it is not
bit-reproducible (a warning says so when the sampler starts).
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from entityrl.algorithms.common.rollout import Rollout
from entityrl.env.multiplayer import MultiPlayerEnvironment
from entityrl.env.process_vec_env import ProcessVecEnv
from entityrl.env.vec_env import VecEnv
from entityrl.nn.recurrent import fresh_episodes
from entityrl.nn.rogue_net import RogueNet
from entityrl.ragged import RaggedArray
from entityrl.training.config import ConfigError, TrainConfig
from entityrl.training.sampler import WorkerSampler


class NotReproducibleWarning(UserWarning):
    """An asynchronous run resumed from a checkpoint does not repeat the original bit for bit."""


def check_async(config: TrainConfig, algorithm: type) -> None:
    """Refuse, in one line naming it, what ``rollout.mode=async`` does not support."""
    if config.rollout.mode != "async":
        return
    from entityrl.algorithms.on_policy import OnPolicyAlgorithm
    from entityrl.algorithms.poca.algorithm import POCA
    from entityrl.algorithms.self_play.algorithm import SelfPlay

    game = _is_multiplayer(config.env.id) or issubclass(algorithm, (SelfPlay, POCA))
    unsupported = None
    if not (
        issubclass(algorithm, OnPolicyAlgorithm)
        and algorithm.make_sampler in (OnPolicyAlgorithm.make_sampler, SelfPlay.make_sampler)
    ):
        unsupported = (
            f"algo={config.algo} (only on-policy algorithms that sample with the standard "
            "sampler: ppo, selfplay, poca or your own subclass of PPO)"
        )
    elif config.world_size > 1:
        unsupported = f"world_size={config.world_size} (one training process only)"
    elif config.rollout.processes < 2:
        unsupported = (
            f"rollout.processes={config.rollout.processes} (the environments step in worker "
            "processes: set rollout.processes >= 2)"
        )
    elif game:
        unsupported = _unsupported_in_games(config, algorithm)
    if unsupported is not None:
        raise refusal(unsupported)


def refusal(unsupported: str) -> ConfigError:
    """The one-line error for what ``rollout.mode=async`` does not support."""
    return ConfigError(f"rollout.mode=async does not support {unsupported}; use rollout.mode=sync")


def _unsupported_in_games(config: TrainConfig, algorithm: type) -> str | None:
    """What async sampling of a multi-player game (:mod:`entityrl.training.async_games`) does
    not support, if ``config`` asks for it."""
    from entityrl.algorithms.self_play.algorithm import SelfPlay

    game = f"a multi-player game ({config.env.id or 'the given game'})"
    if config.env.decisions.enabled:
        return f"env.decisions in {game}"
    if issubclass(algorithm, SelfPlay) and config.selfplay.mode == "magnet":
        return "selfplay.mode=magnet (the learner in every seat: use selfplay.mode=pool)"
    return None


def _is_multiplayer(env_id: str) -> bool:
    from entityrl.envs import lookup

    try:
        cls = lookup(env_id)
    except KeyError:  # an unknown name is reported where the environment is built
        return False
    return isinstance(cls, type) and issubclass(cls, MultiPlayerEnvironment)


class AsyncSampler(WorkerSampler):
    """Collects the next rollout in the workers while the learner learns from the last.

    :meth:`collect` returns the rollout received after the previous update (the first time,
    one collected there and then) and sends the current parameters for the next;
    :meth:`after_update` (after the learner's update) takes that one in and prepares its
    correction, evaluating it in batches of ``eval_rows`` rows (with ``net.memory``, of as
    many whole environments as fit in them, at least one). ``decisions``: as for
    :class:`~entityrl.training.sampler.Sampler`.
    """

    env: ProcessVecEnv

    def __init__(
        self,
        env: VecEnv,
        net: RogueNet,
        steps: int,
        rng: np.random.Generator,
        eval_rows: int,
        decisions: bool = False,
        **sampler: Any,
    ) -> None:
        if not isinstance(env, ProcessVecEnv):
            raise ConfigError(
                "rollout.mode=async needs environments in worker processes (a ProcessVecEnv, "
                f"rollout.processes >= 2); got a {type(env).__name__}"
            )
        if net.device.type != "cpu":
            raise ConfigError(
                "rollout.mode=async runs the policy in CPU worker processes; the network is "
                f"on {net.device}: set device=cpu"
            )
        super().__init__(env, net, steps, rng, decisions, **sampler)
        self.eval_rows = eval_rows
        self.version = 0
        """Updates the learner has made."""
        self._sent_version = 0  # the learner's version when the rollout in flight was requested
        self._next: Rollout | None = None  # received, learned from in the coming iteration
        self._next_metrics: dict[str, float] = {}
        self._metrics: dict[str, float] = {}  # of the rollout being learned from
        warnings.warn(
            "rollout.mode=async: the workers collect the next rollout while the learner "
            "updates; a run resumed from a checkpoint is not bit-reproducible (the rollout "
            "in flight is not saved)",
            NotReproducibleWarning,
            stacklevel=2,
        )

    def collect(self) -> Rollout:
        if self._next is None:
            rollout, self._metrics = super().collect(), {"async/policy_lag": 0.0}
        else:
            rollout, self._metrics = self._next, self._next_metrics
            self._next = None
        self.env.start_call(self._work, self._requests())
        self._sent_version = self.version
        return rollout

    def after_update(self) -> dict[str, float]:
        self.version += 1
        started = time.perf_counter()
        parts = self.env.finish_call()
        received = time.perf_counter()
        self._next = self._adopt(parts)
        self._next_metrics = self._correct(self._next, self.version - self._sent_version)
        return {
            **self._metrics,
            "perf/wait_seconds": received - started,
            "perf/correct_seconds": time.perf_counter() - received,
        }

    def _correct(self, rollout: Rollout, lag: int) -> dict[str, float]:
        """Make ``rollout`` the learner's to learn from (see the module's docstring): its
        log-probabilities and values, and the truncated importance ratios of its rows; the
        metrics of the lag."""
        logprobs, values, next_values = self._learner_view(rollout)
        log_ratio = np.zeros(rollout.num_rows)
        for name, acted in rollout.logprobs.items():
            log_ratio += np.bincount(
                acted.row_index(),
                weights=logprobs[name].data[:, 0] - acted.data[:, 0],
                minlength=rollout.num_rows,
            )
        steps, envs = rollout.dones.shape
        rollout.ratios = np.minimum(np.exp(log_ratio), 1.0).astype(np.float32).reshape(steps, envs)
        rollout.logprobs, rollout.values = logprobs, values
        if next_values is not None:
            rollout.next_values = next_values
        return {
            "async/policy_lag": float(lag),
            "async/truncated": float(np.mean(log_ratio > 0)),
            "async/abs_log_ratio": float(np.mean(np.abs(log_ratio))),
        }

    def _learner_view(
        self, rollout: Rollout
    ) -> tuple[dict[str, RaggedArray], npt.NDArray[np.float32], npt.NDArray[np.float32] | None]:
        """The learner's log-probabilities of ``rollout``'s actions (laid out like its own)
        and its values of the rollout's rows; with net.memory also its values of the
        observation after the last step, from the states its replay ends in (else None)."""
        steps, envs = rollout.dones.shape
        batches = self._batches(rollout)
        parts: dict[str, list[npt.NDArray[np.float32]]] = {name: [] for name in rollout.logprobs}
        values = np.empty(rollout.num_rows, dtype=np.float32)
        final = None if rollout.states is None else torch.empty(envs, rollout.states.shape[1])
        with torch.inference_mode():
            for rows in batches:
                actions = {name: a.take(rows) for name, a in rollout.actions.items()}
                sequences = rollout.sequences(rows, steps)
                out = self.net.evaluate(rollout.obs.take(rows), actions, sequences)
                values[rows] = out.values.numpy()
                for name, head in out.heads.items():
                    parts[name].append(head.logprob.numpy())
                if final is not None and out.state is not None:
                    # Each environment's last step closes its sequence of ``steps`` rows.
                    last = rows[steps - 1 :: steps] % envs
                    final[torch.from_numpy(last)] = out.state[steps - 1 :: steps]
            next_values = (
                None
                if final is None
                else self.net.values(rollout.next_obs, fresh_episodes(final, rollout.dones[-1]))
            )
        # The batches' rows in the rollout's order.
        order = np.concatenate(batches)
        back = np.argsort(order)
        logprobs = {}
        for (name, chunks), acted in zip(parts.items(), rollout.logprobs.values(), strict=True):
            batched = RaggedArray(np.concatenate(chunks).reshape(-1, 1), acted.lengths[order])
            logprobs[name] = batched.take(back)
        return logprobs, values, None if next_values is None else next_values.numpy()

    def _batches(self, rollout: Rollout) -> list[npt.NDArray[np.int64]]:
        """The rows of ``rollout`` in batches of at most ``eval_rows``: consecutive rows, or
        with stored states whole environments (:meth:`Rollout.environment_rows`; at least
        one per batch)."""
        if rollout.states is None:
            return [
                np.arange(start, min(start + self.eval_rows, rollout.num_rows))
                for start in range(0, rollout.num_rows, self.eval_rows)
            ]
        steps, envs = rollout.dones.shape
        per_batch = max(1, self.eval_rows // steps)
        return [
            rollout.environment_rows(np.arange(start, min(start + per_batch, envs)))
            for start in range(0, envs, per_batch)
        ]
