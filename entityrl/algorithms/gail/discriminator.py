"""The discriminator of adversarial imitation (GAIL, DAC): a reward learned from demonstrations.

Ho & Ermon (2016): a discriminator ``D(s, a)`` learns to tell the recorded expert's steps
(label 1) from the policy's (label 0), and the policy is trained on a reward that is high where
``D`` is: by default its logit ``log D - log(1 - D)`` (``reward``; also ``-log(1 - D)``, always
positive, and ``log D``, always negative).

The discriminator reads entity observations and actions with the policy's own architecture:
a RogueNet of its own (``d_model``, ``n_layer``) whose heads score each actor's recorded
choice, masks included (select-entity choices too). These are its *embedded inputs*, one fixed
vector per step: ``[absorbing, value, per action: the sum over the actors of the
log-probability its head gives the actor's choice]``. A small MLP reads that vector to the
logit. Log-probabilities of any action set, per actor, together with a state term, can express
any function of (observation, actions).

Fixes after Kostrikov et al. (2019), "Discriminator-Actor-Critic", for episodes that end early:

* **Absorbing states.** An episode that ends by the task (``done`` and not ``truncated``) is
  followed by an absorbing state, which steps to itself forever; the discriminator learns it
  on each side once per such ending, and its reward ``r_abs`` is the reward of every step
  after the ending. Without it an ending is worth 0 after it, so a positive reward punishes
  ending (and a negative one rewards it), whatever the expert did.
* **Rewards are measured from a reference** ``c``, the mean reward of the absorbing states
  after the expert's endings (0 when it has none; with one absorbing state, its reward): with
  absorbing states every episode lasts forever, so subtracting ``c`` from every reward changes
  every return by the same ``c / (1 - gamma)`` and no policy's rank, and an ending like the
  expert's is worth about 0 after it, which is what the learners already give a step that
  ended its episode. The step that ended adds the rest, the absorbing state's value
  ``gamma / (1 - gamma) * (r_abs - c)`` (:meth:`Discriminator.rewards`). With one absorbing
  state ``r_abs = c`` and that term vanishes; bootstrapping ``r_abs / (1 - gamma)`` unshifted,
  as DAC does, would put 100 steps' worth of reward (at gamma 0.99) on every last step, even
  on endings exactly like the expert's.
* **Where one absorbing state fails: dying pays.** The discriminator cannot tell one point
  apart from itself, so its score of the absorbing state sits at the ratio of how often each
  side ends, while it can tell the policy's steps apart. Where the expert ends early by
  succeeding (TreasureHunt, MultiSnake), the policy's steps soon score below the absorbing
  state, every step costs, and the quickest ending pays: a trap, a crash (measured: episodes of
  2-6 steps). No reward form escapes this (they are monotone maps of one logit). Two remedies
  are offered and measured, and neither is the default:

  - ``absorbing_weight`` (null: the horizon ``1 / (1 - gamma)``): an ending at step t puts
    discounted mass ``gamma^t / (1 - gamma)`` on the absorbing state against ``gamma^t`` for a
    step, so each absorbing state may weigh ``1 / (1 - gamma)`` steps on both sides (DAC's
    occupancy argument). With one absorbing state this makes dying pay *more*: both sides'
    samples become mostly absorbing states, its score tends to the even 0.5 while the policy's
    steps are still told apart (TreasureHunt: 0.034 of the expert, ~6-step episodes, against
    0.10 and ~20 steps at weight 1).
  - ``ending``: the absorbing state's embedded inputs are the indicator and the rest of the
    ending step's, ``[1, z_T]``, so an ending the expert never makes (a trap) scores as the
    policy's and one it makes as the expert's. That stops the dying (episodes of 70-180 steps)
    but the policy then lingers (0.09-0.12 of the expert on TreasureHunt, 0.014 on
    MultiSnake), and its value, ``gamma / (1 - gamma)`` times a reward on the last step,
    swamps PPO's advantages on fixed-length CherryPick (0.15-0.19 of the expert against 0.99).

  What is left is the discriminator telling the policy's steps apart (accuracy 0.95-1.0 on
  that side): its reward does not point toward the expert's next step. Behaviour cloning on
  the same recordings alongside (GAIL with ``bc.strength``) keeps the policy's steps among the
  expert's, the discriminator then cannot tell them apart and dying no longer pays. See
  docs/imitation.md for the figures.
* **Structured discriminator** (``structured``; AIRL's form, Fu et al. 2018, with
  ``f = log q``, as in ASAF, Barde et al. 2020): the logit of a step is
  ``log q(a|s) - log pi(a|s)``, where ``q`` is the discriminator's own heads, a policy over the
  same actions (log-probabilities summed over actors and actions), and ``pi`` the learner's
  current policy, read without gradients; an absorbing state's logit is one number.
  Because ``q`` is normalized over the choices of each state, the discriminator cannot mark a
  whole state as the policy's: it can only say which choice there looks like the expert's.
  The reward ``log q - log pi`` is an entropy-regularized one (its mean over the policy's
  choices is ``-KL(pi || q)``, 0 where the policy matches ``q``) whose step to a trap costs
  ``log q`` of a choice the expert never makes. Measured with GAIL (ratio of the expert's
  return, seeds 1-3): TreasureHunt 0.790, 0.770, 0.771 at ``ppo.gamma=0.9`` (0.043 seed 1
  unstructured), 0.255, 0.794, 0.796 at 0.99 (seed 1 learns to die); CherryPick 0.984, 0.903,
  0.986 and PickMatchingBalls 0.956, 0.927, 0.968 at 0.9; MultiSnake 0.234, 0.261, 0.225 (plain
  GAIL 0.03), where the policy still crashes after ~9 steps. With DAC (one update per 128
  environment steps; unstructured, its policy on TreasureHunt stays near uniform), seed 1:
  TreasureHunt 0.128 (0.043 at ``dac.gamma=0.9``; at 0.5 0.390, seeds 2, 3: 0.128, 0.135),
  CherryPick 0.999, MultiSnake 0.083, PickMatchingBalls 0.627 (0.942 unstructured). An option, not the default: it misses
  MultiSnake and hurts DAC on PickMatchingBalls (benchmarks/RESULTS.md, "Structured
  discriminator").

  Tried on MultiSnake, none near 0.7 (GAIL, seed 1, 200k steps, ``ppo.gamma=0.9``, against 0.234
  structured): reward ``log q`` alone 0.198 (``log q <= 0``: every step costs and dying pays
  again; TreasureHunt 0.784), ``log q - 0.5 log pi`` 0.362, ``ppo.ent_coef=0`` 0.255, reward
  ``positive`` 0.221, ``negative`` 0.267, ``d_model=64, n_layer=2`` 0.319, ``batches=32`` 0.374,
  ``lr=0.001`` 0.371, the larger one with 32 batches 0.389, 32 batches at gamma 0.99 0.397 (600k
  steps: 0.423; with ``lr=0.001`` 0.457, 1.2M steps 0.479), 600k steps 0.382, 600k steps with
  4,000 expert episodes 0.366, gamma 0.5 0.211. Unstructured, ``ppo.gamma=0.9`` alone:
  TreasureHunt 0.043; DAC with ``dac.updates=8``: 0.029 (its policy lingers to the time limit).

  What MultiSnake showed (two snakes act in every row; docs/imitation.md, "Several actors per
  step"): a row is one sample, its logit the sum over both snakes' log-ratios, and one absorbing
  state follows the row that ended; that is right for a policy that factorizes over its actors,
  and the recorded actions sit on the right snakes (the expert turns back onto its own neck in
  0.015% of its actor-steps). What was wrong: (1) the absorbing state's logit, one parameter
  under Adam, moves about ``lr`` per step: after 784 steps it stood at -0.19 where its loss is
  least near -1, so staying alive was worth almost nothing against crashing. It is now *set*
  at each update to that least point, from both sides' counts of rows and endings
  (:func:`absorbing_logit`); 0.234 -> 0.312 at 200k steps, 0.382 -> 0.441 at 600k. (2) ``q``
  stays as broad as the policy (on the expert's states with a 4-long snake it puts 0.15 on
  moves that crash, the policy 0.17), and the logit's ``-log pi`` makes ``q`` the policy's
  optimum: ``entropy`` below 1 makes the optimum sharper than ``q`` (600k steps: 0.491 at 0.5,
  0.524 at 0.25, 0.497 at 0). What is left is the learner: PPO on MultiSnake's *own* reward
  with the same settings reaches 0.37 of the expert at 200k steps and 0.51 at 1.2M, crashing
  the same way (three crashes in five are a snake running into its own body), and GAIL at
  ``entropy=0.25`` is at 0.50 there. With both changes and ``entropy=0.25`` (GAIL,
  ``ppo.gamma=0.9``), medians of seeds 1-3: MultiSnake 0.517 at 600k steps (short of 0.7),
  TreasureHunt 0.795, CherryPick 0.985, PickMatchingBalls 0.893.

  Then, with the policy's network given relative positions, width 64 and 4
  heads, PPO on MultiSnake's own reward reaches 0.94 of the expert at 600k steps (median of
  seeds 1-3: 0.979, 0.942, 0.767), and GAIL
  (``entropy=0.25``, ``relpos`` here too) stays at 0.50. Below 1, ``entropy`` makes every step
  cost: ``log q - entropy * log pi`` pays its optimal policy ``entropy * log sum q^(1 /
  entropy)`` per actor (<= 0), and measured from the absorbing state staying alive pays only
  while the policy ends sooner than the expert (its episodes settled at about half the
  expert's length). ``sharpen_q`` takes that cost away (reward ``entropy * (log q' - log pi)``,
  ``q'`` the normalized ``q^(1 / entropy)``, same optimum): 0.504 -> 0.609 at 0.25, 0.627 at
  0.5, 0.647 at 0.5 with ``gamma=0.99`` (seed 1, 600k steps).
* **Gradient penalty** (WGAN-GP, Gulrajani et al. 2017, as DAC uses it):
  ``grad_penalty * E[(|grad_z D(z)| - 1)^2]`` at points ``z`` drawn uniformly on segments between
  an expert's and a policy's embedded inputs. Entity observations of different steps hold
  different entities, so raw inputs cannot be interpolated; the embedded inputs can. They are
  detached for the penalty: it holds the MLP's slope, not the encoder's features.

The accuracy on each side is logged; :class:`SaturationWatch` warns once when both stay near 1.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch import nn
from torch.nn import functional

from entityrl.algorithms.common.checks import require_positive
from entityrl.algorithms.common.optimizer import FlatOptimizer, OptimConfig, adam
from entityrl.algorithms.common.reduce import Reducer
from entityrl.env.spaces import ActionSpaces, ObsSpace
from entityrl.env.vec_obs import VecObs
from entityrl.nn.heads import HeadOutput
from entityrl.nn.relpos import RelposConfig
from entityrl.nn.rogue_net import RogueNet, RogueNetConfig
from entityrl.ragged import RaggedArray

Actions = dict[str, RaggedArray]

# Width of the MLP between the embedded inputs and the logit.
_HIDDEN = 64
# Consecutive discriminator steps at saturated accuracy before the warning: a few steps at
# accuracy 1 happen by chance on small batches; this many in a row means the policy's reward
# no longer tells its steps apart.
SATURATED_STEPS = 100
# The learned reward as a function of the discriminator's logit.
REWARDS = {
    "logit": lambda logit: logit,  # log D - log(1 - D)
    "positive": functional.softplus,  # -log(1 - D) = softplus(logit)
    "negative": lambda logit: -functional.softplus(-logit),  # log D
}


@dataclass
class DiscriminatorSettings:
    """The discriminator's settings, shared by algo=gail and algo=dac."""

    d_model: int = 32
    """Width of the discriminator (a RogueNet of its own)."""
    n_layer: int = 1
    """Transformer layers of the discriminator."""
    n_head: int = 1
    """Attention heads per layer of the discriminator (``d_model`` must be a multiple)."""
    relpos: RelposConfig | None = None
    """Relative-position encoding in the discriminator's attention, as ``net.relpos`` (None:
    off). Where the policy needs it to see what lies next to an entity (MultiSnake: which cell
    beside a snake's head holds what), the discriminator's ``q`` needs it as much."""
    lr: float = 0.0003
    """Learning rate of the discriminator."""
    absorbing: bool = True
    """Follow every episode that ends by the task (not truncated) with an absorbing state that
    the discriminator scores and whose value the learner counts (DAC); false: an ending is
    worth nothing after it, as in the original GAIL."""
    absorbing_weight: float | None = 1.0
    """Weight of each absorbing state in the discriminator's loss, against 1 for a step (both
    sides); null: the learner's horizon 1 / (1 - gamma), the occupancy it stands for (measured
    worse, see the module's doc)."""
    structured: bool = False
    """The logit is ``log q(a|s) - log pi(a|s)``: the discriminator's heads form a policy ``q``
    set against the learner's ``pi`` (both summed over actors and actions), and an absorbing
    state's logit is one number set from how often each side ends; false: an MLP reads the
    embedded inputs (see the module's doc)."""
    entropy: float = 1.0
    """Structured: the weight of the learner's own ``-log pi`` in the reward, which is then
    ``log q - entropy * log pi`` (less the reference). At 1 it is the logit, whose best policy
    is ``q`` itself; below 1 the best policy is ``q^(1 / entropy)`` normalized, sharper than
    ``q`` (the objective's entropy bonus, per actor, weighs ``entropy``)."""
    sharpen_q: bool = False
    """Structured, ``entropy`` below 1: the reward is ``entropy * (log q' - log pi)``, ``q'``
    the sharpened ``q^(1 / entropy)`` normalized per actor: the same best policy as
    ``log q - entropy * log pi`` without its cost per step, ``entropy * log sum q^(1 /
    entropy)`` per actor (<= 0, what that reward pays at its best), which makes staying alive
    cost and ending early pay (see the module's doc). Continuous actions add no cost."""
    ending: bool = False
    """The absorbing state carries the step that ended its episode, so an ending the expert
    never makes (a trap, a crash) is told from one it makes (success); false: one absorbing
    state after every ending (measured better, see the module's doc)."""
    reward: str = "logit"
    """The learned reward: ``logit`` (log D - log(1 - D)), ``positive`` (-log(1 - D)) or
    ``negative`` (log D)."""
    grad_penalty: float = 10.0
    """Weight of the gradient penalty on the discriminator (WGAN-GP on its embedded inputs;
    0: off)."""
    saturation: float = 0.99
    """Warn once when the discriminator's accuracy on the expert's and on the policy's steps
    both stay at or above this for 100 steps in a row (above 1: never)."""

    def check_discriminator(self, section: str) -> None:
        require_positive(section, d_model=self.d_model, n_head=self.n_head, lr=self.lr)
        if self.d_model % self.n_head:
            raise ValueError(
                f"{section}.d_model ({self.d_model}) must be a multiple of {section}.n_head "
                f"({self.n_head})"
            )
        if self.absorbing_weight is not None and self.absorbing_weight <= 0:
            raise ValueError(
                f"{section}.absorbing_weight must be > 0 or null, got {self.absorbing_weight}"
            )
        if self.reward not in REWARDS:
            raise ValueError(
                f"{section}.reward must be one of {sorted(REWARDS)}, got {self.reward!r}"
            )
        if self.structured and self.ending:
            raise ValueError(
                f"{section}.structured scores every absorbing state alike: it cannot carry "
                f"the ending ({section}.ending=true)"
            )
        if self.entropy != 1.0 and not self.structured:
            raise ValueError(
                f"{section}.entropy weighs the log pi of the structured discriminator's reward: "
                f"it needs {section}.structured=true (got {section}.entropy={self.entropy})"
            )
        if self.sharpen_q and (not self.structured or self.entropy == 0):
            raise ValueError(
                f"{section}.sharpen_q sharpens the structured discriminator's q by 1 / "
                f"{section}.entropy: it needs {section}.structured=true and {section}.entropy "
                f"> 0 (got structured={self.structured}, entropy={self.entropy})"
            )
        for name in ("n_layer", "grad_penalty", "entropy"):
            if getattr(self, name) < 0:
                raise ValueError(f"{section}.{name} must be >= 0, got {getattr(self, name)}")


