"""Checkpoints: everything needed to continue a run or use its agent, written atomically.

``checkpoint.pt`` holds tensors and plain data only (it loads with ``weights_only=True``):
model and optimizer state, config, step, RNG states, and the spaces the network was built for.
The environments' own state (to continue episodes exactly where they were) is pickled to
``env_state.pkl`` beside it and read only when resuming.
"""

from __future__ import annotations

import os
import pickle
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

# Re-exported: checkpoints record the spaces in this form.
from entityrl.env.space_data import spaces_from_data as spaces_from_data
from entityrl.env.space_data import spaces_to_data as spaces_to_data

FORMAT = "entityrl-checkpoint"
VERSION = 1
CHECKPOINT_FILE = "checkpoint.pt"
ENV_STATE_FILE = "env_state.pkl"
REQUIRED = (
    "format",
    "version",
    "config",
    "model",
    "optimizer",
    "step",
    "iteration",
    "rng",
    "spaces",
)


class CheckpointError(ValueError):
    """A checkpoint is missing, unreadable, or does not fit what it is loaded into."""


def atomic_write(path: Path, write: Callable[[Any], None], mode: str = "wb") -> None:
    """Write through a temporary file in the same directory, then rename over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_checkpoint(
    directory: Path, state: dict[str, Any], env_state: bytes | None, name: str = CHECKPOINT_FILE
) -> Path:
    """Write ``name`` (default ``checkpoint.pt``; and ``env_state.pkl`` when given) into
    ``directory``."""
    path = directory / name
    if env_state is not None:
        atomic_write(directory / ENV_STATE_FILE, lambda f: f.write(env_state))
    atomic_write(path, lambda f: torch.save({"format": FORMAT, "version": VERSION, **state}, f))
    return path


def resolve(path: str | Path) -> Path:
    """A checkpoint file, or a run directory containing one."""
    p = Path(path)
    if p.is_dir():
        p = p / CHECKPOINT_FILE
    if not p.exists():
        raise CheckpointError(
            f"no checkpoint at {str(path)!r} (expected a run directory or a .pt file)"
        )
    return p


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read and sanity-check a checkpoint; a clear error if it is corrupt or not ours."""
    p = resolve(path)
    try:
        data = torch.load(p, map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, pickle.UnpicklingError, zipfile.BadZipFile, OSError) as err:
        raise CheckpointError(
            f"{p} is not a readable checkpoint (corrupt or truncated file?): {_reason(err)}"
        ) from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CheckpointError(f"{p} is not an entityrl checkpoint")
    if data.get("version") != VERSION:
        raise CheckpointError(
            f"{p} has checkpoint format version {data.get('version')}; this entityrl reads {VERSION}"
        )
    missing = [key for key in REQUIRED if key not in data]
    if missing:
        raise CheckpointError(f"{p} is incomplete: missing {', '.join(missing)}")
    return data


def _reason(err: BaseException) -> str:
    """The gist of torch's error, on one line."""
    if isinstance(err, pickle.UnpicklingError):
        # torch suggests weights_only=False here, which would run whatever code the file holds;
        # a checkpoint only ever holds tensors and plain data, so say that instead.
        return "it is not a torch file, or holds objects other than tensors and plain data"
    if isinstance(err, EOFError):
        return "the file ends before the data does"
    first_sentence = str(err).strip().split("\n")[0].split(". ")[0]
    return first_sentence or type(err).__name__


def load_env_state(directory: Path) -> bytes | None:
    path = directory / ENV_STATE_FILE
    return path.read_bytes() if path.exists() else None


def config_differences(a: dict[str, Any], b: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two nested config dicts."""
    keys = sorted(set(a) | set(b))
    diffs: list[str] = []
    for key in keys:
        va, vb = a.get(key), b.get(key)
        if isinstance(va, dict) and isinstance(vb, dict):
            diffs += config_differences(va, vb, f"{prefix}{key}.")
        elif va != vb:
            diffs.append(f"{prefix}{key}")
    return diffs
