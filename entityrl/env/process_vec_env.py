"""Environments stepped in worker processes.

Each worker owns a contiguous block of environments and runs a :class:`SerialVecEnv` over it, so
what crosses the process boundary is one already-batched :class:`VecObs` per worker per step (a
few contiguous numpy arrays, cheap to pickle), never one object per environment or entity.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing as mp
import os
import pickle
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from entityrl.env.validator import EnvValidationError
from entityrl.env.vec_env import EnvFactory, SerialVecEnv, VecEnv, check_actions, split_rows
from entityrl.env.vec_obs import VecObs
from entityrl.ragged import RaggedArray

_POLL_SECONDS = 0.05
DEFAULT_ANSWER_TIMEOUT = 600.0
"""Seconds a worker may take to answer one request (a whole rollout where the policy runs in
the workers) before it is taken for stopped or stuck, killed, and reported."""
_PIPE_BYTES = 16 * 1024
"""Messages up to this size fit in an empty pipe's buffer (64 KiB on Linux; 16 KiB leaves room
for other systems): sending them never waits for the worker."""


def _send_bytes(conn: Connection, data: bytes, failed: list[BaseException]) -> None:
    try:
        conn.send_bytes(data)
    except BaseException as err:  # reported by the caller, in its own thread
        failed.append(err)


_PACKAGE = Path(__file__).resolve().parent.parent
_ENVIRONMENTS = _PACKAGE / "envs"


class EnvWorkerError(RuntimeError):
    """An environment worker raised an exception or died. The message's first line says
    which worker, doing what, and the exception; where the worker raised one, the frames of
    the environment's code that raised it follow."""


def _failure() -> tuple[str, str]:
    """The exception being handled in a worker, for the parent: ``Type: message`` and its
    frames from the environment's code on. The worker's own frames before it (the command
    loop, the sampler, the vectorized env) are entityrl's and would bury the environment's;
    only the last of them, the call into the environment, is kept. Where no frame is the
    environment's (an answer that cannot be pickled, a bug of entityrl's), all are kept."""
    err = sys.exc_info()[1]
    frames = traceback.extract_tb(err.__traceback__ if err is not None else None)
    own = [_is_workers(frame.filename) for frame in frames]
    start = own.index(False) - 1 if False in own else 0
    what = "".join(traceback.format_exception_only(err)).strip()
    return what, "".join(traceback.format_list(frames[max(start, 0) :])).rstrip("\n")


def _is_workers(filename: str) -> bool:
    """Whether code from ``filename`` is the worker's machinery: entityrl's, but not one of
    the environments it ships."""
    path = Path(filename).resolve()
    return path.is_relative_to(_PACKAGE) and not path.is_relative_to(_ENVIRONMENTS)


