"""PPO's loss fused into numpy: the terms and their gradients computed together.

:func:`fused_ppo_terms` computes exactly what :func:`entityrl.algorithms.ppo.loss.ppo_terms` computes
(the reference, in plain torch, which autograd differentiates), and the gradients with respect
to the network's outputs in the same pass. On the CPU, at a minibatch's thousand-odd actors, the
torch expressions are some 70 small operations forward and 40 backward, which cost more than
the network's own layers on light environments; here they are a handful of numpy calls. The
tests check the two against each other, values and gradients.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import torch

from entityrl.algorithms.common.rollout import Minibatch
from entityrl.nn.rogue_net import PolicyOutput

if TYPE_CHECKING:
    from entityrl.algorithms.ppo.loss import PPOConfig


@dataclass
class LossTerms:
    """A (micro-)batch's losses as sums over its actors (policy, entropy) and rows (value),
    with their gradients with respect to the network's outputs; :meth:`loss` weighs them into
    the loss to minimize (weights divide by the counts of the whole minibatch)."""

    policy: float
    entropy: float
    value: float
    approx_kl: float
    clipped: float
    # Each output the terms depend on, the term it enters and its gradient (None: all ones).
    outputs: list[tuple[torch.Tensor, str, npt.NDArray[np.float32] | None]]

    def loss(self, policy: float, entropy: float, value: float) -> torch.Tensor:
        """``policy * self.policy + entropy * self.entropy + value * self.value`` as a scalar
        tensor whose backward sends the weighted gradients into the network."""
        weights = {"policy": policy, "entropy": entropy, "value": value}
        total = policy * self.policy + entropy * self.entropy + value * self.value
        grads = [(weights[term], grad, tensor.shape) for tensor, term, grad in self.outputs]
        return _WeightedLoss.apply(total, grads, *(tensor for tensor, _, _ in self.outputs))


class _WeightedLoss(torch.autograd.Function):
    """A loss whose gradients with respect to its inputs were computed with its value."""

    @staticmethod
    def forward(
        ctx: Any,
        total: float,
        grads: list[tuple[float, npt.NDArray[np.float32] | None, torch.Size]],
        *outputs: torch.Tensor,
    ) -> torch.Tensor:
        ctx.grads = grads
        return torch.tensor(total, dtype=torch.float32)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        scale = float(grad)
        inputs = [
            torch.full(shape, weight * scale, dtype=torch.float32)
            if g is None
            else torch.from_numpy(g * np.float32(weight * scale))
            for weight, g, shape in ctx.grads
        ]
        return (None, None, *inputs)


def fused_ppo_terms(out: PolicyOutput, batch: Minibatch, cfg: PPOConfig) -> LossTerms:
    """Clipped surrogate, entropy and (clipped) value losses, summed over actors and rows.

    Per actor, with the row's advantage ``A`` and ``r = exp(logprob - old logprob)``:
    ``policy = max(-A r, -A clip(r, 1 - c, 1 + c))``; per row, ``value = (v - R)^2 / 2``, or
    with value clipping ``max((v - R)^2, (V + clip(v - V, -c, c) - R)^2) / 2`` (``V``: the
    rollout's estimate). The gradients follow torch's rules for ``maximum`` (ties split in
    half) and ``clamp`` (gradient inside the closed interval). CPU tensors only.
    """
    c = cfg.clip_coef
    policy = entropy = approx_kl = clipped = 0.0
    outputs: list[tuple[torch.Tensor, str, npt.NDArray[np.float32] | None]] = []
    advantages = batch.advantages.numpy()
    for name, head in out.heads.items():
        if head.logprob.numel() == 0:
            continue
        advantage = advantages[batch.actor_rows[name].numpy()]
        logratio = head.logprob.detach().numpy() - batch.logprobs[name].numpy()
        ratio = np.exp(logratio)
        unclipped = -advantage * ratio
        clipped_loss = -advantage * np.clip(ratio, 1 - c, 1 + c)
        # d/dlogprob of -A r is -A r; of the clipped term, the same inside the interval, else 0.
        inside = (ratio >= 1 - c) & (ratio <= 1 + c)
        clipped_grad = np.where(inside, unclipped, 0.0)
        grad = np.where(
            unclipped > clipped_loss,
            unclipped,
            np.where(unclipped < clipped_loss, clipped_grad, 0.5 * (unclipped + clipped_grad)),
        )
        outputs.append((head.logprob, "policy", grad))
        outputs.append((head.entropy, "entropy", None))
        policy += float(np.maximum(unclipped, clipped_loss).sum(dtype=np.float64))
        entropy += float(head.entropy.detach().numpy().sum(dtype=np.float64))
        # Low-variance KL estimator: E[(r - 1) - log r] (Schulman, "Approximating KL").
        approx_kl += float(((ratio - 1) - logratio).sum(dtype=np.float64))
        clipped += float((np.abs(ratio - 1) > c).sum())
    values = out.values.detach().numpy()
    returns = batch.returns.numpy()
    error = values - returns
    squared = error * error
    grad = error  # d/dv of (v - R)^2 / 2
    if cfg.clip_vloss:
        old = batch.values.numpy()
        step = values - old
        clipped_error = old + np.clip(step, -c, c) - returns
        clipped_squared = clipped_error * clipped_error
        clipped_grad = clipped_error * ((step >= -c) & (step <= c))
        grad = np.where(
            squared > clipped_squared,
            grad,
            np.where(squared < clipped_squared, clipped_grad, 0.5 * (grad + clipped_grad)),
        )
        squared = np.maximum(squared, clipped_squared)
    outputs.append((out.values, "value", grad.astype(np.float32, copy=False)))
    value = 0.5 * float(squared.sum(dtype=np.float64))
    return LossTerms(policy, entropy, value, approx_kl, clipped, outputs)
