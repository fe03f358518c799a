"""Compile the C++ kernels once per machine and load them with ctypes.

The kernels are plain C++ (no torch headers, which would make every compile take about a
minute) built with the system compiler for the CPU at hand (``-march=native``), so the shared
library cannot ship with the package: it is built on first use and cached. The cached file's
name carries a hash of the source and of the headers beside it, the compiler's version, the
flags and the CPU's feature flags, so editing the source, changing compiler or moving the
cache to another kind of machine builds a new library instead of loading a stale or illegal
one. Several processes may build at once (``pytest -n 2``, data-parallel ranks): each
compiles to its own temporary file and renames it into place atomically, so a reader only ever
sees a complete library.

Nothing here raises: when no compiler is found or compilation fails, :func:`load_library`
returns None, and one warning says why. ``ENTITYRL_NO_KERNELS=1`` disables the kernels;
``ENTITYRL_KERNEL_CACHE`` overrides the cache directory (default
``~/.cache/entityrl/kernels``); ``CXX`` chooses the compiler (default ``g++``, then ``c++``,
then ``clang++``).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Generic, TypeVar

logger = logging.getLogger(__name__)

K = TypeVar("K")

SOURCE_DIR = Path(__file__).resolve().parent
BASE_FLAGS = ["-O3", "-std=c++17", "-fPIC", "-shared", "-ffp-contract=fast", "-fno-math-errno"]
# Tried in order; the first that compiles wins. OpenMP gives the kernel a warm thread pool,
# shared with torch's (torch loads its own libgomp.so.1 first and the kernel's reference to
# that soname resolves to it); without it the kernel starts threads per call.
VARIANTS = [
    ["-march=native", "-fopenmp"],
    ["-mcpu=native", "-fopenmp"],  # compilers that know only -mcpu=native (some for Arm)
    ["-fopenmp"],
    ["-march=native", "-pthread"],
    ["-pthread"],
]
COMPILE_TIMEOUT = 300.0

# Why the kernels are unavailable (None when they are, or before the first attempt).
unavailable_reason: str | None = None
# Inside torch_path(): every kernel reports itself unavailable.
_torch_path_only = False


@contextlib.contextmanager
def torch_path() -> Iterator[None]:
    """Within the block, every kernel declines and the plain torch path runs, as on a machine
    without a compiler. Networks decide their layout when built or moved, so build them inside
    the block. The torch path is the reference the kernels are checked against."""
    global _torch_path_only
    previous, _torch_path_only = _torch_path_only, True
    try:
        yield
    finally:
        _torch_path_only = previous


def cache_dir() -> Path:
    """Where built libraries are kept."""
    env = os.environ.get("ENTITYRL_KERNEL_CACHE")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "entityrl" / "kernels"


def find_compiler() -> str | None:
    """The C++ compiler to use: ``$CXX``, else g++, c++ or clang++ on the PATH."""
    env = os.environ.get("CXX")
    if env:
        return shutil.which(env) or (env if Path(env).is_file() else None)
    for name in ("g++", "c++", "clang++"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _cpu_signature() -> str:
    """The CPU's feature flags (what -march=native compiles for), or the best stand-in."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key = line.split(":", 1)[0].strip().lower()
                if key in ("flags", "features"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return f"{platform.machine()} {platform.processor()}"


def _compiler_version(cxx: str) -> str:
    out = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=60)
    return out.stdout.strip() or out.stderr.strip()


def _library_path(name: str, source: bytes, cxx: str) -> Path:
    key = hashlib.sha256()
    for part in (
        source,
        _compiler_version(cxx).encode(),
        repr((BASE_FLAGS, VARIANTS)).encode(),
        _cpu_signature().encode(),
        platform.machine().encode(),
    ):
        key.update(part)
        key.update(b"\0")
    return cache_dir() / f"{name}-{key.hexdigest()[:20]}.so"


