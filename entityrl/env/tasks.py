"""Task families: natively batched environments whose episodes are drawn from a distribution of
tasks, with a seam to fix the task each copy plays.

A task is a non-negative integer that seeds everything an episode of that task draws at its
start (a map, a target, which arm pays): every episode of task ``k`` starts from the same
draws, whichever copy plays it and whatever happened before. A copy without a task
(:data:`NO_TASK`, the default) draws each episode from the environment's own generator, a new
task every episode.

:class:`TaskFamily` is the mixin such an environment takes: :meth:`TaskFamily.set_tasks` fixes
the tasks of some copies from their next reset on, and :meth:`TaskFamily.task_draws` tells the
environment's ``reset_envs`` which generator each copy draws its episode from.

The task ids are split in two disjoint ranges, meta-training and meta-test (held-out) tasks:
:func:`draw_tasks` draws from either (see :data:`SPLITS`).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]

NO_TASK = -1
"""The task of a copy that draws every episode from its environment's own generator."""
TASK_RANGE = 2**31
"""How many task ids each split holds: meta-training tasks are ``[0, TASK_RANGE)``, held-out
(meta-test) tasks ``[TASK_RANGE, 2 * TASK_RANGE)``."""
SPLITS = {"train": 0, "test": TASK_RANGE}
"""The first task id of each split."""


def draw_tasks(rng: np.random.Generator, n: int, split: str, pool: int | None = None) -> IntArray:
    """``n`` task ids drawn uniformly from ``split`` (``train`` or ``test``): from its first
    ``pool`` ids (a finite set of tasks), or from all of them (``pool=None``)."""
    if split not in SPLITS:
        raise ValueError(f"unknown task split {split!r}; expected one of {', '.join(SPLITS)}")
    check_pool(pool)
    return SPLITS[split] + rng.integers(0, pool or TASK_RANGE, size=n, dtype=np.int64)


def check_pool(pool: int | None) -> None:
    """ValueError unless ``pool`` (how many tasks of a split to draw from) is None or in
    ``[1, TASK_RANGE]``."""
    if pool is not None and not 1 <= pool <= TASK_RANGE:
        raise ValueError(f"a task pool holds 1 to {TASK_RANGE} tasks, got {pool}")


def split_of(task: int) -> str:
    """The split a task id belongs to."""
    if not 0 <= task < 2 * TASK_RANGE:
        raise ValueError(f"a task id is in [0, {2 * TASK_RANGE}), got {task}")
    return "train" if task < TASK_RANGE else "test"


class TaskFamily:
    """Mixin of a natively batched environment whose episodes are drawn from a task
    distribution (see the module's description). Call :meth:`init_tasks` in ``__init__`` and
    draw each reset copy's episode from the generator :meth:`task_draws` gives it."""

    tasks: IntArray
    """Per copy, the task its next episodes play (:data:`NO_TASK`: a new one each episode)."""

    def init_tasks(self, num_envs: int, task: int | None = None) -> None:
        """Every copy plays ``task`` (None: draws a new task every episode)."""
        if task is not None and task < 0:
            raise ValueError(f"{type(self).__name__}: task must be >= 0 or None, got {task}")
        self.tasks = np.full(num_envs, NO_TASK if task is None else task, dtype=np.int64)

    def set_tasks(self, envs: IntArray, tasks: IntArray) -> None:
        """Copies ``envs`` play ``tasks`` (one per copy; :data:`NO_TASK`: a new task every
        episode) from their next reset on; the episodes under way go on unchanged."""
        envs, tasks = np.asarray(envs, dtype=np.int64), np.asarray(tasks, dtype=np.int64)
        if envs.shape != tasks.shape:
            raise ValueError(
                f"{type(self).__name__}.set_tasks: expected one task per copy, got "
                f"{tasks.shape[0] if tasks.ndim else 'a scalar'} tasks for {envs.shape[0]} copies"
            )
        if (tasks < NO_TASK).any():
            raise ValueError(
                f"{type(self).__name__}.set_tasks: task ids are >= 0 (or {NO_TASK}: none), got "
                f"{tasks[tasks < NO_TASK][0]}"
            )
        self.tasks[envs] = tasks

    def task_draws(
        self, envs: IntArray, rng: np.random.Generator
    ) -> Iterator[tuple[IntArray, np.random.Generator]]:
        """Copies ``envs`` in groups, each with the generator its new episodes draw from: the
        copies without a task together, from ``rng`` (the environment's own); each copy with a
        task alone, from a fresh generator of its task."""
        tasks = self.tasks[envs]
        free = envs[tasks == NO_TASK]
        if free.size:
            yield free, rng
        for env, task in zip(envs[tasks != NO_TASK], tasks[tasks != NO_TASK], strict=True):
            yield np.array([env], dtype=np.int64), np.random.default_rng(int(task))
