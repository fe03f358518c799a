"""The paper's estimators of task times (Eden, section 3.3.1, Eqs. 8-10), beside the Monte-Carlo
measurement of :mod:`entityrl.envs.survival.metrics`.

- **Eq. 8**: ``TTMN^(T) = E(t_T) = g(T) + e(T)``, where ``g(T)`` is the number of distinct
  action types other than moving that the task needs, and ``e(T)`` the environment's share:
  the repeats of those actions (three attacks for a pig of 3 hp) plus the steps spent moving to
  the creatures the task needs (measured as the mean distance from the agent's start to the
  nearest one, over freshly generated maps).
- **Eq. 9**: with ``E = ceil(E(t_T))`` necessary actions, each taken with probability ``p*_j`` at
  a step and a useless one with ``p_j = 1 - p*_j`` otherwise, the probability that the task is
  first done at step ``t`` is the sum over the ways of spreading ``t - E`` useless steps before
  the ``E`` useful ones. It is 0 before step ``E`` (the paper's second branch, the product of
  the first ``t`` probabilities, would give a task of ``E`` actions a chance of being done in
  fewer; we read it as impossible).
- **Eq. 10**: ``TTMX^(T)``, the smallest ``t`` at which the probability of having done the task
  (the sum of Eq. 9 up to ``t``, the left side of Eq. 6) reaches the threshold ``th``.

A uniformly random policy picks each of the action space's ``k`` choices with probability
``1/k``, so ``p*_j = 1/k`` for every necessary action.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from entityrl.envs.survival.config import ConfigSource
from entityrl.envs.survival.rules import ATTACK, ATTACK_RANGE, MOVE_SPEED, REACH, Rules
from entityrl.envs.survival.world import SurvivalWorld

FloatArray = npt.NDArray[np.float64]


# ---------------------------------------------------------------------------- Eqs. 9 and 10
def first_completion(p_star: Sequence[float], max_steps: int) -> FloatArray:
    """Eq. 9: ``out[t]`` is the probability that the task is first done at step ``t``
    (``t = 0 .. max_steps``) when its ``j``-th necessary action is taken with probability
    ``p_star[j]`` at each step until it is."""
    probabilities = np.asarray(p_star, dtype=np.float64)
    if probabilities.ndim != 1 or not ((probabilities > 0) & (probabilities <= 1)).all():
        raise ValueError(f"p_star must be probabilities in (0, 1], got {list(p_star)}")
    steps = np.arange(max_steps + 1)
    out = np.zeros(max_steps + 1)
    out[0] = 1.0  # nothing to do yet: done at step 0
    for p in probabilities:
        # Waiting n useless steps then one useful: p_j^n * p*_j, at step n + 1.
        wait = np.where(steps >= 1, (1 - p) ** np.maximum(steps - 1, 0) * p, 0.0)
        out = np.convolve(out, wait)[: max_steps + 1]
    return out


def estimated_ttmx(p_star: Sequence[float], threshold: float, max_steps: int) -> float:
    """Eq. 10: the smallest step by which the task is done with probability ``threshold``
    (``inf`` if not within ``max_steps``)."""
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    done_by = np.cumsum(first_completion(p_star, max_steps))
    reached = np.flatnonzero(done_by >= threshold - 1e-12)
    return float(reached[0]) if reached.size else math.inf


# ---------------------------------------------------------------------------- Eq. 8
@dataclass
class TaskChain:
    """What a task needs: how many times each action type other than moving, and which
    creature types the agent must reach (to attack or collect from)."""

    actions: dict[str, int] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)
    yields: int = 1  # units of the item obtained by doing the actions once

    def add(self, other: TaskChain, times: int = 1) -> None:
        for action, count in other.actions.items():
            self.actions[action] = self.actions.get(action, 0) + count * times
        self.sources += [s for s in other.sources if s not in self.sources]

    @property
    def g(self) -> int:
        """Eq. 8's g(T): distinct action types other than moving."""
        return len(self.actions)

    @property
    def repeats(self) -> int:
        return sum(self.actions.values()) - self.g


def task_chain(rules: Rules, event: str) -> TaskChain:
    """The fewest actions that do ``event`` (``consume:water``, ``kill:pig``, ...) in a world
    where nothing is carried at the start: items come from the drop table or a recipe."""
    kind, _, name = event.partition(":")
    chain = TaskChain({kind: 1})
    table = rules.creatures
    if kind in ("attack", "kill", "collect"):
        k = table.names.index(name)
        chain.sources.append(name)
        if kind == "kill":
            attack = max(float(rules.stat_base[ATTACK]), 1.0)
            chain.actions = {"attack": math.ceil(table.hp[k] / attack)}
        return chain
    if kind == "synthesize":
        chain.add(_inputs(rules, name, set()))
    else:  # consume, equip, pickup: the item must be obtained first
        chain.add(_obtain(rules, name, set()), 1)
        if kind == "pickup":
            chain.actions["pickup"] = 1
    return chain


