"""Meta-RL trials (RL^2: Duan et al. 2016; Wang et al. 2016): a task family as one environment
whose episode is a trial, ``episodes`` episodes of one task.

:class:`Trials` wraps a :class:`~entityrl.env.tasks.TaskFamily` (a natively batched
environment whose copies can be given a task). At the start of a trial it draws a task for the
copy from its split (``train``: meta-training tasks; ``test``: held-out tasks, disjoint from
them, see :mod:`entityrl.env.tasks`), and the copy plays that task ``episodes`` times in a
row. The trial is the wrapper's episode: it ends (``done``) when the last of its inner
episodes does, and only then is the next task drawn. An inner episode that ends before
restarts the same task, without ending the wrapper's episode.

So a policy with memory (``net.memory``) keeps its state across the inner episodes of a trial
and starts afresh with each trial: what it learned of the task in one episode it can use in the
next. To learn that, it sees, next to the task's own observation, three more kinds of global
features about the step before: ``prev_reward`` (its reward), ``prev_done`` (1 if an inner
episode ended on it: this observation starts the next one) and ``prev_<action>=<label>`` (per
categorical action, how many actors chose each label: the one-hot of the previous action when
one actor takes it). All are 0 at a trial's start.

Each ended trial reports, per inner episode ``i`` (1 to ``episodes``), ``episode<i>/return``,
``episode<i>/length`` and the task's own metrics of that episode (``episode<i>/<metric>``),
next to the trial's ``episode_return`` and ``episode_length``. Rewards are the task's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt

from entityrl.env.batched import BatchedEnvironment
from entityrl.env.spaces import (
    CategoricalActionSpace,
    GlobalCategoricalActionSpace,
    ObsSpace,
)
from entityrl.env.tasks import NO_TASK, SPLITS, TaskFamily, check_pool, draw_tasks
from entityrl.env.vec_obs import VecObs
from entityrl.ragged import RaggedArray

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

TRIAL_FEATURES = ("prev_reward", "prev_done")
"""The global features every trial adds before the previous action's."""
CHOICE_SPACES = (CategoricalActionSpace, GlobalCategoricalActionSpace)


