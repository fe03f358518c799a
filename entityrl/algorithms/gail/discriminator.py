"""Generative adversarial imitation learning (GAIL): a reward learned from demonstrations.

Ho & Ermon (2016): a discriminator ``D(s, a)`` learns to tell the recorded expert's steps
(label 1) from the policy's (label 0), and the policy is trained by PPO on the reward
``-log(1 - D(s, a))``, which is high where the policy does what the expert would.

The discriminator reads entity observations and actions with the policy's own architecture:
a RogueNet of its own (``gail.d_model``, ``gail.n_layer``) whose heads score each actor's
recorded choice, masks included (select-entity choices too). Its logit for a step is the sum
over the step's actors of their choices' log-probabilities plus the row's value output:
log-probabilities of any action set, per actor, together with a state term, can express any
function of (observation, actions). The reward is ``softplus(logit) = -log(1 - D)``.
Input normalization statistics come from the demonstrations, once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch
from torch.nn import functional

from entityrl.algorithms.common.checks import require_positive
from entityrl.algorithms.common.optimizer import FlatOptimizer, OptimConfig, adam
from entityrl.env.spaces import ActionSpaces, ObsSpace
from entityrl.env.vec_obs import VecObs
from entityrl.nn.rogue_net import RogueNet, RogueNetConfig
from entityrl.ragged import RaggedArray

Actions = dict[str, RaggedArray]


@dataclass
class GAILConfig:
    """GAIL (algo=gail): PPO on a reward learned from the recordings in bc.demos."""

    coef: float = 1.0
    """Weight of the learned reward."""
    env_reward: float = 0.0
    """Weight of the environment's reward added to it (0: imitation alone)."""
    d_model: int = 32
    """Width of the discriminator (a RogueNet of its own)."""
    n_layer: int = 1
    """Transformer layers of the discriminator."""
    lr: float = 0.0003
    """Learning rate of the discriminator."""
    batches: int = 8
    """Discriminator steps per iteration, each on ``bs`` policy and ``bs`` expert steps."""
    bs: int = 256
    """Steps of each side in a discriminator minibatch."""

    def __post_init__(self) -> None:
        require_positive("gail", d_model=self.d_model, lr=self.lr, batches=self.batches, bs=self.bs)
        for name in ("coef", "env_reward", "n_layer"):
            if getattr(self, name) < 0:
                raise ValueError(f"gail.{name} must be >= 0, got {getattr(self, name)}")


class Discriminator:
    """The discriminator of one training process and its optimizer."""

    def __init__(
        self,
        obs_space: ObsSpace,
        action_space: ActionSpaces,
        config: GAILConfig,
        optim: OptimConfig,
        device: torch.device,
    ) -> None:
        self.config = config
        self.max_grad_norm = optim.max_grad_norm
        net_config = RogueNetConfig(d_model=config.d_model, n_layer=config.n_layer, n_head=1)
        self.net = RogueNet(obs_space, action_space, net_config, device=device)
        self.optimizer: FlatOptimizer = adam(
            self.net, OptimConfig(lr=config.lr, eps=optim.eps, max_grad_norm=optim.max_grad_norm)
        )

    def logits(self, obs: VecObs, actions: Actions) -> torch.Tensor:
        """Per row, the logit of "an expert's step" (with gradients)."""
        out = self.net.evaluate(obs, actions)
        logits = out.values.clone()
        for name, head in out.heads.items():
            rows = torch.from_numpy(actions[name].row_index()).to(logits.device)
            logits = logits.index_add(0, rows, head.logprob)
        return logits

    @torch.no_grad()
    def rewards(self, obs: VecObs, actions: Actions) -> npt.NDArray[np.float32]:
        """Per row, ``-log(1 - D)``: large where the step looks like the expert's."""
        self.net.eval()
        return functional.softplus(self.logits(obs, actions)).cpu().numpy().astype(np.float32)

    def update(
        self,
        policy: tuple[VecObs, Actions],
        expert: tuple[VecObs, Actions],
        rng: np.random.Generator,
    ) -> dict[str, float]:
        """``gail.batches`` steps on the binary cross-entropy of expert (1) against policy
        (0) steps, each side sampled ``gail.bs`` at a time; mean loss and accuracies."""
        self.net.train()
        losses, expert_right, policy_right = [], [], []
        for _ in range(self.config.batches):
            sides = []
            for obs, actions in (expert, policy):
                rows = rng.choice(obs.num_rows, size=min(self.config.bs, obs.num_rows))
                sides.append(
                    self.logits(obs.take(rows), {n: a.take(rows) for n, a in actions.items()})
                )
            expert_logits, policy_logits = sides
            loss = functional.binary_cross_entropy_with_logits(
                expert_logits, torch.ones_like(expert_logits)
            ) + functional.binary_cross_entropy_with_logits(
                policy_logits, torch.zeros_like(policy_logits)
            )
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step(self.max_grad_norm)
            losses.append(loss.item())
            expert_right.append(float((expert_logits > 0).float().mean()))
            policy_right.append(float((policy_logits < 0).float().mean()))
        return {
            "loss/gail_loss": float(np.mean(losses)),
            "loss/gail_expert_accuracy": float(np.mean(expert_right)),
            "loss/gail_policy_accuracy": float(np.mean(policy_right)),
        }

    def state_dict(self) -> dict[str, object]:
        return {"model": self.net.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, object]) -> None:
        self.net.load_state_dict(state["model"])  # type: ignore[arg-type]
        self.optimizer.load_state_dict(state["optimizer"])  # type: ignore[arg-type]
