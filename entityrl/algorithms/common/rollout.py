"""The samples of one rollout, stored ragged: rows are (step, env), entities and actors ragged."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import torch

from entityrl.algorithms.common.gae import decision_gae, gae
from entityrl.env.vec_obs import VecObs
from entityrl.nn.recurrent import Sequences
from entityrl.ragged import RaggedArray


@dataclass
class Minibatch:
    """Some rows of a rollout, ready for the loss (per-actor data ragged like the actions)."""

    obs: VecObs
    actions: dict[str, RaggedArray]
    logprobs: dict[str, torch.Tensor]  # per action, one old log-probability per actor
    actor_rows: dict[str, torch.Tensor]  # per action, the minibatch row of each actor
    values: torch.Tensor  # (rows,) value estimates at collection time
    advantages: torch.Tensor  # (rows,)
    returns: torch.Tensor  # (rows,)
    # With net.memory: the rows are whole chunks of consecutive steps (see Rollout.minibatch).
    sequences: Sequences | None = None
    # (rows,) with net.memory, when some rows of the chunks are no samples (steps without a
    # decision, players that had left): 1 for a sample, 0 for a row there only to carry the
    # policy's state to the next; None when every row is a sample.
    weights: torch.Tensor | None = None

    @property
    def num_rows(self) -> int:
        return self.obs.num_rows

    def to(self, device: torch.device) -> Minibatch:
        """The loss's tensors on ``device`` (the observations and actions stay numpy: the
        network prepares and moves them itself)."""
        if device.type == "cpu":
            return self
        return Minibatch(
            obs=self.obs,
            actions=self.actions,
            logprobs={name: lp.to(device) for name, lp in self.logprobs.items()},
            actor_rows={name: rows.to(device) for name, rows in self.actor_rows.items()},
            values=self.values.to(device),
            advantages=self.advantages.to(device),
            returns=self.returns.to(device),
            sequences=self.sequences,  # the network moves them
            weights=None if self.weights is None else self.weights.to(device),
        )


@dataclass
class Rollout:
    """Everything collected in one rollout; row ``t * num_envs + e`` is env ``e`` at step ``t``.

    The sampler fills in what happened; the algorithm then chooses the rewards to learn from
    (the environment's, scaled, with a bonus, or a learned one) and calls
    :meth:`estimate_advantages` before taking minibatches.
    """

    obs: VecObs
    actions: dict[str, RaggedArray]
    logprobs: dict[str, RaggedArray]  # float32, one per actor, laid out like ``actions``
    values: npt.NDArray[np.float32]  # (rows,)
    rewards: npt.NDArray[np.float32]  # (steps, envs): the environment's
    dones: npt.NDArray[np.bool_]  # (steps, envs): the episode ended with this step
    # (steps, envs): the value of the final observation of an episode cut off (truncated) on
    # this step, else 0.
    bootstrap: npt.NDArray[np.float32]
    next_obs: VecObs  # the observation after the last step
    next_values: npt.NDArray[np.float32]  # (envs,): its value
    metrics: dict[str, npt.NDArray[np.float64]]  # values of episodes that ended
    # With net.memory, (rows, memory): the state the policy acted from at each row.
    states: npt.NDArray[np.float32] | None = None
    # (steps, envs): the episode was cut off (truncated) on this step, so ``bootstrap`` holds
    # a value there.
    cut: npt.NDArray[np.bool_] | None = None
    # (steps, envs), in multi-player games: the row's player was in play. Rows of players
    # that had left are not learned from.
    active: npt.NDArray[np.bool_] | None = None
    # (steps, envs), in multi-player games: the reward of the row's group for the step, and
    # whether the row's game ended with it.
    group_rewards: npt.NDArray[np.float32] | None = None
    game_over: npt.NDArray[np.bool_] | None = None
    # (steps, envs), when an older policy acted (rollout.mode=async): per row, the ratio of
    # the learner's probability of the row's actions to the acting policy's, truncated at 1;
    # estimate_advantages then corrects for the lag (V-trace; see entityrl.training.async_sampler).
    ratios: npt.NDArray[np.float32] | None = None
    # With decisions at their own times (env.decisions): a row with no actor is no decision,
    # and advantages run over each row's decisions (entityrl.algorithms.common.gae.decision_gae).
    decisions: bool = False
    # (steps, envs), with decisions, from estimate_advantages: the steps that are samples.
    samples: npt.NDArray[np.bool_] | None = None
    # (rows,) each, from estimate_advantages.
    advantages: npt.NDArray[np.float32] = field(default_factory=lambda: np.zeros(0, np.float32))
    returns: npt.NDArray[np.float32] = field(default_factory=lambda: np.zeros(0, np.float32))

    @property
    def num_rows(self) -> int:
        return self.obs.num_rows

    def estimate_advantages(
        self, rewards: npt.NDArray[np.float32], gamma: float, gae_lambda: float
    ) -> None:
        """Advantages and returns by GAE from ``rewards`` ((steps, envs), e.g. the
        environment's rewards scaled or with a bonus); V-trace's with :attr:`ratios`."""
        # A truncated episode did not end in the task: its last step earns the discounted value
        # of the state it was cut off in, which GAE (stopping at the episode's end) would drop.
        steps, envs = self.dones.shape
        if self.decisions:
            # A row without a decision has no actor: its ratio is 1, and only the decisions'
            # ratios weigh anything.
            advantages, returns, self.samples = decision_gae(
                rewards + gamma * self.bootstrap,
                self.values.reshape(steps, envs),
                self.dones,
                _acting([a.lengths for a in self.actions.values()]).reshape(steps, envs),
                self.next_values,
                _acting([m.actors.lengths for m in self.next_obs.action_masks.values()]),
                gamma,
                gae_lambda,
                self.ratios,
            )
            self.advantages, self.returns = advantages.reshape(-1), returns.reshape(-1)
            return
        advantages, returns = gae(
            rewards + gamma * self.bootstrap,
            self.values.reshape(steps, envs),
            self.dones,
            self.next_values,
            gamma,
            gae_lambda,
            self.ratios,
        )
        self.advantages, self.returns = advantages.reshape(-1), returns.reshape(-1)

    def learned(self) -> npt.NDArray[np.bool_] | None:
        """(rows,): the rows that are samples, or None when all are. Rows of players that had
        left are not, nor (with decisions) the steps that are no decision's sample."""
        kept = [m.reshape(-1) for m in (self.samples, self.active) if m is not None]
        if not kept:
            return None
        return np.logical_and.reduce(kept)

    def shuffled_rows(self, rng: np.random.Generator, seq_len: int) -> npt.NDArray[np.int64]:
        """Every row once, in random order: rows one by one, or (with stored states) whole
        chunks of ``seq_len`` consecutive steps of one environment, each chunk's rows in step
        order (chunk-major; ``seq_len`` divides the rollout's steps). Without states, the rows
        that are no samples (:meth:`learned`) are skipped; with states they stay in their
        chunks, to carry the policy's state, and weigh nothing (:attr:`Minibatch.weights`)."""
        if self.states is None:
            learned = self.learned()
            if learned is None:
                return rng.permutation(self.num_rows)
            return rng.permutation(np.flatnonzero(learned))
        steps, envs = self.dones.shape
        chunk, env = np.divmod(rng.permutation(steps // seq_len * envs), envs)
        return _chunk_rows(chunk, env, seq_len, envs)

    def environment_rows(self, envs: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The rows of the environments ``envs``, each environment's whole rollout in step
        order: chunks of all the rollout's steps, as :meth:`shuffled_rows` lays them out."""
        steps, num_envs = self.dones.shape
        return _chunk_rows(np.zeros_like(envs), envs, steps, num_envs)

    def sequences(self, rows: npt.NDArray[np.int64], seq_len: int) -> Sequences | None:
        """With stored states, how ``rows`` (whole chunks of ``seq_len`` steps, chunk-major,
        from :meth:`shuffled_rows` or :meth:`environment_rows`) replay the policy's states;
        None without."""
        if self.states is None:
            return None
        return _sequences(rows, seq_len, self.states, self.dones)

    def sample_weights(self, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.float32] | None:
        """Per row of ``rows`` (from :meth:`shuffled_rows`), 1 for a sample and 0 for a row
        that only carries the policy's state; None when every row is a sample."""
        learned = self.learned() if self.states is not None else None
        if learned is None or learned[rows].all():
            return None
        return learned[rows].astype(np.float32)

    def minibatch(
        self,
        rows: npt.NDArray[np.int64],
        advantages: npt.NDArray[np.float32],
        seq_len: int = 1,
        weights: npt.NDArray[np.float32] | None = None,
    ) -> Minibatch:
        """The given rows; ``advantages`` (one per row, e.g. normalized) replace the stored ones.
        With stored states, ``rows`` are whole chunks of ``seq_len`` steps (see
        :meth:`shuffled_rows`), ``weights`` those of :meth:`sample_weights`."""
        if self.returns.shape[0] != self.num_rows:
            raise RuntimeError("Rollout.minibatch: call estimate_advantages first")
        actions = {name: a.take(rows) for name, a in self.actions.items()}
        return Minibatch(
            obs=self.obs.take(rows),
            actions=actions,
            logprobs={
                name: torch.from_numpy(lp.take(rows).data[:, 0])
                for name, lp in self.logprobs.items()
            },
            actor_rows={name: torch.from_numpy(a.row_index()) for name, a in actions.items()},
            values=torch.from_numpy(self.values[rows]),
            advantages=torch.from_numpy(advantages),
            returns=torch.from_numpy(self.returns[rows]),
            sequences=self.sequences(rows, seq_len),
            weights=None if weights is None else torch.from_numpy(weights),
        )


def _acting(actor_counts: list[npt.NDArray[np.int64]]) -> npt.NDArray[np.bool_]:
    """Per row, whether it has an actor, from each action's actors per row."""
    return np.sum(actor_counts, axis=0) > 0


def _chunk_rows(
    chunk: npt.NDArray[np.int64], env: npt.NDArray[np.int64], seq_len: int, envs: int
) -> npt.NDArray[np.int64]:
    """The rows of chunks of ``seq_len`` steps (chunk ``chunk[i]`` of environment ``env[i]``,
    of ``envs``), chunk-major, each chunk's in step order."""
    step = chunk[:, None] * seq_len + np.arange(seq_len)
    return (step * envs + env[:, None]).reshape(-1)


def _sequences(
    rows: npt.NDArray[np.int64],
    seq_len: int,
    states: npt.NDArray[np.float32],
    dones: npt.NDArray[np.bool_],
) -> Sequences:
    """How ``rows`` (whole chunks, chunk-major) replay the policy's states: each chunk from
    the state stored at its first step, reset after every step that ended an episode."""
    chunks = rows.reshape(-1, seq_len)
    envs = dones.shape[1]
    keep = np.ones(chunks.shape, dtype=np.float32)
    # Row r - envs is the same environment's previous step.
    keep[:, 1:] -= dones.reshape(-1)[chunks[:, 1:] - envs]
    return Sequences(torch.from_numpy(states[chunks[:, 0]]), torch.from_numpy(keep))
