"""A replay buffer of ragged entity observations, for off-policy algorithms.

Transitions arrive one environment step of a batch at a time: the observations the policy acted
on, its actions, the rewards, whether each row's episode ended by the task (``terminal``: no
value follows it) or was cut off (``truncated``), and the observation that followed. For a row
whose episode was cut off, that is the episode's final observation, not the next episode's
first, so a value-based target can bootstrap from it. Each step's ragged arrays are kept whole;
consecutive steps are merged into blocks of ``capacity / 16`` transitions, so that a sample
gathers from a few dozen blocks whatever the buffer's size, and a full block is stored packed
(integers and row lengths narrowed, see :class:`Packed`). The per-transition numbers (reward,
endings, priority) live in flat arrays of ``capacity`` slots, indexed by a transition's
position (the count of transitions added before it) modulo ``capacity``; the buffer holds the
last ``capacity`` transitions.

Sampling is uniform, or proportional to priorities (prioritized replay, Schaul et al. 2016:
``P(i) ~ p_i ** alpha``, importance weights ``(min_j p_j / p_i) ** beta``; new transitions get
the highest priority seen, :meth:`ReplayBuffer.update_priorities` sets sampled ones from their
errors). With ``n_step > 1``, a sampled transition is the n-step one: its reward is
``sum_k gamma**k r_{t+k}`` over up to ``n_step`` steps of the same environment, stopped by the
episode's end (by the task or cut off) and by the newest step, its next observation the one
after the last step summed, and its ``discount`` ``gamma**k`` (0 after an ending by the task).
Steps must then come from one VecEnv in order: row ``i`` of every step is the same
environment.

The buffer goes into checkpoints as tensors and plain data (:meth:`ReplayBuffer.state_dict`),
so a resumed run samples exactly what the uninterrupted one would have.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from entityrl.env.actions import kinds
from entityrl.env.vec_obs import VecObs
from entityrl.ragged import RaggedArray

PRIORITY_EPS = 1e-6
"""Added to every error before it becomes a priority, so that every transition can be drawn."""


@dataclass
class Transitions:
    """Rows of transitions: row ``i`` of each field belongs to the same transition."""

    obs: VecObs
    actions: dict[str, RaggedArray]
    rewards: npt.NDArray[np.float32]
    """The step's reward; in a sampled n-step batch, the discounted sum over its steps."""
    terminal: npt.NDArray[np.bool_]
    """The episode ended by the task with this step (no value follows it)."""
    next_obs: VecObs
    """The observation after the step (a truncated episode's final one)."""
    truncated: npt.NDArray[np.bool_] | None = None
    """The episode was cut off with this step (a time limit; None: no row was)."""
    discount: npt.NDArray[np.float32] | None = None
    """Sampled batches: what the value of ``next_obs`` is multiplied by in a target,
    ``gamma**k`` for a k-step transition, 0 where the episode ended by the task."""
    weights: npt.NDArray[np.float32] | None = None
    """Sampled batches: importance weights of prioritized sampling (all 1 when uniform)."""
    index: npt.NDArray[np.int64] | None = None
    """Sampled batches: the transitions' positions, for :meth:`ReplayBuffer.update_priorities`."""

    @property
    def num_rows(self) -> int:
        return self.rewards.shape[0]

    def take(self, rows: npt.NDArray[np.int64]) -> Transitions:
        def part(values: npt.NDArray[Any] | None) -> Any:
            return None if values is None else values[rows]

        return Transitions(
            self.obs.take(rows),
            {name: a.take(rows) for name, a in self.actions.items()},
            self.rewards[rows],
            self.terminal[rows],
            self.next_obs.take(rows),
            part(self.truncated),
            part(self.discount),
            part(self.weights),
            part(self.index),
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


@dataclass
class Block:
    """Observations and actions of consecutive transitions, from position ``start`` on."""

    start: int
    obs: VecObs
    actions: dict[str, RaggedArray]
    next_obs: VecObs

    @property
    def rows(self) -> int:
        return self.obs.num_rows

    @property
    def end(self) -> int:
        return self.start + self.rows

    @staticmethod
    def concat(blocks: Sequence[Block], choices: Mapping[str, int]) -> Block:
        return Block(
            blocks[0].start,
            VecObs.concat([b.obs for b in blocks], choices),
            {
                name: RaggedArray.concat([b.actions[name] for b in blocks])
                for name in blocks[0].actions
            },
            VecObs.concat([b.next_obs for b in blocks], choices),
        )


class ReplayBuffer:
    """The last ``capacity`` transitions; ``choices`` gives each categorical action's size (to
    merge masks of batches that omit them, see :meth:`VecObs.concat`). ``n_step`` and
    ``gamma``: the returns sampled batches hold; ``prioritized``: sampling proportional to
    priorities to the power ``alpha`` (see the module's doc)."""

    def __init__(
        self,
        capacity: int,
        choices: Mapping[str, int],
        *,
        n_step: int = 1,
        gamma: float = 0.99,
        prioritized: bool = False,
        alpha: float = 0.6,
    ) -> None:
        if capacity <= 0:
            raise ValueError(f"a replay buffer's capacity must be > 0 transitions, got {capacity}")
        if n_step < 1:
            raise ValueError(f"n_step must be >= 1 (1: one-step returns), got {n_step}")
        if not alpha >= 0:
            raise ValueError(f"the priority exponent alpha must be >= 0, got {alpha}")
        self.capacity = capacity
        self.choices = dict(choices)
        self.n_step = n_step
        self.gamma = gamma
        self.prioritized = prioritized
        self.alpha = alpha
        # A sample gathers from every block it draws from: 16 blocks (and the newest steps'
        # few) at any capacity keep it a few milliseconds; a block whose older part has been
        # dropped holds at most a 16th of the capacity more than needed.
        self.block_rows = max(1, capacity // 16)
        self._blocks: deque[Block] = deque()
        self._open: list[Block] = []
        """The newest steps, not yet merged into a block."""
        self._reward = np.zeros(capacity, np.float32)
        self._terminal = np.zeros(capacity, np.bool_)
        self._ended = np.zeros(capacity, np.bool_)
        """The episode ended with the transition, by the task or cut off."""
        self._priority = np.zeros(capacity, np.float64)
        """Each slot's priority to the power alpha."""
        self._max_priority = 1.0
        self._rows: int | None = None
        """Rows per step (n-step returns need it the same for every step)."""
        self._bytes = 0
        self.added = 0
        """Transitions added since the buffer was made (dropped ones included)."""

    def __len__(self) -> int:
        return min(self.added, self.capacity)

    def add(self, transitions: Transitions) -> None:
        """Keep one step's transitions (row ``i`` the same environment at every step)."""
        rows = transitions.num_rows
        if rows > self.capacity:
            raise ValueError(
                f"a replay buffer of capacity {self.capacity} cannot hold a step of {rows} "
                "transitions: raise its size above the number of environments"
            )
        if self.n_step > 1 and self._rows not in (None, rows):
            raise ValueError(
                f"n-step returns (n_step={self.n_step}) follow each environment through "
                f"consecutive steps: every step must have {self._rows} rows, got {rows}"
            )
        self._rows = rows
        slots = (self.added + np.arange(rows)) % self.capacity
        self._reward[slots] = transitions.rewards
        self._terminal[slots] = transitions.terminal
        cut = transitions.truncated
        self._ended[slots] = transitions.terminal if cut is None else transitions.terminal | cut
        self._priority[slots] = self._max_priority**self.alpha
        block = Block(self.added, transitions.obs, transitions.actions, transitions.next_obs)
        self._bytes += _nbytes(block)
        self._open.append(block)
        self.added += rows
        # The newest steps merge as a binary counter does (two blocks of one size into one of
        # twice the size), so a sample gathers from a few dozen blocks at any size, and each
        # transition is copied about log2(block_rows) times in all.
        while len(self._open) > 1 and self._open[-2].rows <= self._open[-1].rows:
            newest, older = self._open.pop(), self._open.pop()
            merged = Block.concat([older, newest], self.choices)
            self._bytes += _nbytes(merged) - _nbytes(older) - _nbytes(newest)
            self._open.append(merged)
        if self._open[0].rows >= self.block_rows:
            closed = self._open.pop(0)
            packed = _pack(closed)
            self._bytes += _nbytes(packed) - _nbytes(closed)
            self._blocks.append(packed)
        # Blocks go whole, once every transition in them is older than the last `capacity`.
        first = self.added - len(self)
        while self._blocks and self._blocks[0].end <= first:
            self._bytes -= _nbytes(self._blocks.popleft())
        while not self._blocks and self._open and self._open[0].end <= first:
            self._bytes -= _nbytes(self._open.pop(0))

    def sample(self, n: int, rng: np.random.Generator, beta: float = 1.0) -> Transitions:
        """``n`` transitions drawn with replacement, uniformly or by priority (importance
        weights with exponent ``beta``), with their n-step returns (see the module's doc)."""
        size = len(self)
        if size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        first = self.added - size
        weights = np.ones(n, np.float32)
        if self.prioritized:
            priority = self._priority[:size]
            cumulative = np.cumsum(priority)
            # Stratified: one draw in each of n equal parts of the total (lower variance).
            draws = (np.arange(n) + rng.random(n)) * (cumulative[-1] / n)
            slots = np.minimum(np.searchsorted(cumulative, draws, side="right"), size - 1)
            weights = ((priority.min() / priority[slots]) ** beta).astype(np.float32)
            positions = first + (slots - first) % self.capacity
        else:
            positions = first + rng.integers(0, size, size=n)
        order = np.argsort(positions, kind="stable")
        positions, weights = positions[order], weights[order]
        rewards, last = self._returns(positions)
        terminal = self._terminal[last % self.capacity]
        steps = (last - positions) // self._step_rows() + 1
        discount = np.where(terminal, 0.0, self.gamma**steps).astype(np.float32)
        obs, actions, following = self._gather(positions, last)
        return Transitions(
            obs,
            actions,
            rewards,
            terminal,
            following,
            self._ended[last % self.capacity] & ~terminal,
            discount,
            weights,
            positions,
        )

    def _step_rows(self) -> int:
        """How far apart one environment's consecutive transitions are."""
        return self._rows or 1

    def _returns(
        self, positions: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        """Each transition's discounted reward over up to ``n_step`` steps of its environment,
        and the position of the last step summed."""
        rewards = np.zeros(len(positions), np.float64)
        last = positions.copy()
        going = np.ones(len(positions), np.bool_)
        for k in range(self.n_step):
            at = positions + k * self._step_rows()
            going &= at < self.added  # the step after the newest has not happened yet
            slots = at % self.capacity
            rewards += np.where(going, self.gamma**k * self._reward[slots], 0.0)
            last = np.where(going, at, last)
            going &= ~self._ended[slots]
        return rewards.astype(np.float32), last

    def _parts(self, positions: npt.NDArray[np.int64]) -> list[tuple[Block, npt.NDArray[np.int64]]]:
        """The blocks holding sorted ``positions``, each with its rows among them."""
        pieces = [*self._blocks, *self._open]
        starts = np.array([b.start for b in pieces] + [pieces[-1].end])
        # Sorted, the positions in each block are one slice of them.
        cuts = np.searchsorted(positions, starts)
        return [
            (block, positions[lo:hi] - block.start)
            for block, lo, hi in zip(pieces, cuts, cuts[1:], strict=False)
            if hi > lo
        ]

    def _gather(
        self, positions: npt.NDArray[np.int64], last: npt.NDArray[np.int64]
    ) -> tuple[VecObs, dict[str, RaggedArray], VecObs]:
        """Observations and actions at sorted ``positions``; next observations at ``last``."""
        parts = self._parts(positions)
        obs = VecObs.concat([_take(b.obs, rows) for b, rows in parts], self.choices)
        actions = {
            name: RaggedArray.concat([_take(b.actions[name], rows) for b, rows in parts])
            for name in parts[0][0].actions
        }
        if self.n_step == 1:  # each transition's own next observation
            following = [_take(b.next_obs, rows) for b, rows in parts]
            return obs, actions, VecObs.concat(following, self.choices)
        order = np.argsort(last, kind="stable")
        following = [_take(b.next_obs, rows) for b, rows in self._parts(last[order])]
        return obs, actions, VecObs.concat(following, self.choices).take(np.argsort(order))

    def update_priorities(
        self, index: npt.NDArray[np.int64], errors: npt.NDArray[np.floating[Any]]
    ) -> None:
        """Set the priorities of sampled transitions (``Transitions.index``) from the size of
        their errors; those dropped since they were sampled are left alone."""
        if not self.prioritized:
            return
        priority = np.abs(errors).astype(np.float64) + PRIORITY_EPS
        held = index >= self.added - len(self)
        self._priority[index[held] % self.capacity] = priority[held] ** self.alpha
        self._max_priority = max(self._max_priority, float(priority.max(initial=0.0)))

    def nbytes_per_transition(self) -> float:
        """Memory held per transition (arrays' bytes, the per-slot numbers included; 0 when
        empty)."""
        held = sum(b.rows for b in (*self._blocks, *self._open))
        if not held:
            return 0.0
        per_slot = sum(a.itemsize for a in (self._reward, self._terminal, self._ended))
        return self._bytes / held + per_slot + (self._priority.itemsize if self.prioritized else 0)

    def state_dict(self) -> dict[str, Any]:
        """Tensors and plain data (loadable with ``torch.load(weights_only=True)``)."""
        return {
            "added": self.added,
            "rows": self._rows,
            "max_priority": self._max_priority,
            "blocks": [_plain(b) for b in self._blocks],
            "open": [_plain(b) for b in self._open],
            **{
                key: torch.from_numpy(getattr(self, f"_{key}").copy())
                for key in ("reward", "terminal", "ended", "priority")
            },
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        capacity = len(state["reward"])
        if capacity != self.capacity:
            raise ValueError(
                f"the checkpoint's replay buffer holds {capacity} transitions, this run's "
                f"{self.capacity}: resume with the buffer_size it was trained with"
            )
        self.added = int(state["added"])
        self._rows = state["rows"]
        self._max_priority = float(state["max_priority"])
        self._blocks = deque(_restore(b) for b in state["blocks"])
        self._open = [_restore(b) for b in state["open"]]
        self._bytes = sum(_nbytes(b) for b in (*self._blocks, *self._open))
        for key in ("reward", "terminal", "ended", "priority"):
            setattr(self, f"_{key}", state[key].numpy().copy())


@dataclass
class Packed:
    """A ragged array of a closed block, stored narrow: its integers (actor and candidate
    indices, choices) and row lengths in the smallest integer type that holds them, no
    offsets. Indices and lengths stored as int64, with offsets, took most of the bytes of a
    transition of CherryPick (benchmarks/replay_memory.py)."""

    data: npt.NDArray[Any]
    lengths: npt.NDArray[Any]
    dtype: str
    """The data's type before packing, which :meth:`take` gives back."""

    @staticmethod
    def of(array: RaggedArray) -> Packed:
        return Packed(_narrow(array.data), _narrow(array.lengths), array.data.dtype.str)

    def take(self, rows: npt.NDArray[np.int64]) -> RaggedArray:
        lengths = self.lengths.astype(np.int64)
        # A RaggedArray holds only its own types: one without features finds the items.
        items = RaggedArray(np.empty((len(self.data), 0), np.float32), lengths).item_indices(rows)
        return RaggedArray(self.data[items].astype(self.dtype), lengths[rows])


def _narrow(values: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """Integers in the smallest integer type that holds them; other values as they are."""
    if values.dtype.kind != "i" or values.size == 0:
        return values
    low, high = int(values.min()), int(values.max())
    for kind in (np.int8, np.int16, np.int32):
        info = np.iinfo(kind)
        if info.min <= low and high <= info.max:
            return values.astype(kind)
    return values


def _pack(value: Any) -> Any:
    """``value`` with its ragged arrays :class:`Packed`."""
    if isinstance(value, RaggedArray):
        return Packed.of(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return type(value)(
            **{f.name: _pack(getattr(value, f.name)) for f in dataclasses.fields(value)}
        )
    if isinstance(value, dict):
        return {key: _pack(v) for key, v in value.items()}
    return value


def _take(value: Any, rows: npt.NDArray[np.int64]) -> Any:
    """The given rows of stored data, packed or not (as ``VecObs.take`` gives them)."""
    if isinstance(value, VecObs):  # what is not per row is not needed past a step
        value = dataclasses.replace(
            value, metrics={}, truncated=None, final=None, game_over=None, group_reward=None
        )
    if isinstance(value, RaggedArray | Packed):
        return value.take(rows)
    if isinstance(value, np.ndarray):
        return value[rows]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return type(value)(
            **{f.name: _take(getattr(value, f.name), rows) for f in dataclasses.fields(value)}
        )
    if isinstance(value, dict):
        return {key: _take(v, rows) for key, v in value.items()}
    return value


def _classes() -> dict[str, type]:
    """The classes a buffer stores, by the name its plain form records (the batched masks of
    every registered action kind among them): nothing else is rebuilt."""
    return {cls.__name__: cls for cls in (Block, Packed, VecObs, *(k.vec_mask for k in kinds()))}


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
    """Bytes of the arrays in stored data."""
    if isinstance(value, np.ndarray):
        return value.nbytes
    if isinstance(value, RaggedArray):
        # The offsets are computed on first use, which every sample makes.
        return value.data.nbytes + value.lengths.nbytes + value.offsets.nbytes
    if isinstance(value, Packed):
        return value.data.nbytes + value.lengths.nbytes
    if dataclasses.is_dataclass(value):
        return sum(_nbytes(getattr(value, f.name)) for f in dataclasses.fields(value))
    if isinstance(value, dict):
        return sum(_nbytes(v) for v in value.values())
    return 0
