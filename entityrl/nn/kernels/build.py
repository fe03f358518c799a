"""Compile the C++ kernels once per machine and load them with ctypes.

The kernels are plain C++ (no torch headers, which would make every compile take about a
minute) built with the system compiler, GCC or clang, for the CPU at hand (``-march=native``),
so the shared library cannot ship with the package: it is built on first use and cached. The
cached file's name carries a hash of the source and of the headers beside it, the compiler's
version, the flags and the CPU's feature flags, so editing the source, changing compiler or
moving the cache to another kind of machine builds a new library instead of loading a stale or
illegal one. Several processes may build at once (``pytest -n 2``, data-parallel ranks): each
compiles to its own temporary file and renames it into place atomically, so a reader only ever
sees a complete library. A build killed midway (Ctrl-C during the first run) leaves its
temporary file behind; the next build removes such leftovers (see
:func:`remove_stale_temp_files`).

The first kernel asked for starts the builds of all of them, side by side on their own
threads (each compile is a compiler process), and waits only for its own: the first use pays
about the longest compile (attention.cpp) rather than the sum. Builds start only where a
kernel is asked for, that is for tensors on the CPU: a network on a GPU compiles nothing.
The first compile of a process is announced (:data:`announce`), as it keeps a first run busy
for half a minute or more before anything else happens.

The flags: the first set of :data:`TARGETS` x :data:`THREADING` the compiler accepts, tried
on a one-line source, so a compiler without OpenMP (Apple's clang) or without
``-march=native`` costs a probe, not a failed kernel build. A kernel that fails to compile
fails once: a marker file beside where the library would be (same key) keeps the compiler's
first error line, and later runs read it instead of compiling again (delete it, or change
compiler, flags or source, to try again).

Nothing here raises: when no compiler is found or compilation fails, :func:`load_library`
returns None, and one warning per process says why (the compiler and its first error line).
``ENTITYRL_NO_KERNELS=1`` disables the kernels; ``ENTITYRL_KERNEL_CACHE`` overrides the cache
directory (default ``~/.cache/entityrl/kernels``); ``CXX`` chooses the compiler (default
``g++``, then ``c++``, then ``clang++``); ``ENTITYRL_KERNEL_ARCH`` replaces ``-march=native``
by other target flags (``-march=x86-64-v3`` builds for AVX2 machines, for instance).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import logging
import os
import platform
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import Future, wait
from pathlib import Path
from typing import Generic, NamedTuple, TypeVar

logger = logging.getLogger(__name__)

K = TypeVar("K")

SOURCE_DIR = Path(__file__).resolve().parent
BASE_FLAGS = ["-O3", "-std=c++17", "-fPIC", "-shared", "-ffp-contract=fast", "-fno-math-errno"]
# The target flags and the threading flags, tried in order (every target with the first
# threading flag, then with the next): the first pair the compiler accepts wins. OpenMP gives
# the kernel a warm thread pool; with GCC it is shared with torch's (torch loads its own
# libgomp.so.1 first and the kernel's reference to that soname resolves to it), clang's
# -fopenmp needs its own runtime (libomp). Without OpenMP the kernel starts threads per call.
TARGETS = [
    ["-march=native"],
    ["-mcpu=native"],  # compilers that know only -mcpu=native (some for Arm)
    [],
]
THREADING = [["-fopenmp"], ["-pthread"]]
PROBE_SOURCE = """
#ifdef _OPENMP
#include <omp.h>
int entityrl_probe() { return omp_get_max_threads(); }
#else
int entityrl_probe() { return 1; }
#endif
"""
COMPILE_TIMEOUT = 900.0  # wall time: a machine shared by many jobs compiles slowly
STALE_TEMP_AGE = 3600.0
"""Seconds after which a temporary file in the cache is a leftover whoever wrote it: no build
runs that long (the compiler is stopped after :data:`COMPILE_TIMEOUT`)."""
# The owner in a temporary file's name, ``.<stem>-<pid>@<host>-<random>.tmp`` (mkstemp's
# random part has no "-"); see _temp_file.
_TEMP_OWNER = re.compile(r"-(\d+)@(.*)-[a-z0-9_]+\.tmp\Z")

announce: Callable[[str], None] | None = None
"""Called, once per process, with a line saying that the kernels are being built, when the
first compile starts (the ``entityrl`` commands print it); None: the line is only logged."""

# Why the kernels are unavailable (None when they are, or before the first attempt).
unavailable_reason: str | None = None
# Inside torch_path(): every kernel reports itself unavailable.
_torch_path_only = False
# Whether this process has announced a build (it does once).
_announced = False


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


def flag_sets() -> list[list[str]]:
    """The flag sets to try, best first (``ENTITYRL_KERNEL_ARCH`` replaces the targets)."""
    arch = os.environ.get("ENTITYRL_KERNEL_ARCH", "").split()
    targets = [arch] if arch else TARGETS
    return [[*target, *threading_] for threading_ in THREADING for target in targets]


class Settings(NamedTuple):
    """What a build depends on besides the source, read from the environment once (builds
    may run on other threads while the environment changes)."""

    cxx: str | None
    directory: Path
    flag_sets: tuple[tuple[str, ...], ...]

    @classmethod
    def current(cls) -> Settings:
        return cls(find_compiler(), cache_dir(), tuple(tuple(f) for f in flag_sets()))


def _library_path(name: str, source: bytes, cxx: str, settings: Settings) -> Path:
    key = hashlib.sha256()
    for part in (
        source,
        _compiler_version(cxx).encode(),
        repr((BASE_FLAGS, [list(f) for f in settings.flag_sets])).encode(),
        _cpu_signature().encode(),
        platform.machine().encode(),
    ):
        key.update(part)
        key.update(b"\0")
    return settings.directory / f"{name}-{key.hexdigest()[:20]}.so"


class BuildError(RuntimeError):
    """The kernel library could not be built (the message says why)."""


def first_error(output: str) -> str:
    """The line of a compiler's output that says what went wrong first."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if "error:" in line]  # GCC's and clang's "...: error: ..."
    return (errors or lines or ["(no output)"])[0]


