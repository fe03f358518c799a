"""Building the kernels: with clang as with GCC, and a failed build paid once.

The clang test compiles every kernel from scratch with clang++ (some 45 s of CPU time) in a
subprocess with its own cache, then runs the kernel tests' core checks there against torch.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from entityrl.nn import kernels
from entityrl.nn.kernels import build, categorical, linear, pointwise

_MODULES = (kernels, pointwise, categorical, linear)
_TESTS = Path(__file__).resolve().parent
# One or two checks per kernel against torch: float32 and bfloat16, forward and backward.
_CORE_CHECKS = (
    "test_float32",
    "test_bfloat16",
    "test_layer_norm_more_widths",
    "test_gelu_every_bfloat16",
    "test_forward",
    "test_gradients",
    "test_bfloat16_output_matches_torch",
    "test_gradients_match_torch_and_float64",
    "test_equals_the_layer_by_layer_path",
    "test_rogue_net_training_step_matches_torch",
)
_KERNEL_TESTS = ("attention", "pointwise", "categorical", "linear", "mlp", "block", "embedding")


@pytest.mark.skipif(shutil.which("clang++") is None, reason="clang++ is not installed")
def test_kernels_build_and_pass_with_clang(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    env = {**os.environ, "CXX": "clang++", "ENTITYRL_KERNEL_CACHE": str(cache)}
    env.pop("ENTITYRL_NO_KERNELS", None)
    files = [str(_TESTS / f"test_{name}_kernel.py") for name in _KERNEL_TESTS]
    options = ["-x", "-p", "no:randomly", "-p", "no:cacheprovider", "-k", " or ".join(_CORE_CHECKS)]
    command = [sys.executable, "-m", "pytest", *options, *files]
    result = subprocess.run(
        command, env=env, cwd=_TESTS.parents[1], capture_output=True, text=True, timeout=1200
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert re.search(r"\d+ passed", result.stdout), result.stdout[-3000:]
    built = sorted(p.name.split("-")[0] for p in cache.glob("*.so"))
    assert built == ["attention", "categorical", "linear", "pointwise"]
    assert not list(cache.glob("*.failed"))


@pytest.fixture
def failing_compiler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """CXX is a compiler that accepts the flag probes but fails on every kernel (after a
    warning), logging each kernel compile to the file it yields; every kernel is loaded again
    afterwards as before."""
    before = [module.kernel_available() for module in _MODULES]
    log = tmp_path / "compiles.log"
    fake = tmp_path / "failing-c++"
    fake.write_text(
        "#!/bin/sh\n"
        'case "$*" in *--version*) echo "failing-c++ 1.0"; exit 0;; esac\n'
        'out=""; prev=""\n'
        'for a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done\n'
        'case "$*" in *probe.cpp*) : > "$out"; exit 0;; esac\n'
        f'echo "$*" >> "{log}"\n'
        'echo "kernel.cpp:1:1: warning: this is not the error" >&2\n'
        'echo "kernel.cpp:2:5: error: no vector extensions here" >&2\n'
        'echo "1 error generated." >&2\n'
        "exit 1\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("CXX", str(fake))
    monkeypatch.setenv("ENTITYRL_KERNEL_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ENTITYRL_NO_KERNELS", raising=False)
    for module in _MODULES:
        module._reset()
    yield log
    monkeypatch.undo()
    for module in _MODULES:
        module._reset()
    assert [module.kernel_available() for module in _MODULES] == before


def _compiles(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_failed_build_warns_once_naming_compiler_and_error(failing_compiler: Path) -> None:
    with pytest.warns(UserWarning) as record:
        for module in _MODULES:
            assert not module.kernel_available()
    warned = [str(w.message) for w in record if "kernels unavailable" in str(w.message)]
    assert len(warned) == 1
    message = warned[0]
    assert "failing-c++" in message
    assert "kernel.cpp:2:5: error: no vector extensions here" in message
    assert "not the error" not in message
    # Each kernel was compiled once (all four start together), none is compiled again.
    assert len(_compiles(failing_compiler)) == len(_MODULES)


def test_failed_build_is_not_repeated_by_the_next_run(failing_compiler: Path) -> None:
    source = build.SOURCE_DIR / "categorical.cpp"
    with pytest.raises(build.BuildError, match="error: no vector extensions here"):
        build.build_library(source)
    compiled = len(_compiles(failing_compiler))
    assert compiled == 1
    build.forget_builds()  # as a new process would start
    with pytest.raises(build.BuildError, match=r"earlier run.*delete"):
        build.build_library(source)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert not categorical.kernel_available()
    # Only the kernels not tried before were compiled; categorical.cpp was not compiled again.
    assert not any("categorical.cpp" in line for line in _compiles(failing_compiler)[compiled:])
