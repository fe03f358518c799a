"""Proximal policy optimization on ragged batches.

Every actor's action is scored on its own: the advantage of a row is broadcast to all actors of
that row, each actor's probability ratio is clipped separately, and the policy loss is the mean
over all actors of the minibatch. Rows where nobody acts still train the value function.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch

from entityrl.algorithms.common.checks import require_positive
from entityrl.algorithms.common.optimizer import FlatOptimizer, OptimConfig
from entityrl.algorithms.common.reduce import Reducer
from entityrl.algorithms.common.rollout import Minibatch, Rollout
from entityrl.nn.rogue_net import PolicyOutput, RogueNet


@dataclass
class PPOConfig:
    """Proximal policy optimization."""

    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 0.95
    """Generalized advantage estimation lambda."""
    norm_adv: bool = True
    """Normalize advantages to zero mean, unit variance within each minibatch."""
    clip_coef: float = 0.2
    """Surrogate clipping range (and value clipping range, with clip_vloss)."""
    clip_vloss: bool = True
    """Clip the value update around the rollout's value estimates."""
    ent_coef: float = 0.01
    """Entropy bonus coefficient."""
    anneal_entropy: bool = False
    """Anneal the entropy coefficient linearly to ``ent_coef_final`` over training."""
    ent_coef_final: float = 0.0
    """With anneal_entropy: the entropy coefficient at the end of training (a floor that keeps
    a policy exploring, e.g. NFSP's best response, which goes stale when it turns greedy)."""
    vf_coef: float = 0.5
    """Value loss coefficient."""
    norm_reward: bool | None = None
    """Divide rewards by the running standard deviation of the discounted return, so returns
    of any size reach the value function at about unit scale (logged returns stay unscaled).
    null: on, except for algorithms that do not support it (algo=poca); false: off. On by
    default since the robustness suite (benchmarks/RESULTS.md, "Robustness suite")."""
    norm_value: bool = False
    """Learn the value targets normalized by their running mean and standard deviation (never
    below 1), the value head's outputs mapped back before estimating advantages (so values
    start at the returns' level and the value clip is in units of their spread): for dense
    rewards whose returns sit far from 0; off by default, it cost sparse tasks in the suite
    (docs/troubleshooting.md, section 4)."""
    target_kl: float | None = None
    """Stop the update epochs of an iteration early once the approximate KL exceeds this."""
    update_epochs: int = 3
    """Passes over each rollout (algo=ppo: 10 unless set; docs/troubleshooting.md)."""
    seq_len: int = 0
    """With net.memory: minibatches hold whole chunks of this many consecutive steps of one
    environment, replayed from the state stored at each chunk's start (truncated
    back-propagation through time); it must divide rollout.steps (0: rollout.steps)."""

    def __post_init__(self) -> None:
        if not 0 <= self.gamma <= 1:
            raise ValueError(f"ppo.gamma must be in [0, 1], got {self.gamma}")
        if not 0 <= self.gae_lambda <= 1:
            raise ValueError(f"ppo.gae_lambda must be in [0, 1], got {self.gae_lambda}")
        require_positive("ppo", clip_coef=self.clip_coef, update_epochs=self.update_epochs)
        if self.seq_len < 0:
            raise ValueError(f"ppo.seq_len must be >= 0 (0: rollout.steps), got {self.seq_len}")
        if self.ent_coef < 0 or self.vf_coef < 0 or self.ent_coef_final < 0:
            raise ValueError(
                "ppo.ent_coef, ppo.ent_coef_final and ppo.vf_coef must be >= 0, got "
                f"{self.ent_coef}, {self.ent_coef_final} and {self.vf_coef}"
            )
        if self.target_kl is not None:
            require_positive("ppo", target_kl=self.target_kl)


