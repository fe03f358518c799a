"""The device option: which settings are accepted, the errors for devices this machine lacks,
and agents that load on the device asked for (checkpoints always read to the CPU first)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from entityrl.cli.main import main
from entityrl.nn.device import DeviceError, resolve_device
from entityrl.nn.kernels.build import torch_path
from entityrl.training import load_agent
from entityrl.training.checkpoint import load_checkpoint
from entityrl.training.config import ConfigError, load_config
from entityrl.training.runner import train

QUIET = ["log.tensorboard=false", "log.progress=false"]


@pytest.fixture
def no_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def test_auto_is_the_cpu_without_cuda(no_cuda: None) -> None:
    assert resolve_device("auto") == torch.device("cpu")


@pytest.mark.parametrize("setting", ["gpu", "cuda:x", "CPU"])
def test_unknown_settings_are_refused(setting: str) -> None:
    with pytest.raises(DeviceError, match=r"device must be auto, cpu, cuda, cuda:N or mps"):
        resolve_device(setting)
    with pytest.raises(ConfigError, match=r"device must be auto, cpu, cuda, cuda:N or mps"):
        load_config("CherryPick", [f"device={setting}"])


def test_cuda_without_cuda_names_what_torch_found(no_cuda: None) -> None:
    with pytest.raises(
        DeviceError, match=r"device=cuda:1, but torch finds no CUDA device \(torch "
    ):
        resolve_device("cuda:1")


def test_a_missing_gpu_index_names_the_ones_there(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    with pytest.raises(DeviceError, match=r"device=cuda:2, but this machine has 2 CUDA device"):
        resolve_device("cuda:2")


def test_mps_without_an_apple_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    with pytest.raises(DeviceError, match=r"device=mps, but torch finds no Apple GPU"):
        resolve_device("mps")


def test_train_on_a_missing_gpu_is_one_line(
    no_cuda: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["train", "CherryPick", "device=cuda", *QUIET, f"log.run_dir={tmp_path}"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("entityrl train: error: device=cuda, but torch finds no CUDA device")
    assert len(err.strip().splitlines()) == 1


def test_a_run_loads_on_the_device_asked_for(no_cuda: None, tmp_path: Path) -> None:
    config = load_config(
        "CherryPick",
        [*QUIET, "device=cpu", "total_timesteps=512", "net.d_model=16", f"log.run_dir={tmp_path}"],
    )
    train(config=config)
    agent = load_agent(tmp_path, device="cpu")
    assert agent.net.device == torch.device("cpu")
    assert all(p.device.type == "cpu" for p in agent.net.parameters())
    with pytest.raises(DeviceError, match=r"device=cuda, but torch finds no CUDA device"):
        load_agent(tmp_path, device="cuda")


@pytest.mark.parametrize("env", ["CherryPick", "MultiSnake"])
def test_the_torch_path_trains_like_the_kernels(tmp_path: Path, env: str) -> None:
    # What a GPU runs (no C++ kernel) against the CPU's fast path, in
    # float32: a few iterations end within float tolerance of each other.
    overrides = [*QUIET, "device=cpu", "net.precision=float32", "total_timesteps=1024",
                 "rollout.num_envs=8", "rollout.steps=32"]  # fmt: skip
    train(config=load_config(env, [*overrides, f"log.run_dir={tmp_path / 'kernels'}"]))
    with torch_path():
        torch_run = [*overrides, f"log.run_dir={tmp_path / 'torch'}"]
        train(config=load_config(env, torch_run))
    fast, plain = (load_checkpoint(tmp_path / d)["model"] for d in ("kernels", "torch"))
    for name in fast:
        torch.testing.assert_close(fast[name], plain[name], rtol=1e-3, atol=1e-4, msg=name)
