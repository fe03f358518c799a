"""Data-parallel training with two processes (gloo on localhost)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from entityrl.training import checkpoint as ckpt
from entityrl.training.config import ConfigError, load_config
from entityrl.training.runner import train

SMALL = [
    "world_size=2",
    "rollout.num_envs=8",
    "rollout.steps=8",
    "optim.bs=32",
    "net.d_model=16",
    "total_timesteps=128",
    "log.tensorboard=false",
    "log.progress=false",
    "log.checkpoint_interval=64",
]


def test_two_processes_train_in_step_and_resume(tmp_path: Path) -> None:
    config = load_config("CherryPick", [*SMALL, f"log.run_dir={tmp_path}"])
    result = train(config=config)  # raises if the processes' parameters diverged
    assert result.steps == 128 and result.mean_return is not None
    steps = [
        json.loads(line)["step"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()
    ]
    assert steps == [64, 128]
    saved = ckpt.load_checkpoint(tmp_path)
    assert len(saved["rng"]) == 2  # each process's random state
    longer = load_config(tmp_path / "config.yaml", ["total_timesteps=192"])
    assert train(config=longer, resume=tmp_path).steps == 192


def test_world_size_must_divide_the_batch() -> None:
    with pytest.raises(ConfigError, match=r"rollout\.num_envs \(9\) must be a multiple"):
        load_config("CherryPick", ["world_size=2", "rollout.num_envs=9"])