class BuildError(RuntimeError):
    """The kernel library could not be built (the message says why)."""


def _compile(cxx: str, source: Path, target: Path) -> None:
    """Build ``target`` from ``source`` atomically, trying the VARIANTS in turn."""
    target.parent.mkdir(parents=True, exist_ok=True)
    errors = []
    for variant in VARIANTS:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.stem}-", suffix=".tmp")
        os.close(fd)
        try:
            cmd = [cxx, *BASE_FLAGS, *variant, str(source), "-o", tmp]
            result = subprocess.run(cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT)
            if result.returncode == 0:
                os.replace(tmp, target)
                logger.info("built %s with %s", target, " ".join(variant))
                return
            last = (result.stderr.strip().splitlines() or ["(no output)"])[-1]
            errors.append(f"{' '.join(variant)}: {last}")
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    raise BuildError(f"{cxx} failed to compile {source.name}: {'; '.join(errors)}")


def build_library(source: Path) -> Path:
    """The shared library built from ``source`` for this machine, compiled if not cached.

    Raises BuildError (no compiler, compilation failed) or OSError.
    """
    cxx = find_compiler()
    if cxx is None:
        raise BuildError("no C++ compiler found (set CXX or install g++)")
    # The headers beside the source (shared by the kernels) are part of what is built.
    headers = b"".join(h.read_bytes() for h in sorted(source.parent.glob("*.h")))
    target = _library_path(source.stem, source.read_bytes() + headers, cxx)
    if target.exists():
        return target
    try:
        _compile(cxx, source, target)
    except PermissionError:
        # A read-only cache: build into a private temporary directory instead.
        target = Path(tempfile.mkdtemp(prefix="entityrl-kernels-")) / target.name
        _compile(cxx, source, target)
    return target


def _unavailable(reason: str, warn: bool = True) -> None:
    global unavailable_reason
    unavailable_reason = reason
    if warn:
        warnings.warn(
            f"entityrl C++ kernels unavailable, using torch instead: {reason}", stacklevel=3
        )
    else:
        logger.info("entityrl C++ kernels unavailable: %s", reason)


@functools.cache
def load_library(name: str = "attention") -> ctypes.CDLL | None:
    """Build (if needed) and load ``<name>.cpp`` of this directory; None if impossible."""
    global unavailable_reason
    if os.environ.get("ENTITYRL_NO_KERNELS", "") not in ("", "0"):
        _unavailable("disabled by ENTITYRL_NO_KERNELS", warn=False)
        return None
    try:
        lib = ctypes.CDLL(str(build_library(SOURCE_DIR / f"{name}.cpp")))
    except Exception as exc:  # never let the kernel break the caller
        reason = str(exc) if isinstance(exc, BuildError) else f"{type(exc).__name__}: {exc}"
        _unavailable(reason)
        return None
    unavailable_reason = None
    return lib


class LazyKernel(Generic[K]):
    """Library ``name`` (``<name>.cpp``), built and loaded on first use, and wrapped by
    ``bind``, which sets its entry points' ctypes signatures (and may return None where the
    library cannot serve this CPU). One per kernel module."""

    def __init__(self, name: str, bind: Callable[[ctypes.CDLL], K | None]) -> None:
        self.name = name
        self.bind = bind
        self._loaded = False
        self._kernel: K | None = None

    def get(self) -> K | None:
        """The bound kernel, or None where it cannot be used."""
        if _torch_path_only:
            return None
        if not self._loaded:
            lib = load_library(self.name)
            self._kernel = None if lib is None else self.bind(lib)
            self._loaded = True
        return self._kernel

    def available(self) -> bool:
        """Whether the compiled kernel can be used (built and loaded on the first call)."""
        return self.get() is not None

    def reset(self) -> None:
        """Forget the loaded library (the next call builds or loads it again); for tests."""
        load_library.cache_clear()
        self._kernel, self._loaded = None, False
