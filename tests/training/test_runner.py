"""The training loop: determinism, interruption, exact resume, refusals."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
import torch

from entityrl.training import checkpoint as ckpt
from entityrl.training.config import load_config
from entityrl.training.runner import Trainer

SMALL = [
    "rollout.num_envs=8",
    "rollout.steps=8",
    "optim.bs=32",
    "net.d_model=16",
    "total_timesteps=192",  # 3 iterations of 64 samples
    "log.tensorboard=false",
    "log.progress=false",
    "log.checkpoint_interval=64",
]


def config(run_dir: Path, *extra: str, env: str = "MineSweeper"):
    return load_config(env, [*SMALL, f"log.run_dir={run_dir}", *extra])


def learning_metrics(run_dir: Path) -> list[dict]:
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [
        {k: v for k, v in r.items() if k != "time" and not k.startswith("perf/")} for r in records
    ]


def parameters(run_dir: Path) -> dict[str, torch.Tensor]:
    return ckpt.load_checkpoint(run_dir)["model"]


def test_the_same_seed_gives_the_same_run(tmp_path: Path) -> None:
    Trainer(config(tmp_path / "a")).run()
    Trainer(config(tmp_path / "b")).run()
    assert learning_metrics(tmp_path / "a") == learning_metrics(tmp_path / "b")
    a, b = parameters(tmp_path / "a"), parameters(tmp_path / "b")
    assert all(torch.equal(a[k], b[k]) for k in a)


def interrupt_after(iterations: int):
    """An on_iteration hook that delivers a real Ctrl-C (SIGINT) after some iterations."""
    seen = []

    def hook(metrics: dict) -> None:
        seen.append(metrics)
        if len(seen) == iterations:
            os.kill(os.getpid(), signal.SIGINT)

    return hook


@pytest.mark.parametrize(
    ("processes", "extra"),
    [
        (1, ()),
        (2, ()),
        (1, ("ppo.norm_reward=true",)),
        (1, ("ppo.norm_value=true",)),
        (2, ("env.stack=3",)),
        (2, ("rnd.coef=0.5",)),
        (1, ("net.memory=true", "ppo.seq_len=4")),
        (2, ("net.memory=true", "ppo.seq_len=4")),
    ],
    ids=[
        "in_process",
        "worker_processes",
        "reward_normalization",
        "value_normalization",
        "stacking",
        "rnd",
        "memory",
        "memory_worker_processes",
    ],
)
def test_an_interrupted_run_resumed_reaches_the_same_parameters(
    tmp_path: Path, processes: int, extra: tuple[str, ...]
) -> None:
    workers = [f"rollout.processes={processes}", *extra]
    Trainer(config(tmp_path / "whole", *workers)).run()

    first = Trainer(config(tmp_path / "split", *workers), on_iteration=interrupt_after(2)).run()
    assert first.interrupted and first.steps == 128
    resumed = Trainer(config(tmp_path / "split", *workers), resume=tmp_path / "split").run()
    assert resumed.steps == 192 and not resumed.interrupted

    whole, split = parameters(tmp_path / "whole"), parameters(tmp_path / "split")
    assert all(torch.equal(whole[k], split[k]) for k in whole)
    # The log of the resumed run is the log of the whole run, line for line.
    assert learning_metrics(tmp_path / "whole") == learning_metrics(tmp_path / "split")


def test_resume_refuses_a_different_configuration(tmp_path: Path) -> None:
    Trainer(config(tmp_path / "run")).run()
    with pytest.raises(ckpt.CheckpointError, match=r"differing keys: ppo\.gamma"):
        Trainer(config(tmp_path / "run", "ppo.gamma=0.5"), resume=tmp_path / "run")
    # Training longer is allowed.
    longer = Trainer(config(tmp_path / "run", "total_timesteps=256"), resume=tmp_path / "run").run()
    assert longer.steps == 256


def test_resume_of_a_missing_or_corrupt_checkpoint_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ckpt.CheckpointError, match="no checkpoint"):
        Trainer(config(tmp_path / "none"), resume=tmp_path / "none")
    run = tmp_path / "run"
    Trainer(config(run)).run()
    data = (run / "checkpoint.pt").read_bytes()
    (run / "checkpoint.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(ckpt.CheckpointError, match=r"checkpoint\.pt"):
        Trainer(config(run), resume=run)


def test_a_run_leaves_complete_files_only(tmp_path: Path) -> None:
    run = tmp_path / "run"
    Trainer(config(run)).run()
    names = sorted(p.name for p in run.iterdir())
    assert names == ["checkpoint.pt", "config.yaml", "metrics.jsonl"]
    assert load_config(run / "config.yaml") == config(run)


def test_the_worker_timeout_reaches_the_worker_processes(tmp_path: Path) -> None:
    from entityrl.training.runner import make_env

    env = make_env(config(tmp_path, "rollout.processes=2", "rollout.worker_timeout=7.5"))
    try:
        assert env.answer_timeout == 7.5  # type: ignore[attr-defined]
    finally:
        env.close()