@dataclass
class PPOTerms:
    """A (micro-)batch's losses as sums over its actors (policy, entropy) and rows (value);
    :meth:`loss` weighs them into the loss to minimize (the weights divide by the counts of the
    whole minibatch). The statistics are plain floats."""

    policy: float
    entropy: float
    value: float
    approx_kl: float
    clipped: float
    _sums: tuple[torch.Tensor, torch.Tensor, torch.Tensor]

    def loss(self, policy: float, entropy: float, value: float) -> torch.Tensor:
        p, e, v = self._sums
        return policy * p + entropy * e + value * v


def ppo_terms(out: PolicyOutput, batch: Minibatch, cfg: PPOConfig) -> PPOTerms:
    """Clipped surrogate, entropy and (clipped) value losses, summed over actors and rows.

    Per actor, with the row's advantage ``A`` and ``r = exp(logprob - old logprob)``:
    ``policy = max(-A r, -A clip(r, 1 - c, 1 + c))``; per row, ``value = (v - R)^2 / 2``, or
    with value clipping ``max((v - R)^2, (V + clip(v - V, -c, c) - R)^2) / 2`` (``V``: the
    rollout's estimate). Plain torch on any device: the only copy of PPO's loss (a numpy copy
    with hand-written gradients won 0-9% of end-to-end samples/s on the CPU, too little to keep
    two; RESULTS.md, "PPO loss").
    """
    c = cfg.clip_coef
    zero = out.values.new_zeros(())
    policy, entropy, approx_kl, clipped = zero, zero, zero, zero
    for name, head in out.heads.items():
        if head.logprob.numel() == 0:
            continue
        advantage = batch.advantages[batch.actor_rows[name]]
        logratio = head.logprob - batch.logprobs[name]
        ratio = logratio.exp()
        surrogate = torch.maximum(-advantage * ratio, -advantage * ratio.clamp(1 - c, 1 + c))
        entropies = head.entropy
        # Actors of rows that are no samples (kept only to carry a recurrent state) weigh 0.
        weight = None if batch.weights is None else batch.weights[batch.actor_rows[name]]
        if weight is not None:
            surrogate, entropies = surrogate * weight, entropies * weight
        policy = policy + surrogate.sum()
        entropy = entropy + entropies.sum()
        with torch.no_grad():
            # Low-variance KL estimator: E[(r - 1) - log r] (Schulman, "Approximating KL").
            kl, clips = (ratio - 1) - logratio, (ratio - 1).abs() > c
            if weight is not None:
                kl, clips = kl * weight, clips * weight
            approx_kl = approx_kl + kl.sum()
            clipped = clipped + clips.sum()
    squared = (out.values - batch.returns) ** 2
    if cfg.clip_vloss:
        clipped_values = batch.values + (out.values - batch.values).clamp(-c, c)
        squared = torch.maximum(squared, (clipped_values - batch.returns) ** 2)
    if batch.weights is not None:  # rows that only carry a recurrent state learn nothing
        squared = squared * batch.weights
    value = 0.5 * squared.sum()
    # One transfer from the device for all the statistics.
    stats = torch.stack([policy, entropy, value, approx_kl, clipped.to(zero.dtype)]).tolist()
    return PPOTerms(*stats, _sums=(policy, entropy, value))


def normalize(
    advantages: npt.NDArray[np.float32],
    reducer: Reducer,
    weights: npt.NDArray[np.float32] | None = None,
) -> npt.NDArray[np.float32]:
    """Zero mean, unit variance over the minibatch (all processes' parts of it); with
    ``weights``, over the rows of weight 1 (the others are no samples)."""
    counted = advantages if weights is None else advantages[weights > 0]
    count, total, squares = reducer.sum(
        [
            counted.shape[0],
            counted.sum(dtype=np.float64),
            np.square(counted, dtype=np.float64).sum(),
        ]
    )
    if count < 2:
        return advantages
    mean = total / count
    std = np.sqrt(max(squares / count - mean**2, 0.0))
    return ((advantages - mean) / (std + 1e-8)).astype(np.float32)


STATS = ("policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac")