@dataclass
class GAILConfig(DiscriminatorSettings):
    """GAIL (algo=gail): PPO on a reward learned from the recordings in bc.demos."""

    coef: float = 1.0
    """Weight of the learned reward."""
    env_reward: float = 0.0
    """Weight of the environment's reward added to it (0: imitation alone)."""
    batches: int = 8
    """Discriminator steps per iteration, each on ``bs`` policy and ``bs`` expert steps."""
    bs: int = 256
    """Steps of each side in a discriminator minibatch."""

    def __post_init__(self) -> None:
        self.check_discriminator("gail")
        require_positive("gail", batches=self.batches, bs=self.bs)
        for name in ("coef", "env_reward"):
            if getattr(self, name) < 0:
                raise ValueError(f"gail.{name} must be >= 0, got {getattr(self, name)}")


@dataclass
class Steps:
    """Steps of one side: observations, the actions taken in them and, per row, whether the
    step ended its episode by the task (an absorbing state follows it)."""

    obs: VecObs
    actions: Actions
    terminal: npt.NDArray[np.bool_]

    @property
    def num_rows(self) -> int:
        return self.obs.num_rows

    def take(self, rows: npt.NDArray[np.int64]) -> Steps:
        actions = {name: a.take(rows) for name, a in self.actions.items()}
        return Steps(self.obs.take(rows), actions, self.terminal[rows])


