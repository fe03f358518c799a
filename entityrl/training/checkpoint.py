"""Checkpoints: everything needed to continue a run or use its agent, written atomically.

``checkpoint.pt`` holds tensors and plain data only (it loads with ``weights_only=True``):
model and optimizer state, config, step, RNG states, the spaces the network was built for, and
the environments' own state (to continue episodes exactly where they were), pickled into a
bytes field that is unpickled only when resuming. One file, written atomically: no crash can
pair a model with environments of another iteration. A checkpoint with a non-finite number in
its model or optimizer state is refused rather than written.

Unpickling runs whatever code the pickle names, and run directories are shared. So the
environments' state is signed when it is written (HMAC-SHA256 with a secret kept in the
user's cache directory, :func:`machine_key`) and unpickled on resume only if the signature
verifies: a run directory written by another user, on another machine, or changed since,
resumes with new episodes and a warning (:class:`UnverifiedStateWarning`), its environment
state never unpickled. (Checkpoints of earlier versions, unsigned, with the state in
``env_state.pkl`` or in the checkpoint, resume the same way.)
"""

from __future__ import annotations

import hashlib
import hmac
import os
import pickle
import tempfile
import warnings
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
ZIP_MAGIC = b"PK\x03\x04"  # how a zip archive, which torch.save writes, begins
ENV_STATE_KEY = "env_state"
ENV_STATE_MAC_KEY = "env_state_mac"
ENV_STATE_FILE = "env_state.pkl"
"""Where checkpoints of earlier versions kept the environments' state."""
KEY_FILE_VARIABLE = "ENTITYRL_KEY_FILE"
"""Names the file holding the secret that signs environment states (see :func:`machine_key`)."""
KEY_BYTES = 32
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


class UnverifiedStateWarning(UserWarning):
    """A checkpoint's environment state was not signed by this user's key (another machine,
    another user, an earlier version, or a changed file): it is not unpickled."""


def machine_key() -> bytes:
    """The secret that signs the environments' state in checkpoints: ``KEY_BYTES`` random
    bytes in ``$ENTITYRL_KEY_FILE``, else ``~/.cache/entityrl/checkpoint.key``, made on first
    use, readable by its owner only."""
    path = Path(
        os.environ.get(KEY_FILE_VARIABLE) or Path.home() / ".cache" / "entityrl" / "checkpoint.key"
    )
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(os.urandom(KEY_BYTES))
            # A link is made whole or not at all, and never over a key another process made.
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            Path(tmp).unlink(missing_ok=True)
    key = path.read_bytes()
    if len(key) != KEY_BYTES:
        raise CheckpointError(
            f"{path}: expected a key of {KEY_BYTES} bytes for signing checkpoints, found "
            f"{len(key)} (delete the file to make a new one; checkpoints signed with the old "
            "key then resume with new episodes)"
        )
    return key


def sign(data: bytes) -> str:
    """The signature of an environment state under this user's :func:`machine_key`."""
    return hmac.new(machine_key(), data, hashlib.sha256).hexdigest()


def _verifies(signature: str, data: bytes) -> bool:
    try:
        return hmac.compare_digest(signature, sign(data))
    except OSError:  # no key here: nothing can verify
        return False


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
    """Write ``name`` (default ``checkpoint.pt``) into ``directory``, with the environments'
    state ``env_state`` (if given) in the same file."""
    for key in ("model", "optimizer"):
        bad = first_non_finite(state[key])
        if bad is not None:
            raise CheckpointError(
                f"refusing to write a checkpoint whose {key} state holds non-finite numbers "
                f"({key}.{bad}); the last checkpoint in {directory} is kept"
            )
    path = directory / name
    # As a uint8 tensor, not bytes: weights-only loading in torch < 2.5 refuses bytes objects.
    packed = (
        None if env_state is None else torch.frombuffer(bytearray(env_state), dtype=torch.uint8)
    )
    signature = None
    if env_state is not None:
        try:
            signature = sign(env_state)
        except OSError as err:  # no key can be made (a read-only home directory, say)
            warnings.warn(
                f"cannot make the key that signs the environments' state ({err}; set "
                f"{KEY_FILE_VARIABLE} to a writable file): this run will resume with new "
                "episodes",
                UnverifiedStateWarning,
                stacklevel=2,
            )
    data = {"format": FORMAT, "version": VERSION, **state, ENV_STATE_KEY: packed,
            ENV_STATE_MAC_KEY: signature}  # fmt: skip
    atomic_write(path, lambda f: torch.save(data, f))
    # An environment state of an earlier version would no longer match the checkpoint.
    (directory / ENV_STATE_FILE).unlink(missing_ok=True)
    return path


def first_non_finite(tree: Any, prefix: str = "") -> str | None:
    """The dotted name of the first floating-point tensor in ``tree`` (nested dicts and lists)
    holding a NaN or an infinity, or None."""
    if isinstance(tree, torch.Tensor):
        if tree.is_floating_point() and not bool(torch.isfinite(tree).all()):
            return prefix or "tensor"
        return None
    items = (
        tree.items()
        if isinstance(tree, dict)
        else enumerate(tree)
        if isinstance(tree, list)
        else ()
    )
    for key, value in items:
        found = first_non_finite(value, f"{prefix}.{key}" if prefix else str(key))
        if found is not None:
            return found
    return None


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


def load_env_states(directory: Path, saved: dict[str, Any]) -> list[bytes] | None:
    """The environments' saved state, one entry per training process, from the checkpoint
    ``saved`` (read from ``directory``); None if the environments could not save theirs, or
    if the state is not signed by this user's key (then it is not unpickled, and an
    :class:`UnverifiedStateWarning` says so)."""
    if ENV_STATE_KEY in saved:
        data, where = saved[ENV_STATE_KEY], directory / CHECKPOINT_FILE
        if isinstance(data, torch.Tensor):
            data = data.numpy().tobytes()
    else:  # a checkpoint of an earlier version
        where = directory / ENV_STATE_FILE
        data = where.read_bytes() if where.exists() else None
    if data is None:
        return None
    signature = saved.get(ENV_STATE_MAC_KEY)
    if not isinstance(signature, str) or not _verifies(signature, data):
        warnings.warn(
            f"{where}: the environments' saved state was not written by this user on this "
            "machine, or was changed since; it is not loaded (unpickling it could run any "
            "code), and the environments start new episodes",
            UnverifiedStateWarning,
            stacklevel=2,
        )
        return None
    try:
        states = pickle.loads(data)
    except Exception as err:  # whatever unpickling garbage raises
        raise CheckpointError(
            f"{where}: the environments' saved state is unreadable: {type(err).__name__}: {err}"
        ) from None
    if not isinstance(states, list):
        raise CheckpointError(f"{where}: the environments' saved state is not ours")
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
