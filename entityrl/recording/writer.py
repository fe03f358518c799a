"""Writing recordings: complete episodes appended to an Arrow IPC stream as they end.

:class:`EpisodeWriter` appends episodes (one record batch each, flushed at once);
:class:`EpisodeRecorder` cuts the steps of a batch of environments into episodes;
:class:`RecordingVecEnv` records whatever policy steps the VecEnv it wraps (a person in
``entityrl play``, an agent in ``entityrl eval``, or a scripted policy in Python).

A recording streams to its final name instead of a temporary file renamed at the end: a
writer that crashes then leaves every episode it completed readable (see
:class:`~entityrl.recording.reader.TruncatedRecordingWarning`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from entityrl.env.observation import entity_ids
from entityrl.env.spaces import ActionSpace, ObsSpace
from entityrl.env.vec_env import SerialVecEnv, VecEnv
from entityrl.env.vec_obs import VecObs
from entityrl.ragged import RaggedArray
from entityrl.recording.expert import FunctionExpert
from entityrl.recording.format import Header, RecordingError, make_schema, to_record_batch
from entityrl.recording.reader import Recording

COMPRESSIONS = ("zstd", "lz4", None)
# Arrow's end-of-stream marker: a continuation token and a zero length.
_END_OF_STREAM = b"\xff\xff\xff\xff\x00\x00\x00\x00"


class EpisodeWriter:
    """Appends complete episodes to the recording at ``path``.

    Each episode is one compressed record batch, flushed to the operating system as soon as
    it is written. With ``append``, an existing recording of the same spaces is continued
    (after its last complete episode, under its own header: the environment named there);
    otherwise the file is replaced.
    """

    def __init__(
        self,
        path: str | Path,
        header: Header,
        *,
        append: bool = False,
        compression: str | None = "zstd",
    ) -> None:
        if compression not in COMPRESSIONS:
            raise ValueError(f"compression must be one of {COMPRESSIONS}, got {compression!r}")
        self.path = Path(path)
        self.header = header
        self.episodes = 0
        self._file = self._open(append)  # an appended file keeps its own header
        self.schema = make_schema(self.header)
        options = ipc.IpcWriteOptions(compression=compression)
        self._stream = ipc.new_stream(self._file, self.schema, options=options)
        self._file.flush()

    def _open(self, append: bool) -> BinaryIO:
        if not (append and self.path.is_file() and self.path.stat().st_size):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            return self.path.open("wb")
        existing = Recording(self.path)
        existing.check_spaces(self.header.obs_space, self.header.action_space)
        self.header = existing.header
        count, end = existing.complete_end()
        file = self.path.open("r+b")
        file.truncate(end)  # drop an episode cut short by a crash
        file.seek(end)
        if end:
            file.write(_END_OF_STREAM)  # close the earlier stream; a new one follows
        self.episodes = count
        return file

    def write(self, episode: pa.RecordBatch) -> None:
        """Append one complete episode (rows in the schema of this recording)."""
        if self._file.closed:
            raise RecordingError(f"{self.path}: the recording is closed")
        self._stream.write_batch(episode)
        self._file.flush()
        self.episodes += 1

    def close(self) -> None:
        if not self._file.closed:
            self._stream.close()
            self._file.close()

    def __enter__(self) -> EpisodeWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class EpisodeRecorder:
    """Cuts the steps of ``num_envs`` environments stepped together into episodes and writes
    each one when it ends. Steps stay in memory only until every episode they belong to has
    been written."""

    def __init__(self, writer: EpisodeWriter, num_envs: int) -> None:
        self.writer = writer
        self.num_envs = num_envs
        self._steps: list[pa.RecordBatch] = []
        self._first_step = 0  # the step number of self._steps[0]
        self._episode_start = np.zeros(num_envs, dtype=np.int64)

    def reset(self) -> None:
        """Forget the episodes in progress (the environments were reset)."""
        self._first_step += len(self._steps)
        self._steps.clear()
        self._episode_start[:] = self._first_step

    def record(
        self,
        obs: VecObs,
        actions: Mapping[str, RaggedArray],
        after: VecObs,
        ids: Mapping[str, Sequence[Sequence[Any]]] | None = None,
    ) -> None:
        """One step: the policy saw ``obs`` and sent ``actions``; ``after`` is what the
        environments returned (its reward and done are the step's)."""
        batch = to_record_batch(
            self.writer.schema,
            self.writer.header,
            obs,
            actions,
            after.reward,
            after.done,
            ids,
            after.truncated,
        )
        self._steps.append(batch)
        step = self._first_step + len(self._steps) - 1
        for env in np.flatnonzero(after.done):
            start = int(self._episode_start[env])
            rows = [
                self._steps[s - self._first_step].slice(int(env), 1) for s in range(start, step + 1)
            ]
            self.writer.write(pa.concat_batches(rows))
            self._episode_start[env] = step + 1
        # Steps older than every episode in progress are no longer needed.
        oldest = int(self._episode_start.min())
        del self._steps[: oldest - self._first_step]
        self._first_step = max(self._first_step, oldest)


class RecordingVecEnv(VecEnv):
    """A VecEnv that records every complete episode played through it into ``path``.

    Episodes still in progress when it is closed (or reset) are not written. The entity ids
    are recorded when ``env`` is a :class:`~entityrl.env.SerialVecEnv` (it keeps each
    environment's observation); otherwise the ids columns are null.
    """

    def __init__(
        self,
        env: VecEnv,
        path: str | Path,
        *,
        env_id: str | None = None,
        env_kwargs: dict[str, Any] | None = None,
        append: bool = False,
        compression: str | None = "zstd",
    ) -> None:
        self.env = env
        self.obs_space: ObsSpace = env.obs_space
        self.action_space: dict[str, ActionSpace] = env.action_space
        self.num_envs = env.num_envs
        header = Header(env.obs_space, dict(env.action_space), env_id, dict(env_kwargs or {}))
        self.writer = EpisodeWriter(path, header, append=append, compression=compression)
        self.recorder = EpisodeRecorder(self.writer, env.num_envs)
        self._last: VecObs | None = None

    def reset(self) -> VecObs:
        self.recorder.reset()
        self._last = self.env.reset()
        return self._last

    def act(self, actions: Mapping[str, RaggedArray]) -> VecObs:
        if self._last is None:
            raise RuntimeError("call reset() before act()")
        ids = self._ids()
        after = self.env.act(actions)
        self.recorder.record(self._last, actions, after, ids)
        self._last = after
        return after

    def _ids(self) -> dict[str, list[Sequence[Any]]] | None:
        if not isinstance(self.env, SerialVecEnv):
            return None
        observations = self.env.observations
        return {
            name: [entity_ids(obs, name) for obs in observations]
            for name in self.obs_space.entities
        }

    def render(self, index: int = 0) -> str:
        return self.env.render(index)

    def close(self) -> None:
        try:
            self.writer.close()
        finally:
            self.env.close()


def record(
    policy: Any,
    env: VecEnv,
    path: str | Path,
    episodes: int,
    *,
    env_id: str | None = None,
    env_kwargs: dict[str, Any] | None = None,
    append: bool = False,
) -> int:
    """Let ``policy`` play ``env`` until ``episodes`` complete episodes are recorded in
    ``path``: anything with ``act(VecObs) -> actions`` (a scripted expert, a trained agent, a
    random policy), or a function from one environment's ``Observation`` to its actions as
    ``Environment.act`` takes them (:class:`~entityrl.recording.expert.FunctionExpert`; ``env``
    a SerialVecEnv). Returns the number of episodes in the file. ``env`` is closed afterwards."""
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    if hasattr(policy, "act"):
        act = policy.act
    elif callable(policy):
        act = FunctionExpert(policy, env).act
    else:
        raise TypeError(
            "record: expected a policy with act(VecObs) or a function of one Observation, got "
            f"{type(policy).__name__}"
        )
    with RecordingVecEnv(
        env, path, env_id=env_id, env_kwargs=env_kwargs, append=append
    ) as recording:
        target = recording.writer.episodes + episodes
        obs = recording.reset()
        while recording.writer.episodes < target:
            obs = recording.act(act(obs))
        return recording.writer.episodes