def horizon(gamma: float) -> float:
    """The occupancy an absorbing state stands for against one step: ``1 / (1 - gamma)``
    (``gamma`` below 1)."""
    if not 0 <= gamma < 1:
        raise ValueError(f"absorbing states need a discount below 1, got gamma={gamma}")
    return 1 / (1 - gamma)


def weighted_bce(logits: torch.Tensor, label: float, weights: torch.Tensor) -> torch.Tensor:
    """The binary cross-entropy of ``logits`` against ``label``, averaged with ``weights``."""
    losses = functional.binary_cross_entropy_with_logits(
        logits, torch.full_like(logits, label), reduction="none"
    )
    return (losses * weights).sum() / weights.sum()


def gradient_penalty(
    head: nn.Module, expert: torch.Tensor, policy: torch.Tensor, mix: torch.Tensor
) -> torch.Tensor:
    """WGAN-GP's ``mean((|grad_z head(z)| - 1)^2)`` at ``z = mix * expert + (1 - mix) *
    policy`` (rows paired in order; ``mix``: one weight in [0, 1] per row)."""
    points = (mix[:, None] * expert + (1 - mix[:, None]) * policy).requires_grad_(True)
    (grad,) = torch.autograd.grad(head(points).sum(), points, create_graph=True)
    return ((grad.norm(dim=1) - 1) ** 2).mean()


