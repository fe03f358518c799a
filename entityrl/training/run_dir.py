"""Run directories: one run per directory, never two mixed in one."""

from __future__ import annotations

import shlex
import time
from pathlib import Path

from entityrl.training.config import ConfigError

# What a run writes into its directory; any of them means the directory holds a run.
RUN_FILES = ("checkpoint.pt", "config.yaml", "metrics.jsonl")


class RunDirError(ConfigError):
    """A new run was pointed at a directory that holds another run."""


def default_run_dir(env_id: str) -> Path:
    """``runs/ENV-DATE-TIME``, numbered ``-2``, ``-3``, ... if a run started that second."""
    base = Path("runs") / f"{env_id}-{time.strftime('%Y%m%d-%H%M%S')}"
    candidate, number = base, 1
    while candidate.exists():
        number += 1
        candidate = base.with_name(f"{base.name}-{number}")
    return candidate


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
