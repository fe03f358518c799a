"""One trainer at a time in a run directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_runner import config

from entityrl.training import Trainer
from entityrl.training.checkpoint import CheckpointError
from entityrl.training.config import ConfigError, load_config
from entityrl.training.run_dir import LOCK_FILE, RunDirError, RunLock

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="no flock on Windows")


def test_a_second_trainer_in_a_run_directory_is_refused_naming_the_holder(tmp_path: Path) -> None:
    run = tmp_path / "run"
    first = Trainer(config(run))
    with pytest.raises(RunDirError, match=rf"in use by another trainer \(pid {os.getpid()}\)"):
        Trainer(config(run))
    first.run()
    assert not (run / LOCK_FILE).exists()
    # Once the run ended, it can be continued.
    resumed = Trainer(config(run, "total_timesteps=256"), resume=run)
    with pytest.raises(RunDirError, match="in use by another trainer"):
        Trainer(config(run, "total_timesteps=256"), resume=run)  # two resumes at once
    assert resumed.run().steps == 256


def test_a_trainer_that_fails_to_start_lets_go(tmp_path: Path) -> None:
    run = tmp_path / "run"
    Trainer(config(run)).run()
    with pytest.raises(CheckpointError, match="different configuration"):
        Trainer(config(run, "seed=2"), resume=run)
    # Not refused: the trainer that failed after taking the lock released it.
    assert Trainer(config(run, "total_timesteps=256"), resume=run).run().steps == 256


def test_a_new_run_that_fails_to_start_leaves_no_directory(tmp_path: Path) -> None:
    run = tmp_path / "new"
    with pytest.raises(ConfigError, match=r"env\.kwargs: MoveToOrigin: max_steps must be"):
        Trainer(load_config("MoveToOrigin", [f"log.run_dir={run}", "env.kwargs.max_steps=0"]))
    assert not run.exists()


def test_a_killed_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    script = (
        "import os, sys; from pathlib import Path; from entityrl.training.run_dir import RunLock;"
        "RunLock(Path(sys.argv[1])); os.kill(os.getpid(), 9)"
    )
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], timeout=120)
    assert done.returncode == -9 and (tmp_path / LOCK_FILE).exists()  # left behind...
    lock = RunLock(tmp_path)  # ...but not held
    lock.release()
    assert not (tmp_path / LOCK_FILE).exists()
