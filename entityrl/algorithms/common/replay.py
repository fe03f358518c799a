"""A replay buffer of ragged entity observations, for off-policy algorithms.

Transitions arrive one environment step of a batch at a time: the observations the policy acted
on, its actions, the rewards, whether each row's episode ended by the task (``terminal``: no
value follows it) and the observation that followed. For a row whose episode was cut off
(truncated), that is the episode's final observation, not the next episode's first, so a
value-based target can bootstrap from it. Each step is kept as it came (its ragged arrays
whole); sampling draws transitions uniformly over all steps kept and gathers them into one batch.
Once ``capacity`` transitions are held, the oldest steps are dropped whole.

The buffer goes into checkpoints as tensors and plain data (:meth:`ReplayBuffer.state_dict`),
so a resumed run samples exactly what the uninterrupted one would have.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from entityrl.env.actions import kinds
from entityrl.env.vec_obs import VecObs
from entityrl.ragged import RaggedArray


@dataclass
class Transitions:
    """Rows of transitions: row ``i`` of each field belongs to the same transition."""

    obs: VecObs
    actions: dict[str, RaggedArray]
    rewards: npt.NDArray[np.float32]
    terminal: npt.NDArray[np.bool_]
    """The episode ended by the task with this step (no value follows it)."""
    next_obs: VecObs
    """The observation after the step (a truncated episode's final one)."""

    @property
    def num_rows(self) -> int:
        return self.rewards.shape[0]

    def take(self, rows: npt.NDArray[np.int64]) -> Transitions:
        return Transitions(
            self.obs.take(rows),
            {name: a.take(rows) for name, a in self.actions.items()},
            self.rewards[rows],
            self.terminal[rows],
            self.next_obs.take(rows),
        )


def next_observations(obs: VecObs, choices: Mapping[str, int]) -> VecObs:
    """What followed each row's step, from the batch a VecEnv returned: the row itself, or for
    rows whose episode was truncated, the observation that ended it (``obs.final``)."""
    rows = np.arange(obs.num_rows)
    if obs.truncated is None or obs.final is None or not obs.truncated.any():
        return obs.take(rows)
    index = rows.copy()
    index[obs.truncated] = obs.num_rows + np.arange(obs.final.num_rows)
    final = obs.final.take(np.arange(obs.final.num_rows))
    return VecObs.concat([obs.take(rows), final], choices).take(index)


class ReplayBuffer:
    """Up to ``capacity`` transitions; ``choices`` gives each categorical action's size (to
    merge masks of batches that omit them, see :meth:`VecObs.concat`)."""

    def __init__(self, capacity: int, choices: Mapping[str, int]) -> None:
        if capacity <= 0:
            raise ValueError(f"a replay buffer's capacity must be > 0 transitions, got {capacity}")
        self.capacity = capacity
        self.choices = dict(choices)
        self._steps: deque[Transitions] = deque()
        self._size = 0
        self.added = 0
        """Transitions added since the buffer was made (dropped ones included)."""

    def __len__(self) -> int:
        return self._size

    def add(self, transitions: Transitions) -> None:
        """Keep one step's transitions (dropping the oldest steps beyond capacity)."""
        self._steps.append(transitions)
        self._size += transitions.num_rows
        self.added += transitions.num_rows
        while self._size - self._steps[0].num_rows >= self.capacity:
            self._size -= self._steps.popleft().num_rows

    def sample(self, n: int, rng: np.random.Generator) -> Transitions:
        """``n`` transitions drawn uniformly (with replacement) from those held."""
        if self._size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        picks = np.sort(rng.integers(0, self._size, size=n))
        bounds = np.cumsum([0, *(t.num_rows for t in self._steps)])
        # Sorted, the picks of each kept step are one slice of them.
        cuts = np.searchsorted(picks, bounds)
        parts = [
            step.take(picks[start:end] - first)
            for step, first, start, end in zip(self._steps, bounds, cuts, cuts[1:], strict=False)
            if end > start
        ]
        return Transitions(
            VecObs.concat([p.obs for p in parts], self.choices),
            {
                name: RaggedArray.concat([p.actions[name] for p in parts])
                for name in parts[0].actions
            },
            np.concatenate([p.rewards for p in parts]),
            np.concatenate([p.terminal for p in parts]),
            VecObs.concat([p.next_obs for p in parts], self.choices),
        )

    def nbytes_per_transition(self) -> float:
        """Memory held per transition (arrays' bytes; 0 when empty)."""
        total = sum(_nbytes(_plain(t)) for t in self._steps)
        return total / self._size if self._size else 0.0

    def state_dict(self) -> dict[str, Any]:
        """Tensors and plain data (loadable with ``torch.load(weights_only=True)``)."""
        return {"added": self.added, "steps": [_plain(t) for t in self._steps]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._steps = deque(_restore(t) for t in state["steps"])
        self._size = sum(t.num_rows for t in self._steps)
        self.added = int(state["added"])


def _classes() -> dict[str, type]:
    """The classes a buffer stores, by the name its plain form records (the batched masks of
    every registered action kind among them): nothing else is rebuilt."""
    return {cls.__name__: cls for cls in (Transitions, VecObs, *(k.vec_mask for k in kinds()))}


def _plain(value: Any) -> Any:
    """Stored data as tensors, lists, dicts, numbers and None."""
    if isinstance(value, RaggedArray):
        return {"ragged": _plain(value.data), "lengths": _plain(value.lengths)}
    if isinstance(value, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(value))
    if dataclasses.is_dataclass(value) and type(value).__name__ in _classes():
        fields = {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"class": type(value).__name__, "fields": fields}
    if isinstance(value, dict):
        return {"dict": {key: _plain(v) for key, v in value.items()}}
    if value is None or isinstance(value, int | float | bool | str):
        return value
    raise TypeError(f"a replay buffer cannot store a {type(value).__name__}")


def _restore(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.numpy()
    if not isinstance(value, dict):
        return value
    if "ragged" in value:
        return RaggedArray(_restore(value["ragged"]), _restore(value["lengths"]))
    if "class" in value:
        cls = _classes()[value["class"]]
        return cls(**{name: _restore(v) for name, v in value["fields"].items()})
    return {key: _restore(v) for key, v in value["dict"].items()}


def _nbytes(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, dict):
        return sum(_nbytes(v) for v in value.values())
    return 0