def _run_compiler(cxx: str, flags: list[str], source: Path, output: str) -> str | None:
    """Compiles ``source`` into ``output``; None on success, else the first error line."""
    cmd = [cxx, *BASE_FLAGS, *flags, str(source), "-o", output]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT)
    return None if result.returncode == 0 else first_error(result.stderr + result.stdout)


_probe_lock = threading.Lock()


@functools.cache
def _probe(cxx: str, candidates: tuple[tuple[str, ...], ...]) -> list[str] | str:
    """The first flag set ``cxx`` compiles and links a one-line source with, or (none does)
    the first error line of the first set."""
    errors = []
    with tempfile.TemporaryDirectory(prefix="entityrl-probe-") as tmp:
        source = Path(tmp) / "probe.cpp"
        source.write_text(PROBE_SOURCE)
        for flags in candidates:
            error = _run_compiler(cxx, list(flags), source, str(Path(tmp) / "probe.so"))
            if error is None:
                return list(flags)
            errors.append(error)
    return errors[0]


def _compile(cxx: str, source: Path, target: Path, candidates: tuple[tuple[str, ...], ...]) -> None:
    """Build ``target`` from ``source`` atomically with the first flag set the compiler
    accepts. A failure leaves a marker (see :func:`failure_marker`) holding the error."""
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temp_files(target.parent)
    with _probe_lock:  # the builds started together probe once
        flags = _probe(cxx, candidates)
    if isinstance(flags, str):
        message = f"{cxx} accepts none of the flag sets {candidates}: {flags}"
    else:
        tmp = _temp_file(target.parent, target.stem)
        _announce(target.parent)  # (where it is built: a read-only cache fails just above)
        try:
            error = _run_compiler(cxx, flags, source, tmp)
            if error is None:
                os.replace(tmp, target)
                logger.info("built %s with %s %s", target, cxx, " ".join(flags))
                return
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        message = f"{cxx} failed to compile {source.name} ({' '.join(flags)}): {error}"
    with contextlib.suppress(OSError):  # not remembered where the cache is read-only
        _write_atomically(failure_marker(target), message + "\n")
    raise BuildError(message)


def failure_marker(target: Path) -> Path:
    """Where the failure to build ``target`` is remembered."""
    return target.with_suffix(".failed")


def _write_atomically(path: Path, text: str) -> None:
    tmp = _temp_file(path.parent, path.stem)
    try:
        Path(tmp).write_text(text)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


def _temp_file(directory: Path, stem: str) -> str:
    """A new empty file in ``directory`` for a build to write and rename into place, named
    ``.<stem>-<pid>@<host>-<random>.tmp`` after the process writing it: a later build tells the
    leftover of a killed one from one being written (:func:`remove_stale_temp_files`)."""
    owner = f"{os.getpid()}@{socket.gethostname()}"
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{stem}-{owner}-", suffix=".tmp")
    os.close(fd)
    return tmp