class PolicyRatio(nn.Module):
    """The structured discriminator's logit from its embedded inputs ``[absorbing, value, per
    action: log q, log pi]``: ``sum(log q) - log pi`` for a step, one number for an absorbing
    state (set by :func:`absorbing_logit`, not trained: a buffer)."""

    def __init__(self) -> None:
        super().__init__()
        self.absorbing: torch.Tensor
        self.register_buffer("absorbing", torch.zeros(()))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        step = z[:, 2:-1].sum(1) - z[:, -1]
        return torch.where(z[:, 0] > 0, self.absorbing, step)[:, None]


class DiscriminatorSaturationWarning(UserWarning):
    """The discriminator tells the expert's steps from the policy's almost perfectly, for long:
    its reward no longer guides the policy."""


class SaturationWatch:
    """Warns once when the accuracy on both sides stays at or above ``threshold`` for
    :data:`SATURATED_STEPS` discriminator steps in a row."""

    def __init__(self, threshold: float, section: str) -> None:
        self.threshold = threshold
        self.section = section
        self.run = 0  # consecutive saturated steps so far
        self.warned = False

    def observe(self, expert_accuracy: float, policy_accuracy: float) -> None:
        saturated = min(expert_accuracy, policy_accuracy) >= self.threshold
        self.run = self.run + 1 if saturated else 0
        if self.run >= SATURATED_STEPS and not self.warned:
            self.warned = True
            s = self.section
            warnings.warn(
                f"{s}: the discriminator has told the expert's steps from the policy's with "
                f"accuracy >= {self.threshold} on both sides for {SATURATED_STEPS} steps in a "
                f"row (last: expert {expert_accuracy:.3f}, policy {policy_accuracy:.3f}); its "
                "reward no longer guides the policy. Try: a gradient penalty "
                f"({s}.grad_penalty=10 or more), absorbing states ({s}.absorbing=true) if "
                f"episodes end early, a weaker discriminator (lower {s}.lr, {s}.d_model or "
                "fewer discriminator steps), or more expert episodes in bc.demos",
                DiscriminatorSaturationWarning,
                stacklevel=2,
            )


