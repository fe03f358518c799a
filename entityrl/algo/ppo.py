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
from torch import nn

from entityrl.nn.rogue_net import PolicyOutput, RogueNet
from entityrl.training.buffer import Minibatch, Rollout
from entityrl.training.config import OptimConfig, PPOConfig


@dataclass
class LossTerms:
    """Sums over a (micro-)batch; divide by actor/row counts of the whole minibatch."""

    policy: torch.Tensor
    entropy: torch.Tensor
    value: torch.Tensor
    approx_kl: float
    clipped: float


def ppo_losses(out: PolicyOutput, batch: Minibatch, cfg: PPOConfig) -> LossTerms:
    """Clipped surrogate, entropy and (clipped) value losses, summed over actors and rows."""
    policy = torch.zeros(())
    entropy = torch.zeros(())
    approx_kl = 0.0
    clipped = 0.0
    for name, head in out.heads.items():
        if head.logprob.numel() == 0:
            continue
        advantage = batch.advantages[batch.actor_rows[name]]
        logratio = head.logprob - batch.logprobs[name]
        ratio = logratio.exp()
        unclipped = -advantage * ratio
        clipped_loss = -advantage * ratio.clamp(1 - cfg.clip_coef, 1 + cfg.clip_coef)
        policy = policy + torch.maximum(unclipped, clipped_loss).sum()
        entropy = entropy + head.entropy.sum()
        with torch.no_grad():
            # Low-variance KL estimator: E[(r - 1) - log r] (Schulman, "Approximating KL").
            approx_kl += float(((ratio - 1) - logratio).sum())
            clipped += float(((ratio - 1).abs() > cfg.clip_coef).sum())
    values = out.values
    error = (values - batch.returns) ** 2
    if cfg.clip_vloss:
        clipped_values = batch.values + (values - batch.values).clamp(-cfg.clip_coef, cfg.clip_coef)
        error = torch.maximum(error, (clipped_values - batch.returns) ** 2)
    return LossTerms(policy, entropy, 0.5 * error.sum(), approx_kl, clipped)


def normalize(advantages: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    if advantages.shape[0] < 2:
        return advantages
    return (advantages - advantages.mean()) / (advantages.std() + 1e-8)


def ppo_update(
    net: RogueNet,
    optimizer: torch.optim.Optimizer,
    rollout: Rollout,
    ppo: PPOConfig,
    optim: OptimConfig,
    ent_coef: float,
    rng: np.random.Generator,
) -> dict[str, float]:
    """Several epochs of minibatch gradient steps on one rollout; returns averaged statistics."""
    totals: dict[str, float] = {}
    updates = epochs = 0
    micro_bs = optim.micro_bs or optim.bs
    for _ in range(ppo.update_epochs):
        epochs += 1
        epoch_kl, epoch_actors = 0.0, 0
        order = rng.permutation(rollout.num_rows)
        for start in range(0, rollout.num_rows, optim.bs):
            rows = order[start : start + optim.bs]
            advantages = rollout.advantages[rows]
            if ppo.norm_adv:
                advantages = normalize(advantages)
            # Losses are sums divided by the counts of the whole minibatch, so accumulating
            # micro-batches gives the same gradient as one big batch.
            n_actors = max(sum(int(a.lengths[rows].sum()) for a in rollout.actions.values()), 1)
            n_rows = rows.shape[0]
            optimizer.zero_grad(set_to_none=True)
            stats = dict.fromkeys(
                ("policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac"), 0.0
            )
            for micro in range(0, n_rows, micro_bs):
                part = slice(micro, micro + micro_bs)
                batch = rollout.minibatch(rows[part], advantages[part])
                terms = ppo_losses(net.evaluate(batch.obs, batch.actions), batch, ppo)
                loss = (
                    terms.policy / n_actors
                    - ent_coef * terms.entropy / n_actors
                    + ppo.vf_coef * terms.value / n_rows
                )
                loss.backward()
                stats["policy_loss"] += terms.policy.item() / n_actors
                stats["value_loss"] += terms.value.item() / n_rows
                stats["entropy"] += terms.entropy.item() / n_actors
                stats["approx_kl"] += terms.approx_kl / n_actors
                stats["clipfrac"] += terms.clipped / n_actors
            stats["grad_norm"] = float(
                nn.utils.clip_grad_norm_(net.parameters(), optim.max_grad_norm)
            )
            optimizer.step()
            for key, value in stats.items():
                totals[key] = totals.get(key, 0.0) + value
            updates += 1
            epoch_kl += stats["approx_kl"] * n_actors
            epoch_actors += n_actors
        if ppo.target_kl is not None and epoch_kl / max(epoch_actors, 1) > ppo.target_kl:
            break
    result = {key: value / max(updates, 1) for key, value in totals.items()}
    result["epochs"] = float(epochs)
    return result