class Trials(BatchedEnvironment):
    """Trials of ``episodes`` episodes of one task of the family ``env`` (a registered task
    family, built with ``env_kwargs``), the tasks drawn from ``split`` (``train`` or ``test``;
    ``tasks``: draw from the first ``tasks`` ids of the split only, a finite set; None: from all
    of them). See the module's description.

    Optimal return: the task's, summed over ``episodes`` episodes in which what the earlier
    ones showed of the task is used.
    """

    def __init__(
        self,
        num_envs: int = 1,
        seed: int | None = None,
        *,
        env: str = "RiverNavigation",
        env_kwargs: Mapping[str, Any] | None = None,
        episodes: int = 2,
        split: str = "train",
        tasks: int | None = None,
        validate: bool = False,
    ) -> None:
        from entityrl.envs import make_vec  # the registry imports this module

        if episodes < 1:
            raise ValueError(f"Trials: episodes (per trial) must be >= 1, got {episodes}")
        if split not in SPLITS:
            raise ValueError(f"Trials: split must be one of {', '.join(SPLITS)}, got {split!r}")
        check_pool(tasks)
        super().__init__(num_envs, seed, validate=validate)
        inner = make_vec(env, num_envs, seed=int(self.rng.integers(2**63)), **(env_kwargs or {}))
        if not isinstance(inner, BatchedEnvironment) or not isinstance(inner, TaskFamily):
            raise TypeError(
                f"Trials: env {env!r} must be a natively batched task family (a "
                f"BatchedEnvironment and TaskFamily, such as RiverNavigation, Survival or "
                f"HiddenArm), got {type(inner).__name__}"
            )
        if (inner.tasks != NO_TASK).any():
            raise ValueError(
                f"Trials: env {env!r} was given a fixed task (env_kwargs {dict(env_kwargs or {})}); "
                "the trials draw the tasks"
            )
        self.inner = inner
        self.per_trial = episodes
        self.split = split
        self.pool = tasks
        self.action_labels = self._choices(inner.action_space)
        space = inner.obs_space
        self.obs_space = ObsSpace(
            entities=space.entities,
            global_features=[
                *space.global_features,
                *TRIAL_FEATURES,
                *(
                    f"prev_{name}={label}"
                    for name, labels in self.action_labels.items()
                    for label in labels
                ),
            ],
            goal_features=space.goal_features,
            images=space.images,
        )
        self.action_space = inner.action_space
        width = sum(len(labels) for labels in self.action_labels.values())
        self.task = np.full(num_envs, NO_TASK, dtype=np.int64)
        """Per copy, the task of its trial."""
        self.finished = np.zeros(num_envs, dtype=np.int64)
        """Per copy, the inner episodes of its trial that have ended."""
        self.prev_reward = np.zeros(num_envs, dtype=np.float32)
        self.prev_done = np.zeros(num_envs, dtype=np.float32)
        self.prev_action = np.zeros((num_envs, width), dtype=np.float32)
        self.inner_return = np.zeros(num_envs, dtype=np.float64)
        self.inner_length = np.zeros(num_envs, dtype=np.float64)
        self.record: dict[str, FloatArray] = {}
        """Per metric, the value of each inner episode of each copy's trial, (copies,
        episodes); NaN where that episode has not ended."""

    @staticmethod
    def _choices(action_space: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
        for name, space in action_space.items():
            if not isinstance(space, CHOICE_SPACES):
                raise TypeError(
                    f"Trials: action {name!r} is a {type(space).__name__}; the previous action "
                    "is given as the counts of each choice, for categorical actions only "
                    "(CategoricalActionSpace, GlobalCategoricalActionSpace)"
                )
        return {name: tuple(space.choices) for name, space in action_space.items()}

    # ---------------------------------------------------------------- BatchedEnvironment
    def reset_envs(self, envs: IntArray) -> None:
        self.task[envs] = draw_tasks(self.rng, envs.shape[0], self.split, self.pool)
        self.inner.set_tasks(envs, self.task[envs])
        self.inner.reset_envs(envs)
        self.finished[envs] = 0
        for array in (self.prev_reward, self.prev_done, self.prev_action):
            array[envs] = 0
        self.inner_return[envs] = 0
        self.inner_length[envs] = 0
        for values in self.record.values():
            values[envs] = np.nan

    def step(
        self, actions: Mapping[str, RaggedArray]
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.bool_]]:
        chosen = self._counts(actions)
        reward, inner_done = self.inner.step(actions)
        self.inner_return += reward
        self.inner_length += 1
        ended = np.flatnonzero(inner_done)
        if ended.size:
            self._record_ended(ended)
            self.finished[ended] += 1
            # An inner episode that is not its trial's last restarts the same task here; the
            # trial's last is reset with the trial (reset_envs, after its metrics are read).
            going_on = ended[self.finished[ended] < self.per_trial]
            if going_on.size:
                self.inner.reset_envs(going_on)
        self.prev_reward = reward.astype(np.float32)
        self.prev_done = inner_done.astype(np.float32)
        self.prev_action = chosen
        return reward, inner_done & (self.finished >= self.per_trial)

    def _counts(self, actions: Mapping[str, RaggedArray]) -> npt.NDArray[np.float32]:
        """Per copy, how many of its actors chose each label of each categorical action."""
        counts = np.zeros((self.num_envs, self.prev_action.shape[1]), dtype=np.float32)
        start = 0
        for name, labels in self.action_labels.items():
            values = actions.get(name)
            if values is not None and values.items:
                np.add.at(counts, (values.row_index(), start + values.data[:, 0]), 1)
            start += len(labels)
        return counts

    def _record_ended(self, ended: IntArray) -> None:
        """The return, length and the task's metrics of the inner episodes that just ended in
        copies ``ended``, in their trials' records."""
        measured = {
            "return": self.inner_return[ended],
            "length": self.inner_length[ended],
            **self.inner.episode_metrics(ended),
        }
        index = np.minimum(self.finished[ended], self.per_trial - 1)
        for name, values in measured.items():
            if name not in self.record:
                self.record[name] = np.full((self.num_envs, self.per_trial), np.nan)
            self.record[name][ended, index] = values
        self.inner_return[ended] = 0
        self.inner_length[ended] = 0

    def episode_metrics(self, ended: IntArray) -> dict[str, FloatArray]:
        return {
            f"episode{i + 1}/{name}": values[ended, i]
            for name, values in self.record.items()
            for i in range(self.per_trial)
        }

    def truncated(self, ended: IntArray) -> npt.NDArray[np.bool_] | None:
        # A trial ends with its last inner episode: cut off if that one was.
        return self.inner.truncated(ended)

    def observe(self) -> VecObs:
        obs = self.inner.observe()
        trial = np.concatenate(
            [self.prev_reward[:, None], self.prev_done[:, None], self.prev_action], axis=1
        )
        return replace(
            obs,
            global_features=np.concatenate([obs.global_features, trial], axis=1).astype(
                np.float32, copy=False
            ),
        )

    def reseed(self, seed: int) -> None:
        super().reseed(seed)
        self.inner.reseed(int(self.rng.integers(2**63)))  # as at construction

    def render(self, index: int = 0) -> str:
        return (
            f"{self.inner.render(index)}\n"
            f"trial: episode {self.finished[index] + 1}/{self.per_trial} of task "
            f"{self.task[index]} ({self.split})"
        )