def absorbing_logit(
    expert: tuple[float, float], policy: tuple[float, float], weight: float
) -> float:
    """The one logit of every absorbing state that minimizes the discriminator's loss, from each
    side's (rows, endings by the task): ``log(a_E / a_pi)``, ``a`` a side's share of absorbing
    states in its weighted loss, ``weight * endings / (rows + weight * endings)``.

    Each side's loss is a weighted mean, so over this one number it is
    ``a_E softplus(-c) + a_pi softplus(c)``, least at ``sigmoid(c) = a_E / (a_E + a_pi)``.
    Half an ending is added to each side: a side without endings would put ``c`` at infinity.
    """
    shares = [
        weight * (ends + 0.5) / (rows + weight * (ends + 0.5)) for rows, ends in (expert, policy)
    ]
    return float(np.log(shares[0] / shares[1]))


def _summed(
    heads: Mapping[str, HeadOutput], name: str, actions: Actions, rows: int
) -> torch.Tensor:
    """Per row (of ``rows``), the sum over its actors of the log-probability ``heads[name]``
    gives the actor's chosen choice."""
    logprob = heads[name].logprob
    index = torch.from_numpy(actions[name].row_index()).to(logprob.device)
    return logprob.new_zeros(rows).index_add(0, index, logprob)


