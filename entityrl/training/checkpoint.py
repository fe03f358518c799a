"""Checkpoints: everything needed to continue a run or use its agent, written atomically.

``checkpoint.pt`` holds tensors and plain data only (it loads with ``weights_only=True``):
model and optimizer state, config, step, RNG states, the spaces the network was built for, and
the environments' own state (to continue episodes exactly where they were) as plain data
(:mod:`entityrl.env.plain_state`). One file, written atomically: no crash can pair a model
with environments of another iteration. A checkpoint with a non-finite number in its model or
optimizer state is refused rather than written.

Run directories are shared, and unpickling runs whatever code the pickle names: nothing in a
checkpoint is unpickled unless the user asks for it. Environments whose state is not plain
data resume with new episodes and an :class:`EnvStateWarning`; with ``env.pickle_state=true``
those parts are pickled, signed with this user's key (:mod:`entityrl.env.signing`), and
unpickled on resume only if the setting is still on and the signature verifies. Checkpoints of
earlier versions, whose environment state is a pickle, resume with new episodes.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pickle
import re
import shutil
import tempfile
import time
import warnings
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from entityrl.env import plain_state

# Re-exported: checkpoints record the spaces in this form.
from entityrl.env.space_data import spaces_from_data as spaces_from_data
from entityrl.env.space_data import spaces_to_data as spaces_to_data

FORMAT = "entityrl-checkpoint"
VERSION = 1
CHECKPOINT_FILE = "checkpoint.pt"
ZIP_MAGIC = b"PK\x03\x04"  # how a zip archive, which torch.save writes, begins
ENV_STATE_KEY = "env_state"
ENV_STATE_FILE = "env_state.pkl"
"""Where checkpoints of earlier versions kept the environments' state (a pickle)."""
STALE_TEMP_AGE = 60.0
"""Seconds without a write after which a temporary file of :func:`atomic_write` is a leftover.
A run directory has one trainer at a time (entityrl.training.run_dir), but other commands may
write there meanwhile (``entityrl export`` its agent.onnx): their files are younger."""
# atomic_write's temporary files: mkstemp puts 8 random characters between prefix and suffix.
_TEMP_NAME = re.compile(r"\..+\.[a-z0-9_]{8}\.tmp")
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


class CheckpointWriteError(CheckpointError):
    """A checkpoint could not be written (a full disk, say); the previous one is intact."""


class EnvStateWarning(UserWarning):
    """A run goes on with new episodes: its environments' state could not be saved as plain
    data, or a saved state is not loaded (pickled, and not allowed or not signed here)."""


def atomic_write(path: Path, write: Callable[[Any], None], mode: str = "wb") -> None:
    """Write through a temporary file in the same directory (``.<name>.<8 random
    characters>.tmp``), then rename over ``path``. A process killed while writing leaves that
    file behind; :func:`remove_stale_temp_files` removes such leftovers."""
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


def remove_stale_temp_files(directory: Path) -> None:
    """Remove from ``directory`` the temporary files of :func:`atomic_write` that no write has
    touched for :data:`STALE_TEMP_AGE` seconds: leftovers of killed writes (a write in progress
    keeps its file's modification time fresh). Other files are never touched."""
    now = time.time()
    for path in directory.glob(".*.tmp"):
        if not _TEMP_NAME.fullmatch(path.name):
            continue
        with contextlib.suppress(OSError):  # renamed by its writer meanwhile, or read-only
            if now - path.stat().st_mtime > STALE_TEMP_AGE:
                path.unlink()


def save_checkpoint(
    directory: Path,
    state: dict[str, Any],
    env_states: list[Any] | None,
    name: str = CHECKPOINT_FILE,
) -> Path:
    """Write ``name`` (default ``checkpoint.pt``) into ``directory``, with the environments'
    state (``env_states``, one per training process, plain data; if given) in the same file."""
    for key in ("model", "optimizer"):
        bad = first_non_finite(state[key])
        if bad is not None:
            raise CheckpointError(
                f"refusing to write a checkpoint whose {key} state holds non-finite numbers "
                f"({key}.{bad}); the last checkpoint in {directory} is kept"
            )
    path = directory / name
    data = {"format": FORMAT, "version": VERSION, **state, ENV_STATE_KEY: env_states}
    remove_stale_temp_files(directory)  # the space they hold may be what this write needs
    try:
        atomic_write(path, lambda f: torch.save(data, f))
    except (OSError, RuntimeError) as err:
        cause = _os_error(err)
        if cause is None:
            raise
        raise CheckpointWriteError(_write_failure(path, cause, data)) from err
    # An environment state of an earlier version would no longer match the checkpoint.
    (directory / ENV_STATE_FILE).unlink(missing_ok=True)
    return path