class WorkerEnvs:
    """One worker's share of the environments and its answers to the parent's requests, as
    ``(status, payload)`` with status ``ok``, ``invalid`` (the environment broke a rule: the
    message says all) or ``error`` (an exception: :func:`_failure`'s description). The same
    for a worker process (:func:`_worker`) and a Ray actor (:mod:`entityrl.env.ray_vec_env`).
    :attr:`started` is the answer to building the environments; ``envs`` is None if that
    failed. ``build`` makes the worker's vectorized environment, called as
    ``build(make_env, num_envs, seed, validate=..., seed_offset=...)``: a
    :class:`SerialVecEnv` by default (a
    :class:`~entityrl.env.multiplayer_vec.PlayerVecEnv` for games)."""

    def __init__(
        self,
        make_env: EnvFactory,
        num_envs: int,
        seed: int | None,
        seed_offset: int,
        validate: bool,
        wrap: Callable[[VecEnv], VecEnv] | None,
        build: Callable[..., VecEnv] = SerialVecEnv,
    ) -> None:
        self.envs: VecEnv | None = None
        try:
            envs: VecEnv = build(
                make_env, num_envs, seed, validate=validate, seed_offset=seed_offset
            )
            self.envs = envs if wrap is None else wrap(envs)
            self.started: tuple[str, Any] = (
                "ok",
                (self.envs.obs_space, self.envs.action_space),
            )
        except EnvValidationError as err:
            self.started = ("invalid", str(err))
            return
        except BaseException:
            self.started = ("error", _failure())
            return
        # The environments live as long as the worker: keep full collections from scanning them.
        gc.collect()
        gc.freeze()
        # What calls (ProcessVecEnv.call) keep in this worker between them.
        context: dict[str, Any] = {}
        envs = self.envs
        self._handlers: dict[str, Callable[[Any], Any]] = {
            "call": lambda payload: payload[0](envs, context, *payload[1]),
            "reset": lambda _: envs.reset(),
            "act": envs.act,
            "render": envs.render,
            "get_state": lambda allow_pickle: _state_or_reason(envs, allow_pickle),
            "set_state": lambda payload: envs.set_state(*payload),
        }

    def answer(self, command: str, payload: Any) -> tuple[str, Any]:
        try:
            return ("ok", self._handlers[command](payload))
        except EnvValidationError as err:
            # The environment broke a rule: the message says all; its traceback is entityrl's.
            return ("invalid", str(err))
        except BaseException:
            return ("error", _failure())

    def close(self) -> None:
        if self.envs is not None:
            self.envs.close()


def _worker(
    conn: Connection,
    make_env: EnvFactory,
    num_envs: int,
    seed: int | None,
    seed_offset: int,
    validate: bool,
    wrap: Callable[[VecEnv], VecEnv] | None,
    parents_ends: list[Connection],
    build: Callable[..., VecEnv] = SerialVecEnv,
) -> None:
    # Ctrl-C is the parent's to handle; a worker that dies of it would only add noise.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A forked worker inherits the parent's ends of the pipes; while it holds them, its own
    # pipe never reports the parent's death (EOF), and it would outlive a killed parent.
    for end in parents_ends:
        end.close()
    worker = WorkerEnvs(make_env, num_envs, seed, seed_offset, validate, wrap, build)
    reply = worker.started
    if worker.envs is None:
        _reply(conn, reply)
        return
    while _reply(conn, reply):
        try:
            command, payload = conn.recv()
        except (EOFError, OSError):
            return  # the parent went away
        except BaseException:  # a message this process cannot unpickle
            reply = ("error", _failure())
            continue
        if command == "close":
            worker.close()
            return
        reply = worker.answer(command, payload)


def _state_or_reason(envs: VecEnv, allow_pickle: bool) -> tuple[bool, Any]:
    """(True, the state) or (False, why it cannot be saved): an environment whose state is not
    plain data is not a failure of the worker."""
    try:
        return True, envs.get_state(allow_pickle)
    except NotImplementedError as err:
        return False, str(err)


def _reply(conn: Connection, message: tuple[str, Any]) -> bool:
    """Send ``message`` to the parent; False if the parent is gone."""
    try:
        conn.send(message)
    except OSError:
        return False
    except Exception:  # the answer cannot be pickled (send writes nothing before pickling)
        conn.send(("error", _failure()))
    return True


