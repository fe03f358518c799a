"""Which torch device a setting names: ``auto``, ``cpu``, ``cuda``, ``cuda:N`` or ``mps``."""

from __future__ import annotations

import re

import torch

DEVICE_PATTERN = re.compile(r"auto|cpu|cuda(:\d+)?|mps")


class DeviceError(ValueError):
    """A device setting that is malformed or names a device this machine does not have."""


def check_device_setting(setting: str) -> None:
    """Reject settings that name no device kind entityrl knows (without looking at the
    machine: a config may be written on one machine and run on another)."""
    if not DEVICE_PATTERN.fullmatch(setting):
        raise DeviceError(f"device must be auto, cpu, cuda, cuda:N or mps; got {setting!r}")


def resolve_device(setting: str) -> torch.device:
    """The device ``setting`` names on this machine; ``auto`` is the first CUDA device when
    there is one, else the CPU. Raises :class:`DeviceError` naming what the machine has."""
    check_device_setting(setting)
    if setting == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(setting)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise DeviceError(
                f"device={setting}, but torch finds no CUDA device ({_torch_build()}); "
                "use device=cpu, or install a CUDA build of torch (see the README)"
            )
        count = torch.cuda.device_count()
        if device.index is not None and device.index >= count:
            raise DeviceError(
                f"device={setting}, but this machine has {count} CUDA device(s): "
                f"cuda:0 to cuda:{count - 1}"
            )
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise DeviceError(
            f"device=mps, but torch finds no Apple GPU (MPS) ({_torch_build()}); use device=cpu"
        )
    return device


def _torch_build() -> str:
    cuda = torch.version.cuda
    kind = f"built for CUDA {cuda}" if cuda else "a CPU-only build"
    return f"torch {torch.__version__}, {kind}"