def _obtain(rules: Rules, item: str, seen: set[str]) -> TaskChain:
    """Cheapest way to have one unit of ``item`` in the backpack."""
    if item in seen:
        raise ValueError(f"{rules.config.name}: item {item!r} is needed to make itself")
    seen = seen | {item}
    items, table = rules.items, rules.creatures
    i = items.names.index(item)
    options: list[TaskChain] = []
    for k, creature in enumerate(table.names):
        if table.collect_drops[k, i]:
            yields = int(table.collect_drops[k, i])
            options.append(TaskChain({"collect": 1, "pickup": 1}, [creature], yields))
        if table.kill_drops[k, i]:
            attack = max(float(rules.stat_base[ATTACK]), 1.0)
            hits = math.ceil(table.hp[k] / attack)
            yields = int(table.kill_drops[k, i])
            options.append(TaskChain({"attack": hits, "pickup": 1}, [creature], yields))
    recipe = np.flatnonzero(rules.recipes.outputs == i)
    if recipe.size:
        r = int(recipe[0])
        made = TaskChain({"synthesize": 1})
        made.add(_inputs(rules, item, seen))
        made.yields = int(rules.recipes.delta[r, i] + rules.recipes.inputs[r, i])
        options.append(made)
    if not options:
        raise ValueError(f"{rules.config.name}: item {item!r} cannot be obtained in this world")
    return min(options, key=lambda c: (sum(c.actions.values()), len(c.sources)))


def _inputs(rules: Rules, output: str, seen: set[str]) -> TaskChain:
    """Everything a recipe's inputs need (one pickup per stack: units of one item collected
    in one place are picked up together)."""
    r = [rules.items.names[o] for o in rules.recipes.outputs].index(output)
    chain = TaskChain()
    for i in np.flatnonzero(rules.recipes.inputs[r]):
        one = _obtain(rules, rules.items.names[i], seen | {output})
        rounds = math.ceil(int(rules.recipes.inputs[r, i]) / one.yields)
        gather = {a: (c * rounds if a != "pickup" else c) for a, c in one.actions.items()}
        chain.add(TaskChain(gather, one.sources))
    return chain


def mean_moves(env: SurvivalWorld, sources: Sequence[str]) -> float:
    """Steps of moving to reach each of ``sources`` in turn from the agent's start, averaged
    over the copies' fresh maps (copies where a source does not exist are left out)."""
    rules, s = env.rules, env.state
    env.reset()
    table = rules.creatures
    total = 0.0
    for name in sources:
        k = table.names.index(name)
        block = slice(int(table.block_start[k]), int(table.block_end[k]))
        distance = np.maximum(
            np.abs(s.creature_x[:, block] - s.x[:, None]),
            np.abs(s.creature_y[:, block] - s.y[:, None]),
        )
        nearest = np.where(s.alive[:, block], distance, np.iinfo(np.int64).max).min(axis=1)
        present = s.alive[:, block].any(axis=1)
        if not present.any():
            return math.inf
        near = ATTACK_RANGE if table.attackable[k] and not table.collectable[k] else REACH
        gap = np.maximum(nearest[present] - rules.stat_base[near], 0)
        total += float(np.ceil(gap / max(rules.stat_base[MOVE_SPEED], 1)).mean())
    return total


# ---------------------------------------------------------------------------- per task
@dataclass
class TaskEstimate:
    """The paper's estimates for one task: g(T), e(T), TTMN^ = E(t_T) and TTMX^."""

    task: str
    event: str
    g: int
    e: float
    ttmn: float
    ttmx: float
    choices: int  # k: a necessary action has p* = 1/k


def estimate_task_times(
    config: ConfigSource,
    tasks: Sequence[str] | None = None,
    *,
    actions: str = "simple",
    threshold: float = 0.9,
    max_steps: int = 10_000,
    maps: int = 256,
    seed: int = 0,
) -> list[TaskEstimate]:
    """Eqs. 8-10 for ``tasks`` (default: all the config's tasks); moves are averaged over
    ``maps`` freshly generated maps."""
    env = SurvivalWorld(maps, seed, config=config, actions=actions)
    rules = env.rules
    names = list(tasks) if tasks is not None else list(rules.tasks)
    unknown = [t for t in names if t not in rules.tasks]
    if unknown:
        raise KeyError(
            f"{rules.config.name}: unknown task {unknown[0]!r}; expected one of: "
            f"{', '.join(rules.tasks) or 'none (the config lists no tasks)'}"
        )
    choices = len(env.action_space["act"].choices)  # type: ignore[union-attr]
    results = []
    for name in names:
        event = rules.config.tasks[name]
        chain = task_chain(rules, event)
        e = chain.repeats + mean_moves(env, chain.sources)
        ttmn = chain.g + e
        stages = math.ceil(ttmn) if math.isfinite(ttmn) else 0
        high = estimated_ttmx([1 / choices] * stages, threshold, max_steps) if stages else math.inf
        results.append(TaskEstimate(name, event, chain.g, e, ttmn, high, choices))
    return results
