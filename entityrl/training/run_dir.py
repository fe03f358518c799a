"""Run directories: one run per directory, never two mixed in one."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import time
from pathlib import Path
from typing import IO

try:
    import fcntl
except ImportError:  # Windows: run directories are not locked there
    fcntl = None  # type: ignore[assignment]

from entityrl.training.config import ConfigError

# What a run writes into its directory; any of them means the directory holds a run.
RUN_FILES = ("checkpoint.pt", "config.yaml", "metrics.jsonl")
LOCK_FILE = ".entityrl.lock"
"""Held by the trainer working in a run directory; it holds the trainer's process id."""


class RunDirError(ConfigError):
    """A new run was pointed at a directory that holds another run."""


def default_run_dir(env_id: str) -> Path:
    """``runs/ENV-DATE-TIME``, numbered ``-2``, ``-3``, ... if a run started that second."""
    base = Path("runs") / f"{safe_name(env_id)}-{time.strftime('%Y%m%d-%H%M%S')}"
    candidate, number = base, 1
    while candidate.exists():
        number += 1
        candidate = base.with_name(f"{base.name}-{number}")
    return candidate


def safe_name(env_id: str) -> str:
    """``env_id`` as a file name on every system: ``my_env.MyEnv`` for ``my_env:MyEnv``,
    ``gymnasium.ALE.Pong-v5`` for ``gymnasium:ALE/Pong-v5`` (a colon is refused by Windows and
    awkward in a shell; a slash would nest directories). Only a name: the run's config.yaml
    keeps the environment's id, and nothing reads it back from the directory."""
    return re.sub(r"[^A-Za-z0-9_.-]+", ".", env_id).strip(".") or "env"


def refuse_existing_run(run_dir: Path) -> None:
    """Raise :class:`RunDirError` if ``run_dir`` already holds a run: a new run would replace
    its checkpoint and config and append to its metrics."""
    found = [name for name in RUN_FILES if (run_dir / name).exists()]
    if found:
        raise RunDirError(
            f"{run_dir} already holds a run ({', '.join(found)}); continue it with "
            f"`entityrl train --resume {shlex.quote(str(run_dir))}`, or choose another "
            "log.run_dir (or remove that directory)"
        )


class RunLock:
    """An exclusive lock on a run directory while a trainer works in it, so that two trainers
    (two new runs, two resumes, or a resume while the run goes on) never write into one.

    The lock is the kernel's (``flock``) on :data:`LOCK_FILE`: it goes with the process that
    holds it, so a killed trainer leaves no stale lock behind. The file holds the holder's pid
    (for the message of the trainer refused) and is removed on :meth:`release`. Not locked
    where ``fcntl`` is missing (Windows).
    """

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / LOCK_FILE
        self.file: IO[str] | None = None
        self.made_directory = not run_dir.exists()
        if fcntl is None:
            return
        run_dir.mkdir(parents=True, exist_ok=True)
        while self.file is None:
            file = open(self.path, "a+")  # noqa: SIM115 (held until release)
            try:
                fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                file.seek(0)
                holder = file.read().strip() or "unknown"
                file.close()
                raise RunDirError(
                    f"{run_dir} is in use by another trainer (pid {holder}); wait for it to "
                    "end, or stop it, before training there"
                ) from None
            if _same_file(file, self.path):
                self.file = file
            else:  # released and removed while we opened it: lock the file there now
                file.close()
        self.file.seek(0)
        self.file.truncate()
        self.file.write(f"{os.getpid()}\n")
        self.file.flush()

    def release(self) -> None:
        """Let other trainers in (idempotent)."""
        if self.file is None or fcntl is None:
            return
        self.path.unlink(missing_ok=True)  # before unlocking: a waiter then sees it gone
        fcntl.flock(self.file, fcntl.LOCK_UN)
        self.file.close()
        self.file = None
        if self.made_directory:
            # A run that failed before writing anything leaves no empty directory behind.
            with contextlib.suppress(OSError):  # not empty (or already gone): kept
                self.path.parent.rmdir()


def _same_file(file: IO[str], path: Path) -> bool:
    try:
        found = path.stat()
    except FileNotFoundError:
        return False
    mine = os.fstat(file.fileno())
    return (found.st_dev, found.st_ino) == (mine.st_dev, mine.st_ino)
