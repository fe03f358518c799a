"""Pickles signed with this user's key, for the parts of a simulation's state that are not
plain data and that the user has allowed to be pickled.

Unpickling runs whatever code the pickle names. A run directory may come from anyone, so a
pickle is signed (HMAC-SHA256) with a secret that never leaves this user's cache directory
(:func:`machine_key`) and is unpickled only if the signature verifies: one written by another
user, on another machine, or changed since, never is.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import pickle
import tempfile
from pathlib import Path
from typing import Any

KEY_FILE_VARIABLE = "ENTITYRL_KEY_FILE"
"""Names the file holding the secret that signs pickles (see :func:`machine_key`)."""
KEY_BYTES = 32


class BadKeyError(OSError):
    """The signing key exists but is not a key."""


def key_path() -> Path:
    return Path(
        os.environ.get(KEY_FILE_VARIABLE) or Path.home() / ".cache" / "entityrl" / "checkpoint.key"
    )


def machine_key() -> bytes:
    """The secret that signs pickles: ``KEY_BYTES`` random bytes in ``$ENTITYRL_KEY_FILE``,
    else ``~/.cache/entityrl/checkpoint.key``, made on first use, readable by its owner only."""
    path = key_path()
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
        raise BadKeyError(
            f"{path}: expected a key of {KEY_BYTES} bytes for signing pickles, found "
            f"{len(key)} (delete the file to make a new one; what the old key signed then no "
            "longer loads)"
        )
    return key


def sign(data: bytes) -> str:
    """The signature of ``data`` under this user's :func:`machine_key`."""
    return hmac.new(machine_key(), data, hashlib.sha256).hexdigest()


def signed_pickle(value: Any) -> dict[str, str]:
    """``value`` pickled (as latin-1 text, see :mod:`entityrl.env.plain_state`) with its
    signature; raises ``NotImplementedError`` naming why if it cannot be pickled or signed."""
    try:
        data = pickle.dumps(value)
    except Exception as err:  # whatever pickling a foreign object raises
        raise NotImplementedError(
            f"it does not pickle either ({type(err).__name__}: {err})"
        ) from None
    try:
        signature = sign(data)
    except OSError as err:  # no key can be made (a read-only home directory, say)
        raise NotImplementedError(
            f"cannot make the key that signs pickles ({err}; set {KEY_FILE_VARIABLE} to a "
            "writable file)"
        ) from None
    return {"data": data.decode("latin-1"), "mac": signature}


def verifies(part: dict[str, Any]) -> bool:
    """Whether a :func:`signed_pickle` part carries this user's signature of its data."""
    data, signature = part.get("data"), part.get("mac")
    if not isinstance(data, str) or not isinstance(signature, str):
        return False
    try:
        return hmac.compare_digest(signature, sign(data.encode("latin-1")))
    except (OSError, UnicodeEncodeError):  # no key here, or not latin-1 text: nothing verifies
        return False