def _os_error(err: BaseException) -> OSError | None:
    """The OSError behind a failed write: ``err`` itself, or the one it was raised while
    handling (torch reports a failed write to a file object as the RuntimeError "[enforce fail
    at inline_container.cc:...] unexpected pos", raised while handling the OSError)."""
    seen: BaseException | None = err
    for _ in range(8):  # a chain is short; bounded, as contexts may form a cycle
        if seen is None or isinstance(seen, OSError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _write_failure(path: Path, err: OSError, data: dict[str, Any]) -> str:
    """One line on a checkpoint that could not be written: why, how much space it needs where
    the disk is full, and what is left."""
    reason = err.strerror or str(err)
    reason = reason[:1].lower() + reason[1:]
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        needed = sum(t.nbytes for _, t in _named_tensors(data))
        free = ""
        with contextlib.suppress(OSError):
            free = f", {shutil.disk_usage(path.parent).free / 1e6:,.2f} MB are free there"
        reason += f" (the checkpoint needs at least {needed / 1e6:,.2f} MB{free})"
    kept = f"the previous {path.name} is intact" if path.exists() else "none was written before"
    return f"could not write {path}: {reason}; {kept}"


def _named_tensors(tree: Any, prefix: str = "") -> Iterator[tuple[str, torch.Tensor]]:
    """Every tensor in ``tree`` (nested dicts and lists), with its dotted name."""
    if isinstance(tree, torch.Tensor):
        yield prefix or "tensor", tree
        return
    items = (
        tree.items()
        if isinstance(tree, dict)
        else enumerate(tree)
        if isinstance(tree, list)
        else ()
    )
    for key, value in items:
        yield from _named_tensors(value, f"{prefix}.{key}" if prefix else str(key))


def first_non_finite(tree: Any, prefix: str = "") -> str | None:
    """The dotted name of the first floating-point tensor in ``tree`` (nested dicts and lists)
    holding a NaN or an infinity, or None."""
    return next(
        (
            name
            for name, tensor in _named_tensors(tree, prefix)
            if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all())
        ),
        None,
    )


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
    if p.is_file() and p.stat().st_size and _first_bytes(p) != ZIP_MAGIC:
        # torch.save writes zip archives; other files make torch.load fail in odd ways.
        raise CheckpointError(
            f"{p} is not a checkpoint: expected a checkpoint.pt written by entityrl train "
            "(a zip archive), or the run directory holding one"
        )
    try:
        data = torch.load(p, map_location="cpu", weights_only=True)
    except (
        RuntimeError,
        EOFError,
        pickle.UnpicklingError,
        zipfile.BadZipFile,
        OSError,
        IndexError,
        ValueError,
    ) as err:
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
    bad = first_non_finite(data["model"])
    if bad is not None:  # written by a version that did not refuse to
        raise CheckpointError(f"{p} holds a diverged model: parameter {bad} is not finite")
    return data


def _first_bytes(path: Path) -> bytes:
    with path.open("rb") as f:
        return f.read(len(ZIP_MAGIC))


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


def load_env_states(
    directory: Path, saved: dict[str, Any], *, allow_pickle: bool = False
) -> list[Any] | None:
    """The environments' saved state, one entry per training process, from the checkpoint
    ``saved`` (read from ``directory``); None, with an :class:`EnvStateWarning`, where the
    environments resume with new episodes: no state was saved, or it holds pickled parts that
    ``allow_pickle`` does not allow or that this user did not sign, or an earlier version
    pickled it."""
    states = saved.get(ENV_STATE_KEY)
    where = directory / CHECKPOINT_FILE
    if states is None and (directory / ENV_STATE_FILE).exists():
        states, where = b"", directory / ENV_STATE_FILE
    if states is None:
        return None
    why = None
    if not isinstance(states, list):  # a pickle, as earlier versions wrote
        why = "an earlier version of entityrl pickled it, and unpickling could run any code"
    else:
        try:
            plain_state.check_pickled_parts(states, allow_pickle=allow_pickle)
        except plain_state.PickleRefusedError as err:
            why = str(err)
    if why is not None:
        warnings.warn(
            f"{where}: the environments' saved state is not loaded ({why}); the environments "
            "start new episodes",
            EnvStateWarning,
            stacklevel=2,
        )
        return None
    return states


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