def endings(steps: Steps, most: int = 1024) -> Steps:
    """The rows of ``steps`` that ended their episode by the task (the first ``most``)."""
    return steps.take(np.flatnonzero(steps.terminal)[:most])


def _sample(steps: Steps, bs: int, rng: np.random.Generator) -> Steps:
    """``bs`` rows drawn with replacement, or all rows when there are no more."""
    if steps.num_rows <= bs:
        return steps
    return steps.take(rng.choice(steps.num_rows, size=bs))


class Discriminator:
    """The discriminator of one training process and its optimizer; ``section`` names its
    settings in messages ("gail", "dac")."""

    def __init__(
        self,
        obs_space: ObsSpace,
        action_space: ActionSpaces,
        settings: DiscriminatorSettings,
        section: str,
        optim: OptimConfig,
        device: torch.device,
        policy: RogueNet | None = None,
    ) -> None:
        if settings.structured and policy is None:
            raise ValueError(f"{section}.structured needs the learner's policy")
        self.settings = settings
        self.policy = policy  # the learner's network (read, never trained here)
        self.max_grad_norm = optim.max_grad_norm
        self.action_names = list(action_space)
        net_config = RogueNetConfig(
            d_model=settings.d_model,
            n_layer=settings.n_layer,
            n_head=settings.n_head,
            relpos=settings.relpos,
        )
        self.net = RogueNet(obs_space, action_space, net_config, device=device)
        self.head: nn.Module = (
            PolicyRatio()
            if settings.structured
            else nn.Sequential(
                nn.Linear(2 + len(action_space), _HIDDEN), nn.Tanh(), nn.Linear(_HIDDEN, 1)
            )
        ).to(device)
        self.model = nn.ModuleDict({"net": self.net, "head": self.head})
        self.optimizer: FlatOptimizer = adam(
            self.model,
            OptimConfig(lr=settings.lr, eps=optim.eps, max_grad_norm=optim.max_grad_norm),
        )
        self.watch = SaturationWatch(settings.saturation, section)

    def embedded(self, obs: VecObs, actions: Actions) -> torch.Tensor:
        """Per row, the embedded inputs ``[0, value, per action: the sum over the actors of
        the log-probability of the chosen choice]`` (with gradients); structured, one more
        column: the same sum over every action under the learner's policy (without)."""
        out = self.net.evaluate(obs, actions)
        columns = [torch.zeros_like(out.values), out.values]
        rows = obs.num_rows
        columns += [_summed(out.heads, name, actions, rows) for name in self.action_names]
        if self.policy is not None and self.settings.structured:
            with torch.no_grad():
                heads = self.policy.evaluate(obs, actions).heads
                policy = [_summed(heads, name, actions, rows) for name in self.action_names]
                columns.append(torch.stack(policy).sum(0))
        return torch.stack(columns, dim=1)

    def absorbing_inputs(self, ended: torch.Tensor) -> torch.Tensor:
        """The embedded inputs of the absorbing states that follow the steps whose embedded
        inputs are ``ended``: the indicator, and (``ending``) the rest of the step's."""
        z = ended.clone() if self.settings.ending else torch.zeros_like(ended)
        z[:, 0] = 1.0
        return z

    def logits(self, z: torch.Tensor) -> torch.Tensor:
        return self.head(z)[:, 0]

    def reward_of(self, z: torch.Tensor) -> torch.Tensor:
        """The learned reward of the embedded inputs ``z``."""
        return REWARDS[self.settings.reward](self.logits(z))

    @torch.no_grad()
    def reference(self, endings: Steps | None) -> float:
        """The reward every reward is measured from: the mean reward of the absorbing states
        after ``endings`` (the expert's endings by the task; 0 without any)."""
        if not self.settings.absorbing or endings is None or endings.num_rows == 0:
            return 0.0
        self.model.eval()
        z = self.absorbing_inputs(self.embedded(endings.obs, endings.actions))
        return float(self.reward_of(z).mean())

    @torch.no_grad()
    def rewards(self, steps: Steps, gamma: float, reference: float) -> npt.NDArray[np.float32]:
        """Per row of ``steps``, its learned reward less ``reference``; with absorbing states
        that carry their ending, a row that ended its episode by the task adds the value of
        the absorbing state after it, ``gamma / (1 - gamma)`` times its reward less
        ``reference`` (see the module's doc)."""
        self.model.eval()
        z = self.embedded(steps.obs, steps.actions)
        learned = self.reward_of(z) - reference
        if self.settings.structured and self.settings.entropy != 1.0:
            # The logit holds -1 log pi (its last embedded input): keep `entropy` of it.
            learned = learned + (1.0 - self.settings.entropy) * z[:, -1]
        if self.settings.sharpen_q:
            learned = learned - self.sharpening_cost(steps.obs, steps.actions)
        ended = torch.from_numpy(np.flatnonzero(steps.terminal)).to(z.device)
        # With one absorbing state its reward is the reference and the term is 0.
        if self.settings.absorbing and self.settings.ending and len(ended):
            after = self.reward_of(self.absorbing_inputs(z[ended])) - reference
            learned = learned.index_add(0, ended, (horizon(gamma) - 1) * after)
        return learned.cpu().numpy().astype(np.float32)

    def sharpening_cost(self, obs: VecObs, actions: Actions) -> torch.Tensor:
        """Per row, the sum over its actors of ``entropy * log sum_b q(b)^(1 / entropy)``:
        what ``log q - entropy * log pi`` pays a policy at its best, ``q^(1 / entropy)``
        normalized (0 at entropy 1, below 0 under it); ``q`` over each actor's legal
        choices, the actors in the order of ``actions``."""
        # Imported here: the algorithms' package imports the training config, which imports
        # this module's settings.
        from entityrl.algorithms.sac.policy import masked_policy

        alpha = self.settings.entropy
        cost = torch.zeros(obs.num_rows, device=self.net.device)
        for name, scores in self.net.choice_scores(obs).items():
            q = masked_policy(scores)
            sharp = (q.logprobs / alpha).masked_fill(~q.legal, -torch.inf)
            per_actor = alpha * torch.logsumexp(sharp, dim=1)
            # An actor without a legal choice has nothing to choose: no cost.
            per_actor = torch.where(q.legal.any(1), per_actor, torch.zeros_like(per_actor))
            rows = torch.from_numpy(actions[name].row_index()).to(cost.device)
            cost = cost.index_add(0, rows, per_actor.to(cost.dtype))
        return cost

    def side(self, steps: Steps, gamma: float) -> tuple[torch.Tensor, torch.Tensor]:
        """The embedded inputs of ``steps`` followed (with absorbing states) by the absorbing
        state after each step that ended its episode by the task, and the weight of each in
        the loss (1 for a step, ``absorbing_weight`` for an absorbing state)."""
        z = self.embedded(steps.obs, steps.actions)
        weights = torch.ones(len(z), device=z.device)
        if not self.settings.absorbing:
            return z, weights
        absorbing = self.absorbing_inputs(z[torch.from_numpy(np.flatnonzero(steps.terminal))])
        weight = self.settings.absorbing_weight or horizon(gamma)
        return (
            torch.cat([z, absorbing]),
            torch.cat([weights, torch.full((len(absorbing),), weight, device=z.device)]),
        )

    def update(
        self,
        policy: Steps,
        expert: Steps,
        rng: np.random.Generator,
        batches: int,
        bs: int,
        gamma: float,
        reducer: Reducer | None = None,
    ) -> dict[str, float]:
        """``batches`` steps on the binary cross-entropy of expert (1) against policy (0)
        steps, each side sampled ``bs`` rows at a time (all of them when it has no more) and
        weighted as :meth:`side` says, plus the gradient penalty; the mean loss, penalty and
        accuracies.

        In a data-parallel run (``reducer``) each process samples ``bs / world_size`` rows of
        each side (its own rollout's, and expert rows drawn with its own generator), and the
        processes' gradients and statistics are averaged: one step as on ``bs`` rows."""
        reducer = reducer or Reducer()
        share = reducer.world_size
        bs = max(bs // share, 1)
        if isinstance(self.head, PolicyRatio) and self.settings.absorbing:
            # Set, not learned: as one parameter under Adam it moves at most about lr per step,
            # and lags its optimum by far for hundreds of iterations (measured on MultiSnake:
            # -0.19 after 784 steps at lr 3e-4 against about -1.1), and with it the reward
            # of staying alive against ending.
            counts = reducer.sum(
                [s.num_rows for s in (expert, policy)]
                + [float(s.terminal.sum()) for s in (expert, policy)]
            )
            weight = self.settings.absorbing_weight or horizon(gamma)
            self.head.absorbing.fill_(
                absorbing_logit((counts[0], counts[2]), (counts[1], counts[3]), weight)
            )
        self.model.train()
        totals = np.zeros(4)
        for _ in range(batches):
            (expert_z, expert_w), (policy_z, policy_w) = (
                self.side(_sample(s, bs, rng), gamma) for s in (expert, policy)
            )
            expert_logits, policy_logits = self.logits(expert_z), self.logits(policy_z)
            loss = weighted_bce(expert_logits, 1.0, expert_w) + weighted_bce(
                policy_logits, 0.0, policy_w
            )
            penalty = torch.zeros(())
            # Structured, the logit has slope 1 in every log-probability: nothing to hold.
            if self.settings.grad_penalty and not self.settings.structured:
                # Random pairs: each side's absorbing states come last.
                pairs = min(len(expert_z), len(policy_z))
                e, p = (
                    torch.from_numpy(rng.permutation(len(z))[:pairs]) for z in (expert_z, policy_z)
                )
                mix = torch.from_numpy(rng.random(pairs, dtype=np.float32)).to(expert_z.device)
                penalty = gradient_penalty(
                    self.head, expert_z[e].detach(), policy_z[p].detach(), mix
                )
            self.optimizer.zero_grad()
            # Summed over the processes by the optimizer: each contributes its share of the mean.
            ((loss + self.settings.grad_penalty * penalty) / share).backward()
            self.optimizer.step(self.max_grad_norm, reducer)
            step = (
                reducer.sum(
                    [
                        loss.item(),
                        penalty.item(),
                        float((expert_logits > 0).float().mean()),
                        float((policy_logits < 0).float().mean()),
                    ]
                )
                / share
            )
            self.watch.observe(step[2], step[3])  # every process decides on the same figures
            totals += step
        loss_, penalty_, expert_acc, policy_acc = totals / batches
        return {
            "loss": loss_,
            "grad_penalty": penalty_,
            "expert_accuracy": expert_acc,
            "policy_accuracy": policy_acc,
        }

    def state_dict(self) -> dict[str, object]:
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, object]) -> None:
        self.model.load_state_dict(state["model"])  # type: ignore[arg-type]
        optimizer: dict[str, Any] = state["optimizer"]  # type: ignore[assignment]
        if isinstance(self.head, PolicyRatio):
            optimizer = _without_trained_absorbing(optimizer, len(self.optimizer.params))
        self.optimizer.load_state_dict(optimizer)


def _without_trained_absorbing(state: dict[str, Any], params: int) -> dict[str, Any]:
    """A structured discriminator's optimizer state as checkpoints before 326d69b hold it, with
    the absorbing logit as its last parameter, without that one (it is set now, not trained);
    any other state as it is."""
    (group,) = state["param_groups"]
    ids = list(group["params"])
    if len(ids) != params + 1:
        return state
    kept = {i: entry for i, entry in state["state"].items() if i != ids[-1]}
    return {"state": kept, "param_groups": [{**group, "params": ids[:-1]}]}
