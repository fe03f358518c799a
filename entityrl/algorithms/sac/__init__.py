"""Soft actor-critic (``algo=sac``) for entity environments: discrete SAC (Christodoulou 2019)
for categorical, global categorical and select-entity actions, Gaussian SAC (Haarnoja et al.
2018) for continuous ones, in any mix, with an automatic entropy temperature per action.

The policy is the run's RogueNet (so ``entityrl eval``, ``play`` and ``export`` use it): its
discrete heads' scores are logits, its Gaussian heads' means the squashed mean actions (see
:mod:`entityrl.algorithms.sac.policy`). Two critics (:mod:`entityrl.algorithms.sac.critic`),
their slowly moving targets, the temperatures and every optimizer are SAC's own, kept in
checkpoints.

Rows with several actors (value decomposition, as docs/algorithms.md's SumDQN): a row's Q-value
is the sum over its actors (of every action) of ``Q_i(s, a_i)``; the soft value of the next row
is the sum over its actors of ``E_pi[min(Q1_i, Q2_i) - alpha log pi_i]``, the actors' policies
being independent given the state; the policy's loss is the sum over a row's actors of
``E_pi[alpha log pi_i - min(Q1_i, Q2_i)]``. One temperature per action: the entropies of
discrete and continuous actions are on different scales. Its target, per actor: for discrete
actions ``sac.target_entropy_scale * log(legal choices)`` (actors with one legal choice or none
are left out), for continuous ones ``-dims`` of the action in units of the half range.
"""

from entityrl.algorithms.sac.algorithm import SAC, SACSettings

__all__ = ["SAC", "SACSettings"]
