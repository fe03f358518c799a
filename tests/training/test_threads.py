"""The default torch thread count: explicit settings win, else the free cores per process."""

from __future__ import annotations

import os

import pytest
import torch

from entityrl.training import threads


@pytest.fixture
def four_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine of 8 cores of which this process may use 4, no OMP_NUM_THREADS."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 8)


def load(monkeypatch: pytest.MonkeyPatch, one_minute: float) -> None:
    monkeypatch.setattr(os, "getloadavg", lambda: (one_minute, 0.0, 0.0))


@pytest.mark.usefixtures("four_cores")
def test_the_free_cores_are_the_usable_ones_less_their_share_of_the_load(monkeypatch) -> None:
    load(monkeypatch, 0.0)
    assert threads.free_cores() == 4
    load(monkeypatch, 4.0)  # half of the machine's 8 cores busy: 2 of ours
    assert threads.free_cores() == 2
    load(monkeypatch, 30.0)  # overloaded: still one
    assert threads.free_cores() == 1


@pytest.mark.usefixtures("four_cores")
def test_training_threads_share_the_free_cores_among_the_training_processes(monkeypatch) -> None:
    load(monkeypatch, 0.0)
    assert threads.training_threads(0) == 4
    assert threads.training_threads(0, processes=2) == 2
    assert threads.training_threads(0, processes=8) == 1
    load(monkeypatch, 6.0)  # a busy machine: 3 of our 4 cores taken
    assert threads.training_threads(0) == 1


@pytest.mark.usefixtures("four_cores")
def test_an_explicit_setting_wins_and_omp_num_threads_leaves_torch_alone(monkeypatch) -> None:
    load(monkeypatch, 6.0)
    assert threads.training_threads(3) == 3
    assert threads.inference_threads(3) == 3
    assert threads.inference_threads(0) == threads.INFERENCE_THREADS
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert threads.training_threads(0) is None
    with pytest.raises(ValueError, match="torch_threads must be >= 0"):
        threads.training_threads(-1)


def test_using_threads_restores_the_callers_count() -> None:
    before = torch.get_num_threads()
    target = 1 if before != 1 else 2
    with threads.using_threads(target):
        assert torch.get_num_threads() == target
    assert torch.get_num_threads() == before
    with threads.using_threads(None):
        assert torch.get_num_threads() == before


def test_a_training_run_gives_the_callers_thread_count_back(tmp_path) -> None:
    from entityrl import train

    before = torch.get_num_threads()
    target = 1 if before != 1 else 2
    overrides = [f"torch_threads={target}", "total_timesteps=256", "rollout.num_envs=4",
                 "rollout.steps=32", f"log.run_dir={tmp_path / 'run'}", "log.progress=false"]  # fmt: skip
    train("MoveToOrigin", overrides=overrides)
    assert torch.get_num_threads() == before
