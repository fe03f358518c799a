"""Writing checkpoints when the disk says no: a full disk is one line naming the file, and
what killed writes leave behind is removed."""

from __future__ import annotations

import errno
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from entityrl.cli.main import main
from entityrl.nn.kernels import build
from entityrl.training import checkpoint as ckpt


class FullDisk:
    """A file on a disk with ``room`` bytes left: a write beyond them fails as the operating
    system's does (ENOSPC), and torch reports it as it reports a real full disk."""

    def __init__(self, file: Any, room: int) -> None:
        self.file, self.room = file, room

    def write(self, data: bytes) -> int:
        if len(data) > self.room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= len(data)
        return self.file.write(data)

    def flush(self) -> None:
        self.file.flush()


@pytest.fixture
def disk_fills_up(monkeypatch: pytest.MonkeyPatch) -> Callable[[int], None]:
    """Call with n: from the n-th checkpoint (.pt) written on, the disk has 1 kB left."""

    def after(checkpoints: int) -> None:
        real = ckpt.atomic_write
        written: list[Path] = []

        def atomic_write(path: Path, write: Callable[[Any], None], mode: str = "wb") -> None:
            if path.suffix == ".pt":
                written.append(path)
                if len(written) >= checkpoints:
                    real(path, lambda f: write(FullDisk(f, 1000)), mode)
                    return
            real(path, write, mode)

        monkeypatch.setattr(ckpt, "atomic_write", atomic_write)

    return after


# A few PPO iterations of a tiny network: a second or so.
TINY = [
    "env.kwargs={max_steps: 5}",
    "rollout.num_envs=8",
    "rollout.steps=10",
    "total_timesteps=160",
    "net.d_model=8",
    "net.n_head=1",
    "net.n_layer=1",
    "log.tensorboard=false",
    "log.progress=false",
    "log.checkpoint_interval=80",
]


def state(value: float) -> dict[str, Any]:
    return {"model": {"w": torch.full((100_000,), value)}, "optimizer": {}, "step": int(value)}


def test_a_full_disk_is_one_line_and_keeps_the_previous_checkpoint(
    tmp_path: Path, disk_fills_up: Callable[[int], None]
) -> None:
    disk_fills_up(2)
    ckpt.save_checkpoint(tmp_path, state(1.0), None)
    with pytest.raises(ckpt.CheckpointWriteError) as caught:
        ckpt.save_checkpoint(tmp_path, state(2.0), None)
    message = str(caught.value)
    assert "\n" not in message and "enforce fail" not in message
    assert message.startswith(f"could not write {tmp_path / 'checkpoint.pt'}: no space left on")
    assert "the checkpoint needs at least 0.40 MB" in message  # 100,000 float32
    assert message.endswith("the previous checkpoint.pt is intact")
    assert torch.load(tmp_path / "checkpoint.pt")["step"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]  # no temporary file left


def test_train_reports_a_full_disk_in_one_line(
    tmp_path: Path,
    disk_fills_up: Callable[[int], None],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    disk_fills_up(1)
    monkeypatch.setattr(build, "announce", None)  # the command sets it; unset afterwards
    run = tmp_path / "run"
    code = main(["train", "MoveToOrigin", *TINY, f"log.run_dir={run}"])
    # (A first run here also says that it builds the kernels.)
    err = [line for line in capsys.readouterr().err.splitlines() if "C++ kernels" not in line]
    assert code != 0
    assert len(err) == 1
    path = re.escape(str(run / "checkpoint.pt"))
    assert re.fullmatch(
        rf"entityrl train: error: could not write {path}: no space left on device \(the "
        r"checkpoint needs at least [\d.,]+ MB, [\d.,]+ MB are free there\); none was written "
        "before",
        err[0],
    ), err[0]


def test_leftovers_of_killed_writes_are_removed_and_nothing_else(tmp_path: Path) -> None:
    def made(name: str, age: float) -> Path:
        path = tmp_path / name
        path.write_bytes(b"PK")
        os.utime(path, (time.time() - age,) * 2)
        return path

    stale = [made(".checkpoint.pt.k2j4_8zq.tmp", 120), made(".best.pt.0a1b2c3d.tmp", 3600)]
    kept = [
        made(".agent.onnx.x9y8z7w6.tmp", 5),  # being written by `entityrl export`
        made(".notes.tmp", 3600),  # not atomic_write's
        made("old.checkpoint.pt.k2j4_8zq.tmp", 3600),
        made("checkpoint.pt", 3600),
    ]
    ckpt.remove_stale_temp_files(tmp_path)
    assert not any(p.exists() for p in stale)
    assert all(p.exists() for p in kept)


def test_writing_a_checkpoint_removes_the_leftover_of_a_killed_one(tmp_path: Path) -> None:
    leftover = tmp_path / ".checkpoint.pt.k2j4_8zq.tmp"
    leftover.write_bytes(b"PK\x03\x04 half a checkpoint")
    os.utime(leftover, (time.time() - 2 * ckpt.STALE_TEMP_AGE,) * 2)
    ckpt.save_checkpoint(tmp_path, state(1.0), None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.pt"]