def _minibatches(
    order: npt.NDArray[np.int64], bs: int, reducer: Reducer
) -> list[npt.NDArray[np.int64]]:
    """``order`` in minibatches of ``bs`` rows. In a data-parallel run where the processes have
    different numbers of rows (players that left, with env.decisions the steps that are no
    samples), every process splits its rows into as many minibatches as the process with the
    most needs, since each minibatch is one collective gradient step of them all."""
    count = order.shape[0]
    if reducer.world_size > 1:
        counts = reducer.gather(count)
        if len(set(counts)) > 1:
            parts = max(-(-c // bs) for c in counts)
            return np.array_split(order, parts)
    return [order[start : start + bs] for start in range(0, count, bs)]


def ppo_update(
    net: RogueNet,
    optimizer: FlatOptimizer,
    rollout: Rollout,
    ppo: PPOConfig,
    optim: OptimConfig,
    ent_coef: float,
    rng: np.random.Generator,
    reducer: Reducer | None = None,
) -> dict[str, float]:
    """Several epochs of minibatch gradient steps on one rollout; returns averaged statistics.

    In a data-parallel run each process holds its share of the rollout and takes its share
    (``optim.bs / world_size`` rows) of every minibatch; ``reducer`` combines counts, statistics
    and gradients so that every process takes the same step as one process with all the data.
    """
    reducer = reducer or Reducer()
    totals = dict.fromkeys((*STATS, "grad_norm"), 0.0)
    updates = epochs = 0
    bs = optim.bs // reducer.world_size
    micro_bs = (optim.micro_bs or optim.bs) // reducer.world_size
    seq_len = ppo.seq_len or rollout.dones.shape[0]
    for _ in range(ppo.update_epochs):
        epochs += 1
        epoch_kl, epoch_actors = 0.0, 0.0
        order = rollout.shuffled_rows(rng, seq_len)
        for rows in _minibatches(order, bs, reducer):
            advantages = rollout.advantages[rows]
            weights = rollout.sample_weights(rows)
            if ppo.norm_adv:
                advantages = normalize(advantages, reducer, weights)
            # Losses are sums divided by the counts of the whole minibatch, so micro-batches
            # (and the parts of other processes) add up to the gradient of one big batch.
            lengths = [a.lengths[rows] for a in rollout.actions.values()]
            if weights is None:
                local_actors, local_rows = sum(int(n.sum()) for n in lengths), rows.shape[0]
            else:
                local_actors = sum(float(n @ weights) for n in lengths)
                local_rows = float(weights.sum())
            n_actors, n_rows = reducer.sum([local_actors, local_rows])
            n_rows = max(n_rows, 1.0)
            n_actors = max(n_actors, 1.0)
            optimizer.zero_grad()
            local = np.zeros(len(STATS))
            for micro in range(0, rows.shape[0], micro_bs):
                part = slice(micro, micro + micro_bs)
                batch = rollout.minibatch(
                    rows[part],
                    advantages[part],
                    seq_len,
                    None if weights is None else weights[part],
                ).to(net.device)
                out = net.evaluate(batch.obs, batch.actions, batch.sequences)
                terms = ppo_terms(out, batch, ppo)
                terms.loss(1 / n_actors, -ent_coef / n_actors, ppo.vf_coef / n_rows).backward()
                local += [
                    terms.policy / n_actors,
                    terms.value / n_rows,
                    terms.entropy / n_actors,
                    terms.approx_kl / n_actors,
                    terms.clipped / n_actors,
                ]
            grad_norm = optimizer.step(optim.max_grad_norm, reducer)
            stats = dict(zip(STATS, reducer.sum(local), strict=True))
            stats["grad_norm"] = grad_norm
            for key, value in stats.items():
                totals[key] += value
            updates += 1
            epoch_kl += stats["approx_kl"] * n_actors
            epoch_actors += n_actors
        if ppo.target_kl is not None and epoch_kl / max(epoch_actors, 1) > ppo.target_kl:
            break
    result = {key: value / max(updates, 1) for key, value in totals.items()}
    result["epochs"] = float(epochs)
    return result
