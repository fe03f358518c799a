"""How hard a survival world's tasks are, measured with random policies (Eden, section 3.3).

- **TTMN / TTMX** of a task (``consume:water``, ``synthesize:torch``, ...): each copy of the
  world plays one episode with uniformly random legal actions, and the step at which the task
  is first done is recorded. TTMX is the Monte-Carlo form of the paper's Eq. (6): the smallest
  ``t`` at which the share of episodes that have done the task by step ``t`` reaches the
  threshold ``th``. TTMN, the fewest steps that can do the task, is estimated by the fewest seen.
- **Goal difficulty levels** (section 3.3.2): [TTMN, TTMX] is cut into ``n`` equal parts with
  ends ``TTMN = a_0 < a_1 < ... < a_n = TTMX``. The paper's literal reading (``order="paper"``,
  the default): the goal "do the task before step ``a_i``" has level ``i + 1`` for
  ``i = 0 .. n - 1``, so level 1 (deadline TTMN) is the tightest. ``order="easiest_first"``
  numbers the deadlines ``a_1 .. a_n`` from the loosest: level 1 is ``a_n = TTMX``.
  The paper's estimators of TTMN and TTMX (Eqs. 8-10) are in
  :mod:`entityrl.envs.survival.task_times`.
- **Policy information capacity** (Furuta et al. 2021; the paper's Eq. (12)): the mutual
  information between the episode return and the parameters of a random policy, estimated by
  binning all returns into ``B`` equal bins between their minimum and maximum, with more bins
  than episodes per policy (``B > M``, the paper's condition).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from entityrl.env.random_policy import RandomPolicy
from entityrl.env.vec_obs import VecObs
from entityrl.envs.survival.config import ConfigSource
from entityrl.envs.survival.policies import LinearSoftmaxPolicies
from entityrl.envs.survival.rewards import REWARD_MODES, Rewarder
from entityrl.envs.survival.world import SurvivalWorld
from entityrl.ragged import RaggedArray

FloatArray = npt.NDArray[np.float64]
Policy = Callable[[VecObs], dict[str, RaggedArray]]


@dataclass
class FirstEpisodes:
    """The first episode of every copy: its return under each reward mode, its length, and the
    step at which each task was first done (``inf`` if never)."""

    returns: dict[str, FloatArray]  # reward mode -> (copies,)
    lengths: npt.NDArray[np.int64]
    first: FloatArray  # (copies, tasks)
    tasks: list[str]


def play_first_episodes(
    env: SurvivalWorld,
    policy: Policy,
    tasks: Sequence[str],
    max_steps: int,
    until_tasks_done: bool = False,
) -> FirstEpisodes:
    """Play until every copy's first episode ended (or, with ``until_tasks_done``, did every
    task), at most ``max_steps`` steps; episodes still running count as they stand."""
    rules = env.rules
    events = np.array([rules.tasks[t] for t in tasks], dtype=np.int64)
    n = env.num_envs
    rewarders = {mode: Rewarder(rules, mode) for mode in REWARD_MODES}
    returns = {mode: np.zeros(n) for mode in REWARD_MODES}
    first = np.full((n, len(tasks)), np.inf)
    lengths = np.zeros(n, dtype=np.int64)
    running = np.ones(n, dtype=np.bool_)
    obs = env.reset()
    for step in range(1, max_steps + 1):
        obs = env.act(policy(obs))
        outcome = env.last_outcome
        for mode, rewarder in rewarders.items():
            returns[mode] += np.where(running, rewarder(outcome), 0.0)
        done_now = running[:, None] & (outcome.events[:, None] == events) & np.isinf(first)
        first[done_now] = step
        lengths += running
        running &= ~obs.done
        if until_tasks_done:
            running &= np.isinf(first).any(axis=1)
        if not running.any():
            break
    return FirstEpisodes(returns, lengths, first, list(tasks))


# ---------------------------------------------------------------------------- task times
@dataclass
class TaskDifficulty:
    """TTMN, TTMX and goal levels of one task under a uniformly random policy."""

    task: str
    event: str
    episodes: int
    completed: float  # share of episodes that did the task
    ttmn: float  # fewest steps seen (inf if never done)
    mean: float  # mean steps over the episodes that did it
    ttmx: float  # inf when the threshold is never reached
    deadlines: list[int]  # by goal level, level 1 first
    success: list[float]  # share of random episodes that meet each level's deadline


def ttmx(first: FloatArray, threshold: float) -> float:
    """Smallest ``t`` by which at least ``threshold`` of the episodes did the task."""
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    needed = int(np.ceil(threshold * first.shape[0] - 1e-9))
    ordered = np.sort(first)
    return float(ordered[needed - 1]) if needed >= 1 else 0.0


LEVEL_ORDERS = ("paper", "easiest_first")


def goal_deadlines(ttmn: float, ttmx_: float, levels: int, order: str = "paper") -> list[int]:
    """Deadlines of goal levels 1..n: [TTMN, TTMX] cut into ``levels`` parts with ends
    ``a_0 .. a_n``; ``paper``: level ``i + 1`` has deadline ``a_i`` (level 1 = TTMN, the
    tightest); ``easiest_first``: level 1 has ``a_n`` = TTMX, level ``n`` has ``a_1``.
    Deadlines that round to the same step are one level."""
    if levels < 1:
        raise ValueError(f"levels must be >= 1, got {levels}")
    if order not in LEVEL_ORDERS:
        raise ValueError(
            f"unknown level order {order!r}; expected one of {', '.join(LEVEL_ORDERS)}"
        )
    if not (np.isfinite(ttmn) and np.isfinite(ttmx_)):
        return []
    ends = np.round(ttmn + (ttmx_ - ttmn) * np.arange(levels + 1) / levels).astype(int)
    chosen = ends[:-1] if order == "paper" else ends[1:][::-1]
    return [int(e) for e in dict.fromkeys(chosen.tolist())]


def task_difficulty(
    config: ConfigSource,
    tasks: Sequence[str] | None = None,
    *,
    episodes: int = 500,
    threshold: float = 0.9,
    levels: int = 4,
    max_steps: int = 500,
    life_limit: int | None = None,
    actions: str = "full",
    order: str = "paper",
    seed: int = 0,
) -> list[TaskDifficulty]:
    """TTMN, TTMX and goal levels of ``tasks`` (default: all the config's tasks) from
    ``episodes`` random episodes of at most ``max_steps`` steps.

    ``life_limit`` defaults to ``max_steps``, so that starving does not cut the measurement
    short: the times then describe the task rather than the agent's survival.
    """
    env = SurvivalWorld(
        episodes,
        seed,
        config=config,
        life_limit=life_limit if life_limit is not None else max_steps,
        actions=actions,
        horizon=max_steps,
    )
    names = list(tasks) if tasks is not None else list(env.rules.tasks)
    _check_tasks(env, names)
    policy = RandomPolicy(env.action_space, seed=seed + 1)
    played = play_first_episodes(env, policy.act, names, max_steps, until_tasks_done=True)
    results = []
    for j, name in enumerate(names):
        first = played.first[:, j]
        done = np.isfinite(first)
        low = float(first.min())
        high = ttmx(first, threshold)
        deadlines = goal_deadlines(low, high, levels, order)
        results.append(
            TaskDifficulty(
                task=name,
                event=env.rules.config.tasks[name],
                episodes=episodes,
                completed=float(done.mean()),
                ttmn=low,
                mean=float(first[done].mean()) if done.any() else np.inf,
                ttmx=high,
                deadlines=deadlines,
                success=[float((first <= d).mean()) for d in deadlines],
            )
        )
    return results


def _check_tasks(env: SurvivalWorld, names: Sequence[str]) -> None:
    unknown = [t for t in names if t not in env.rules.tasks]
    if unknown:
        raise KeyError(
            f"{env.rules.config.name}: unknown task {unknown[0]!r}; expected one of: "
            f"{', '.join(env.rules.tasks) or 'none (the config lists no tasks)'}"
        )


# ---------------------------------------------------------------------------- PIC
def information_capacity(returns: FloatArray, bins: int) -> float:
    """The binned estimate of I(R; Θ) in nats from ``returns[policy, episode]``."""
    if returns.ndim != 2 or returns.shape[0] < 1 or returns.shape[1] < 1:
        raise ValueError(f"returns must be (policies, episodes), got shape {returns.shape}")
    if bins < 2:
        raise ValueError(f"bins must be >= 2, got {bins}")
    low, high = float(returns.min()), float(returns.max())
    if high <= low:
        return 0.0
    index = np.minimum(((returns - low) / (high - low) * bins).astype(np.int64), bins - 1)
    per_policy = np.zeros((returns.shape[0], bins))
    np.add.at(per_policy, (np.arange(returns.shape[0])[:, None], index), 1.0)
    per_policy /= returns.shape[1]
    pooled = per_policy.mean(axis=0)
    return _entropy(pooled) - float(np.mean([_entropy(p) for p in per_policy]))


def _entropy(p: FloatArray) -> float:
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


@dataclass
class CapacityReport:
    """PIC of the episode return under each reward mode, and of each goal (task, deadline)."""

    returns: dict[str, float]
    goals: dict[tuple[str, int], float]
    policies: int
    episodes: int
    bins: int
    mean_length: float


def policy_information_capacity(
    config: ConfigSource,
    *,
    policies: int = 32,
    episodes: int = 32,
    bins: int = 64,
    goals: dict[str, list[int]] | None = None,
    life_limit: int | None = None,
    max_steps: int = 1000,
    observation: str = "nearest1",
    seed: int = 0,
) -> CapacityReport:
    """PIC from ``policies`` random linear softmax policies (simple actions over a fixed-vector
    ``observation``), each playing ``episodes`` episodes. ``goals`` maps task names to
    deadlines: the goal "do the task within d steps" has return 1 if met, else 0. The
    paper's condition on the bins, ``B > M`` (``bins`` > ``episodes``), is checked."""
    if bins <= episodes:
        raise ValueError(
            f"bins must exceed the episodes per policy (the paper's B > M), got B = {bins}, "
            f"M = {episodes}"
        )
    env = SurvivalWorld(
        policies * episodes,
        seed,
        config=config,
        life_limit=life_limit,
        observation=observation,
        actions="simple",
        horizon=max_steps,
    )
    goals = goals or {}
    _check_tasks(env, list(goals))
    rng = np.random.default_rng(seed + 1)
    space = env.action_space["act"]
    policy = LinearSoftmaxPolicies(
        policies,
        episodes,
        len(env.obs_space.global_features),
        len(space),
        rng,  # type: ignore[arg-type]
    )
    played = play_first_episodes(env, policy.act, list(goals), max_steps)
    shape = (policies, episodes)
    capacity = {m: information_capacity(r.reshape(shape), bins) for m, r in played.returns.items()}
    goal_capacity = {
        (task, d): information_capacity(
            (played.first[:, j] <= d).astype(float).reshape(shape), bins
        )
        for j, (task, deadlines) in enumerate(goals.items())
        for d in deadlines
    }
    return CapacityReport(
        capacity, goal_capacity, policies, episodes, bins, float(played.lengths.mean())
    )
