"""Recordings of entity episodes: a versioned, compressed, streamed file format (Arrow IPC).

Write with :class:`RecordingVecEnv` (records whatever plays through it) or :func:`record`
(a policy plays N episodes); read with :class:`Recording` (header, then episodes one at a
time). See docs/recording.md. Needs ``pip install 'entityrl[recording]'`` (pyarrow); never
imports torch.
"""

from entityrl.recording.expert import ExpertFunction, ExpertOutputError, FunctionExpert
from entityrl.recording.format import FORMAT, VERSION, Header, RecordingError
from entityrl.recording.reader import (
    Episode,
    Recording,
    TruncatedRecordingWarning,
    read_recordings,
)
from entityrl.recording.writer import (
    EpisodeRecorder,
    EpisodeWriter,
    RecordingVecEnv,
    record,
)

__all__ = [
    "FORMAT",
    "VERSION",
    "Episode",
    "EpisodeRecorder",
    "EpisodeWriter",
    "ExpertFunction",
    "ExpertOutputError",
    "FunctionExpert",
    "Header",
    "Recording",
    "RecordingError",
    "RecordingVecEnv",
    "TruncatedRecordingWarning",
    "read_recordings",
    "record",
]