class ProcessVecEnv(VecEnv):
    """``num_envs`` environments split over ``num_workers`` processes (default: CPU count).

    Plays exactly the episodes a :class:`SerialVecEnv` with the same ``seed`` plays. An
    exception inside an environment is raised here as :class:`EnvWorkerError` carrying the
    environment's frames of the worker's traceback; a worker that dies is reported within a fraction of a second.
    A worker that stops answering (stopped, or stuck in a step) is killed and reported after
    ``answer_timeout`` seconds (None: waits for ever).
    ``wrap`` (picklable) wraps each worker's :class:`SerialVecEnv` in the worker, e.g. in a
    :class:`~entityrl.env.stacking.StackedVecEnv`, so that policies run in the workers (see
    ``ProcessVecEnv.call``) see the wrapped observations too. ``build`` (picklable) makes each
    worker's vectorized environment from its share (see :class:`WorkerEnvs`); the default,
    :class:`SerialVecEnv`, steps one environment per row.
    """

    def __init__(
        self,
        make_env: EnvFactory,
        num_envs: int,
        seed: int | None = None,
        *,
        num_workers: int | None = None,
        validate: bool = False,
        start_method: str | None = None,
        wrap: Callable[[VecEnv], VecEnv] | None = None,
        answer_timeout: float | None = DEFAULT_ANSWER_TIMEOUT,
        build: Callable[..., VecEnv] = SerialVecEnv,
    ) -> None:
        sizes = self._split(num_envs, num_workers or os.cpu_count() or 1, answer_timeout)
        method = start_method or ("fork" if "fork" in mp.get_all_start_methods() else "spawn")
        context = mp.get_context(method)
        self._conns: list[Connection] = []
        self._procs: list[Any] = []
        try:
            for k in range(len(sizes)):
                parent, child = context.Pipe()
                inherited = [*self._conns, parent] if method == "fork" else []
                proc = context.Process(
                    target=_worker,
                    args=(
                        child,
                        make_env,
                        int(sizes[k]),
                        seed,
                        self.bounds[k],
                        validate,
                        wrap,
                        inherited,
                        build,
                    ),
                    daemon=True,
                    name=f"entityrl-env-worker-{k}",
                )
                try:
                    proc.start()
                except (pickle.PicklingError, AttributeError, TypeError) as err:
                    raise TypeError(
                        f"ProcessVecEnv: starting workers by {method!r} needs a picklable "
                        "make_env (a module-level class or function, or a functools.partial "
                        f"of one), got {make_env!r}: {err}"
                    ) from err
                child.close()
                self._conns.append(parent)
                self._procs.append(proc)
            spaces = self._gather("building its environments")
        except BaseException:
            self.close()  # no worker outlives a failed start
            raise
        self.obs_space, self.action_space = spaces[0]

    def _split(self, num_envs: int, num_workers: int, answer_timeout: float | None) -> list[int]:
        """Check the arguments shared by the kinds of workers, set up the state they share,
        and return how many environments each worker steps."""
        if answer_timeout is not None and not answer_timeout > 0:
            raise ValueError(f"answer_timeout must be > 0 seconds (or None), got {answer_timeout}")
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {num_workers}")
        workers = min(num_envs, num_workers)
        self.answer_timeout = answer_timeout
        self.num_envs = num_envs
        sizes = np.full(workers, num_envs // workers)
        sizes[: num_envs % workers] += 1
        self.bounds: list[int] = [0, *np.cumsum(sizes).tolist()]
        self._last: VecObs | None = None
        # What the workers are doing between start_call and finish_call.
        self._in_flight: str | None = None
        self._closed = False
        return sizes.tolist()

    # ------------------------------------------------------------------ protocol
    # How messages name a worker and what it holds.
    _WORKER = ("environment worker", "environments")

    def _shares(self) -> list[int]:
        """Where each worker's share starts, in the units :attr:`_WORKER` names (and the end)."""
        return self.bounds

    def _describe(self, k: int) -> str:
        worker, units = self._WORKER
        bounds = self._shares()
        return f"{worker} {k} ({units} {bounds[k]}..{bounds[k + 1] - 1})"

    def _receive(self, k: int, doing: str, *, fatal: bool = True) -> Any:
        """Worker ``k``'s answer. An exception in the worker closes this ProcessVecEnv (its
        environments may be half-stepped) unless ``fatal`` is False (a read-only request)."""
        conn, proc = self._conns[k], self._procs[k]
        try:
            # A dead worker's end of the pipe closes and recv() raises; polling the process
            # as well guarantees an answer even if something else kept that end open.
            timeout = self.answer_timeout
            deadline = None if timeout is None else time.monotonic() + timeout
            while not conn.poll(_POLL_SECONDS):
                if not proc.is_alive() and not conn.poll():
                    raise EOFError
                if deadline is not None and time.monotonic() > deadline:
                    self._stuck(k, f"did not answer within {timeout:g} s while {doing}")
            status, payload = conn.recv()
        except (EOFError, OSError):
            proc.join(timeout=1.0)  # it is gone or going: learn how it ended
            reason = _exit_reason(proc.exitcode)
            self.close()
            raise EnvWorkerError(
                f"{self._describe(k)} died unexpectedly while {doing} ({reason})"
            ) from None
        return self._unpack(k, doing, status, payload, fatal)

    def _unpack(self, k: int, doing: str, status: str, payload: Any, fatal: bool) -> Any:
        """The payload of worker ``k``'s answer (see :class:`WorkerEnvs`), or its failure
        raised (closing this vec env first where ``fatal``)."""
        if status != "ok" and fatal:
            self.close()
        if status == "invalid":
            raise EnvValidationError(payload)
        if status == "error":
            what, frames = payload
            raise EnvWorkerError(
                f"{self._describe(k)} raised an exception while {doing}: {what}\n{frames}"
            )
        return payload

    def _gather(self, doing: str) -> list[Any]:
        return [self._receive(k, doing) for k in range(self.num_workers)]

    def _send(self, k: int, message: tuple[str, Any]) -> None:
        data = ForkingPickler.dumps(message)
        try:
            if len(data) <= _PIPE_BYTES or self.answer_timeout is None:
                # Requests alternate with answers, so the pipe is empty: this never blocks.
                self._conns[k].send_bytes(data)
                return
            # A larger message (a policy's parameters) fills the pipe and waits for the
            # worker to read: bounded, in a thread, so that a stuck worker cannot hold us.
            failed: list[BaseException] = []
            sender = threading.Thread(
                target=_send_bytes, args=(self._conns[k], data, failed), daemon=True
            )
            sender.start()
            sender.join(self.answer_timeout)
            if sender.is_alive():
                self._stuck(k, f"did not read a message within {self.answer_timeout:g} s")
            if failed:
                raise failed[0]
        except (BrokenPipeError, OSError) as err:
            self.close()
            raise EnvWorkerError(f"{self._describe(k)} is gone: {err}") from err

    def _stuck(self, k: int, what: str) -> NoReturn:
        """Kill worker ``k``, which stopped answering, and say so."""
        self._procs[k].kill()  # SIGKILL: a stopped process cannot ignore it
        self.close()
        raise EnvWorkerError(
            f"{self._describe(k)} {what} (stopped or stuck; it was killed). Slower environments "
            "need a larger answer_timeout"
        )

    def _ensure_open(self) -> None:
        if self._closed:
            raise EnvWorkerError(
                f"this {type(self).__name__} is closed (by close() or after a worker failed); "
                "create a new one"
            )
        if self._in_flight is not None:
            raise RuntimeError(
                f"the workers are still {self._in_flight} (start_call): call finish_call "
                "before asking them anything else"
            )

    # ------------------------------------------------------------------ VecEnv
    def reset(self) -> VecObs:
        self._ensure_open()
        for k in range(self.num_workers):
            self._send(k, ("reset", None))
        self._last = VecObs.concat(self._gather("resetting"), self.choices)
        return self._last

    def act(self, actions: Mapping[str, RaggedArray]) -> VecObs:
        self._ensure_open()
        if self._last is None:
            raise RuntimeError("call reset() (or assemble() after a call) before act()")
        check_actions(actions, self._last, self.action_space)
        for k, part in enumerate(split_rows(actions, self.bounds)):
            self._send(k, ("act", part))
        self._last = VecObs.concat(self._gather("stepping"), self.choices)
        return self._last

    def call(self, fn: Callable[..., Any], args: Sequence[tuple[Any, ...]]) -> list[Any]:
        """``fn(envs, context, *args[k])`` run in every worker ``k``, where ``envs`` is the
        worker's :class:`SerialVecEnv` (as ``wrap`` wrapped it) and ``context`` a dict the worker keeps between calls;
        returns the results in worker order. ``fn`` must be picklable (a module-level
        function). When ``fn`` steps the environments, pass their latest observations to
        :meth:`assemble` before stepping them from here again."""
        self.start_call(fn, args)
        return self.finish_call()

    def start_call(self, fn: Callable[..., Any], args: Sequence[tuple[Any, ...]]) -> None:
        """The first half of :meth:`call`: send the request and return at once, while the
        workers run ``fn``; :meth:`finish_call` waits for their results. Nothing else may be
        asked of the workers in between."""
        self._ensure_open()
        if len(args) != self.num_workers:
            raise ValueError(
                f"call: expected one argument tuple per worker ({self.num_workers}), "
                f"got {len(args)}"
            )
        for k, part in enumerate(args):
            self._send(k, ("call", (fn, part)))
        self._last = None  # until assembled: the workers may have stepped
        self._in_flight = f"running {getattr(fn, '__name__', fn)!r}"

    def finish_call(self) -> list[Any]:
        """The results of the call :meth:`start_call` started, in worker order."""
        if self._in_flight is None:
            raise RuntimeError("finish_call: no call is running (start_call starts one)")
        doing, self._in_flight = self._in_flight, None
        return self._gather(doing)

    @property
    def num_workers(self) -> int:
        return len(self._conns)

    def assemble(self, parts: list[VecObs]) -> VecObs:
        """Adopt one latest observation per worker (from :meth:`call`) as the batch's current
        one."""
        if len(parts) != self.num_workers:
            raise ValueError(
                f"assemble: expected one observation per worker ({self.num_workers}), "
                f"got {len(parts)}"
            )
        self._last = VecObs.concat(parts, self.choices)
        return self._last

    def render(self, index: int = 0) -> str:
        self._ensure_open()
        if not 0 <= index < self.num_envs:
            raise IndexError(f"environment {index} out of range for {self.num_envs} environments")
        k = int(np.searchsorted(self.bounds, index, side="right")) - 1
        self._send(k, ("render", index - self.bounds[k]))
        return self._receive(k, "rendering", fatal=False)

    def get_state(self, allow_pickle: bool = False) -> Any:
        self._ensure_open()
        for k in range(self.num_workers):
            self._send(k, ("get_state", allow_pickle))
        answers = self._gather("saving state")
        for saved, why in answers:
            if not saved:
                raise NotImplementedError(why)
        return [state for _, state in answers]

    def set_state(self, state: Any, allow_pickle: bool = False) -> VecObs:
        self._ensure_open()
        if not isinstance(state, list) or len(state) != self.num_workers:
            got = f"{len(state)} worker parts" if isinstance(state, list) else type(state).__name__
            raise ValueError(
                f"the saved state has {got}; this {type(self).__name__} has {self.num_workers} "
                "workers"
            )
        for k, part in enumerate(state):
            self._send(k, ("set_state", (part, allow_pickle)))
        self._last = VecObs.concat(self._gather("restoring state"), self.choices)
        return self._last

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for conn, proc in zip(self._conns, self._procs, strict=True):
            if proc.is_alive():
                with contextlib.suppress(BrokenPipeError, OSError):
                    conn.send(("close", None))
        for conn, proc in zip(self._conns, self._procs, strict=True):
            proc.join(timeout=1.0)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=1.0)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=1.0)  # not longer: a process in uninterruptible I/O lingers
            conn.close()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            self.close()

    @property
    def pids(self) -> list[int]:
        """Process ids of the workers (for monitoring and tests)."""
        return [p.pid for p in self._procs]


def _exit_reason(exitcode: int | None) -> str:
    if exitcode is None:
        return "it closed its connection but is still running"
    if exitcode < 0:
        return f"killed by signal {signal.Signals(-exitcode).name}"
    return f"exit code {exitcode}"
