"""Reading recordings: the header, then one episode at a time (streamed, memory-mapped).

A file is one or more Arrow IPC streams one after the other (each writing session appends
one), all with the same schema. Each record batch is one complete episode.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc

from entityrl.env.space_data import space_differences
from entityrl.env.spaces import ActionSpace, ObsSpace
from entityrl.env.vec_obs import VecObs
from entityrl.ragged import RaggedArray
from entityrl.recording.format import Header, RecordingError, read_header, to_vec_obs

# What pyarrow says when a stream stops inside a message: the file was cut short.
_TRUNCATED = re.compile(r"Expected to (be able to )?read|only \d+ bytes available")


class TruncatedRecordingWarning(UserWarning):
    """A recording ends inside an episode (its writer crashed or was killed): the complete
    episodes before it are read."""


@dataclass
class Episode:
    """One complete episode of one environment: ``obs`` has one row per step (the observation
    the policy saw), ``actions`` what it did there; ``obs.reward``/``obs.done`` are the reward
    and end flag that followed each step."""

    obs: VecObs
    actions: dict[str, RaggedArray]
    batch: pa.RecordBatch
    """The episode's raw columns (see :mod:`entityrl.recording.format`)."""

    @property
    def length(self) -> int:
        return self.obs.num_rows

    @property
    def total_reward(self) -> float:
        return float(self.obs.reward.sum())

    @property
    def truncated(self) -> bool:
        """The episode was cut off (a time limit), not ended by the task; False in recordings
        that do not say (written before the ``truncated`` column existed)."""
        if "truncated" not in self.batch.schema.names:
            return False
        return bool(self.batch.column("truncated")[-1].as_py())

    def ids(self, entity_type: str) -> list[list[str]] | None:
        """Per step, the ids of the entities of one type (as strings), or None if the
        recording's source did not give them."""
        column = self.batch.column(f"ids/{entity_type}")
        return None if column.null_count == len(column) else column.to_pylist()


class Recording:
    """A recording file, opened for reading. ``header`` holds the spaces and the environment;
    :meth:`episodes` streams the episodes; :meth:`check_spaces` compares with an environment."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise RecordingError(f"no recording at {str(path)!r} (expected a file)")
        if self.path.stat().st_size == 0:
            raise RecordingError(f"{self.path} is empty (its writer wrote nothing)")
        with pa.memory_map(str(self.path)) as source:
            try:
                schema = ipc.open_stream(source).schema
            except (pa.ArrowInvalid, OSError) as err:
                raise RecordingError(
                    f"{self.path} is not a readable recording (not an Arrow stream, or cut "
                    f"short inside its header): {_first_line(err)}"
                ) from None
        self.schema = schema
        self.header: Header = read_header(schema, str(self.path))

    @property
    def obs_space(self) -> ObsSpace:
        return self.header.obs_space

    @property
    def action_space(self) -> dict[str, ActionSpace]:
        return self.header.action_space

    def check_spaces(self, obs_space: ObsSpace, action_space: Mapping[str, ActionSpace]) -> None:
        """Raise :class:`RecordingError` naming every entity type, feature and action in which
        an environment's spaces differ from the recording's."""
        differences = space_differences(
            (self.obs_space, self.action_space), (obs_space, action_space), who="the recording"
        )
        if differences:
            raise RecordingError(
                f"{self.path} was recorded in different spaces"
                f"{f' ({self.header.env_id})' if self.header.env_id else ''}: "
                + "; ".join(differences)
            )

    def batches(self) -> Iterator[pa.RecordBatch]:
        """The episodes' raw record batches, in file order (see :meth:`episodes`)."""
        for batch, _ in self._scan():
            yield batch

    def episodes(self) -> Iterator[Episode]:
        """Every complete episode, one at a time. A file cut short inside an episode gives the
        episodes before it with a :class:`TruncatedRecordingWarning`; anything else unreadable
        raises :class:`RecordingError` naming the file and the last good episode."""
        for batch in self.batches():
            obs, actions = to_vec_obs(self.header, batch)
            yield Episode(obs, actions, batch)

    def complete_end(self) -> tuple[int, int]:
        """The number of complete episodes and the byte offset just after the last one (0 if
        there is none), without converting them."""
        count, end = 0, 0
        for _, end in self._scan():  # noqa: B007 (the last one is the answer)
            count += 1
        return count, end

    def _scan(self) -> Iterator[tuple[pa.RecordBatch, int]]:
        """Each complete episode with the byte offset where it ends."""
        count = 0
        with pa.memory_map(str(self.path)) as source:
            size = source.size()
            while source.tell() < size:
                try:
                    reader = ipc.open_stream(source)
                    if not reader.schema.equals(self.schema, check_metadata=True):
                        raise RecordingError(
                            f"{self.path}: a part appended after episode {count} has a "
                            "different header than the first"
                        )
                    for batch in reader:
                        # Arrow checks the framing, not the contents: offsets out of bounds
                        # would be read as they are.
                        batch.validate(full=True)
                        count += 1
                        yield batch, source.tell()
                except (pa.ArrowInvalid, OSError) as err:
                    if not _TRUNCATED.search(str(err)):
                        raise RecordingError(
                            f"{self.path} is corrupt after episode {count} (the last good "
                            f"episode): {_first_line(err)}"
                        ) from None
                    warnings.warn(
                        f"{self.path} ends inside episode {count + 1} (its writer stopped "
                        f"early); reading the {count} complete episodes before it",
                        TruncatedRecordingWarning,
                        stacklevel=3,
                    )
                    return


def read_recordings(
    paths: Sequence[str | Path],
    obs_space: ObsSpace | None = None,
    action_space: Mapping[str, ActionSpace] | None = None,
) -> tuple[Header, list[Episode]]:
    """Every episode of several recordings of the same spaces (those given, else the first
    file's): :class:`RecordingError` names the file whose spaces differ."""
    if not paths:
        raise RecordingError("no recordings given")
    recordings = [Recording(p) for p in paths]
    header = recordings[0].header
    spaces = (obs_space or header.obs_space, action_space or header.action_space)
    episodes: list[Episode] = []
    for recording in recordings:
        recording.check_spaces(*spaces)
        episodes.extend(recording.episodes())
    return header, episodes


def _first_line(err: BaseException) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