def remove_stale_temp_files(directory: Path) -> None:
    """Remove the temporary files (``.*.tmp``) that killed builds left in ``directory``: those
    of a process of this machine that is gone, and any older than :data:`STALE_TEMP_AGE` (of
    another machine sharing the cache, or named as earlier versions named them). Files that
    cannot be removed (a read-only cache) are left."""
    host, now = socket.gethostname(), time.time()
    for path in directory.glob(".*.tmp"):
        owner = _TEMP_OWNER.search(path.name)
        gone = owner is not None and owner[2] == host and not _alive(int(owner[1]))
        with contextlib.suppress(OSError):  # renamed by its build meanwhile, or read-only
            if gone or now - path.stat().st_mtime > STALE_TEMP_AGE:
                path.unlink()
                logger.info("removed %s, left by a build that did not finish", path)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` of this machine exists."""
    try:
        os.kill(pid, 0)  # signal 0: only checks that the process exists
    except ProcessLookupError:
        return False
    except OSError:  # another user's process (PermissionError): it exists
        return True
    return True


def _announce(directory: Path) -> None:
    """Say, once per process, that the kernels are being built (see :data:`announce`)."""
    global _announced
    with _builds_lock:
        if _announced:
            return
        _announced = True
    line = f"building the C++ kernels for this CPU, once (about half a minute; into {directory})"
    logger.info(line)
    if announce is not None:
        announce(line)


def build_library(source: Path, settings: Settings | None = None) -> Path:
    """The shared library built from ``source`` for this machine, compiled if not cached
    (``settings``: those of the environment now by default).

    Raises BuildError (no compiler, compilation failed now or in an earlier run) or OSError.
    """
    settings = settings or Settings.current()
    cxx = settings.cxx
    if cxx is None:
        raise BuildError("no C++ compiler found (set CXX or install g++)")
    # The headers beside the source (shared by the kernels) are part of what is built.
    headers = b"".join(h.read_bytes() for h in sorted(source.parent.glob("*.h")))
    target = _library_path(source.stem, source.read_bytes() + headers, cxx, settings)
    if target.exists():
        return target
    marker = failure_marker(target)
    if marker.exists():
        reason = marker.read_text().strip()
        raise BuildError(f"{reason} (in an earlier run; delete {marker} to try again)")
    try:
        _compile(cxx, source, target, settings.flag_sets)
    except PermissionError:
        # A read-only cache: build into a private temporary directory instead.
        target = Path(tempfile.mkdtemp(prefix="entityrl-kernels-")) / target.name
        _compile(cxx, source, target, settings.flag_sets)
    return target


# Builds under way or done, by kernel name (see start_builds).
_builds: dict[str, Future[Path]] = {}
_builds_lock = threading.Lock()
# Whether this process has warned that a kernel is unavailable (it warns once).
_warned = False


def start_builds(names: list[str]) -> None:
    """Starts building the named kernels (those not started yet), each on its own daemon
    thread: a process that ends before a build does not wait for it."""
    settings = Settings.current()
    with _builds_lock:
        for name in names:
            if name in _builds:
                continue
            future: Future[Path] = Future()
            _builds[name] = future

            def run(name: str = name, future: Future[Path] = future) -> None:
                try:
                    future.set_result(build_library(SOURCE_DIR / f"{name}.cpp", settings))
                except BaseException as exc:  # handed to whoever waits for the library
                    future.set_exception(exc)

            threading.Thread(target=run, name=f"entityrl-build-{name}", daemon=True).start()


def _unavailable(reason: str, warn: bool = True) -> None:
    global unavailable_reason, _warned
    unavailable_reason = reason
    if warn and not _warned:
        _warned = True
        warnings.warn(
            f"entityrl C++ kernels unavailable, using torch instead: {reason}", stacklevel=3
        )
    else:
        logger.info("entityrl C++ kernels unavailable: %s", reason)


@functools.cache
def load_library(name: str = "attention") -> ctypes.CDLL | None:
    """Build (if needed) and load ``<name>.cpp`` of this directory; None if impossible. The
    other kernels' builds start alongside (see :func:`start_builds`)."""
    global unavailable_reason
    if os.environ.get("ENTITYRL_NO_KERNELS", "") not in ("", "0"):
        _unavailable("disabled by ENTITYRL_NO_KERNELS", warn=False)
        return None
    start_builds([name, *(kernel.name for kernel in _KERNELS)])
    try:
        lib = ctypes.CDLL(str(_builds[name].result()))
    except Exception as exc:  # never let the kernel break the caller
        reason = str(exc) if isinstance(exc, BuildError) else f"{type(exc).__name__}: {exc}"
        _unavailable(reason)
        return None
    unavailable_reason = None
    return lib


def wait_for_builds() -> None:
    """Wait until every build started has finished (built or failed); for tests, whose
    next step must not race a build still writing into the cache."""
    with _builds_lock:
        futures = list(_builds.values())
    wait(futures)


def forget_builds() -> None:
    """Forget every library loaded or built and the warning given, so that the next use
    builds or loads again (in the environment of then); for tests. Builds under way are
    waited for, so that none writes into a cache a later test has moved."""
    global _warned, _announced
    wait_for_builds()
    load_library.cache_clear()
    _probe.cache_clear()
    with _builds_lock:
        _builds.clear()
    _warned = _announced = False


class LazyKernel(Generic[K]):
    """Library ``name`` (``<name>.cpp``), built and loaded on first use, and wrapped by
    ``bind``, which sets its entry points' ctypes signatures (and may return None where the
    library cannot serve this CPU). One per kernel module."""

    def __init__(self, name: str, bind: Callable[[ctypes.CDLL], K | None]) -> None:
        self.name = name
        self.bind = bind
        self._loaded = False
        self._kernel: K | None = None
        _KERNELS.append(self)

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
        forget_builds()
        self._kernel, self._loaded = None, False


# Every kernel module's LazyKernel, whose builds the first use starts together.
_KERNELS: list[LazyKernel] = []
