"""When kernels are built and what builds leave: only for the CPU, announced once, and the
temporary files of killed builds removed by the next one."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from entityrl.env import CategoricalActionSpace, Entity, ObsSpace, SelectEntityActionSpace
from entityrl.nn import RogueNet, RogueNetConfig
from entityrl.nn import kernels as attention
from entityrl.nn.kernels import build, categorical, linear, pointwise

_MODULES = (attention, pointwise, categorical, linear)
OBS_SPACE = ObsSpace(entities={"Unit": Entity(["x", "y"]), "Item": Entity(["x"])})
ACTION_SPACE = {"move": CategoricalActionSpace(["a", "b"]), "pick": SelectEntityActionSpace()}
SOURCE = build.SOURCE_DIR / "categorical.cpp"
# A compiler that passes the flag probes at once and takes a while over each kernel.
SLOW_COMPILER = """#!/bin/sh
case "$*" in *--version*) echo "slow-c++ 1.0"; exit 0;; esac
out=""; prev=""
for a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done
case "$*" in *probe.cpp*) : > "$out"; exit 0;; esac
sleep {seconds}
: > "$out"
"""


@pytest.fixture
def requests(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The names of the kernels asked for during the test (none is built: each is reported
    unavailable); every kernel is loaded again afterwards as before."""
    before = [module.kernel_available() for module in _MODULES]
    for module in _MODULES:
        module._reset()
    asked: list[str] = []

    def load_library(name: str = "attention") -> None:
        asked.append(name)

    monkeypatch.setattr(build, "load_library", load_library)
    yield asked
    monkeypatch.undo()
    for module in _MODULES:
        module._reset()
    assert [module.kernel_available() for module in _MODULES] == before


@pytest.mark.parametrize("config", [{}, {"pooling": "mean"}, {"precision": "bfloat16"}])
def test_a_network_off_the_cpu_asks_for_no_kernel(requests: list[str], config: dict) -> None:
    net = RogueNet(OBS_SPACE, ACTION_SPACE, RogueNetConfig(**config), device="meta")
    x, w = torch.zeros(5, 4, device="meta"), torch.ones(4, device="meta")
    pointwise.layer_norm(x, w, w, 1e-5)
    pointwise.add_layer_norm(x, x, w, w, 1e-5)
    pointwise.gelu(x)
    categorical.masked_categorical(x, None, None, deterministic=True)
    attention.ragged_attention(torch.zeros(4, 24, dtype=torch.float64), [0], [4], 2)  # no kernel
    assert requests == []
    attends = not config.get("pooling")
    assert net.grid_layout == attends  # torch's attention, on padded grids
    net.to_empty(device="cpu")  # on the CPU, a network that attends asks for the kernel
    assert requests == (["attention"] if attends else [])


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty kernel cache, built into by a compiler that takes a second for each kernel."""
    compiler = tmp_path / "slow-c++"
    compiler.write_text(SLOW_COMPILER.format(seconds=1))
    compiler.chmod(0o755)
    monkeypatch.setenv("CXX", str(compiler))
    monkeypatch.setenv("ENTITYRL_KERNEL_CACHE", str(tmp_path / "cache"))
    build.forget_builds()
    yield tmp_path / "cache"
    build.forget_builds()


def test_the_first_build_is_announced_once(
    cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    lines: list[str] = []
    monkeypatch.setattr(build, "announce", lines.append)
    build.build_library(SOURCE)
    build.build_library(build.SOURCE_DIR / "pointwise.cpp")
    assert lines == [
        f"building the C++ kernels for this CPU, once (about half a minute; into {cache})"
    ]
    build.forget_builds()  # as a new process would start
    build.build_library(SOURCE)  # cached: nothing to say
    assert len(lines) == 1


def test_the_next_build_removes_what_a_killed_build_left(cache: Path) -> None:
    # A build in another process, killed (as Ctrl-C or SIGKILL would) while it compiles.
    script = "from pathlib import Path; from entityrl.nn.kernels import build; "
    script += f"build.build_library(Path({str(SOURCE)!r}))"
    builder = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    deadline = time.time() + 60
    while not list(cache.glob(".*.tmp")) and time.time() < deadline:
        time.sleep(0.05)
    os.killpg(builder.pid, 9)
    builder.wait()
    (left,) = cache.glob(".*.tmp")
    assert left.stat().st_size == 0
    assert not list(cache.glob("*.so"))  # nothing under the library's name
    assert f"-{builder.pid}@{socket.gethostname()}-" in left.name

    # A temporary file of a build of this process, of another machine and an old one.
    mine = cache / f".pointwise-key-{os.getpid()}@{socket.gethostname()}-abcd1234.tmp"
    elsewhere = cache / f".pointwise-key-{builder.pid}@another-host-abcd1234.tmp"
    old = cache / ".linear-key-abcd1234.tmp"  # as earlier versions named them
    for path in (mine, elsewhere, old):
        path.touch()
    os.utime(old, (time.time() - build.STALE_TEMP_AGE - 1,) * 2)

    library = build.build_library(SOURCE)
    assert library.exists()
    assert sorted(cache.glob(".*.tmp")) == sorted([mine, elsewhere])
