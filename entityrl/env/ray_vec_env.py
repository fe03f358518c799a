"""Environments stepped by Ray actors, on any machine of a Ray cluster (``rollout.backend=ray``).

:class:`RayVecEnv` is a :class:`~entityrl.env.process_vec_env.ProcessVecEnv` whose workers are
Ray actors instead of local processes: each actor holds the same
:class:`~entityrl.env.process_vec_env.WorkerEnvs` a worker process holds and answers the same
requests, so the samplers (synchronous and asynchronous) use it unchanged. Ray carries the
requests and answers; every wait for an answer is bounded, and an actor that dies (or whose
node is lost) is reported in one line naming the worker and its node.

Ray is an optional dependency: ``pip install 'entityrl[ray]'``.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable
from typing import Any, NoReturn

from entityrl.env.process_vec_env import (
    DEFAULT_ANSWER_TIMEOUT,
    EnvWorkerError,
    ProcessVecEnv,
    WorkerEnvs,
)
from entityrl.env.vec_env import EnvFactory, SerialVecEnv, VecEnv

_CLOSE_SECONDS = 5.0
"""How long closing waits for an actor to close its environments before killing it."""
_CONNECT_SECONDS = 10.0
"""How long joining a cluster waits for its head's address to accept a connection."""


def _ray() -> Any:
    try:
        import ray
    except ImportError as err:
        raise ImportError(
            "rollout.backend=ray needs the ray package: pip install 'entityrl[ray]'"
        ) from err
    return ray


def connect(address: str | None, workers: int) -> None:
    """Connect this process to Ray, unless it is connected: to the cluster at ``address``
    (host:port of its head, or ``auto``), else at the RAY_ADDRESS environment variable, else
    to a Ray instance started on this machine, offering at least one CPU per worker (as many
    local worker processes would share its cores)."""
    ray = _ray()
    if ray.is_initialized():
        return
    source = "rollout.ray_address" if address else "RAY_ADDRESS"
    address = address or os.environ.get("RAY_ADDRESS")
    if address:
        try:
            _reachable(address)
            ray.init(address=address, include_dashboard=False)
        except (ConnectionError, ValueError) as err:
            raise ConnectionError(
                f"{source}: no Ray cluster could be joined at {address!r} (expected "
                f"host:port of a running head node, or auto): {err}"
            ) from err
    else:
        ray.init(
            address="local", num_cpus=max(workers, os.cpu_count() or 1), include_dashboard=False
        )


def _reachable(address: str) -> None:
    """Raise ConnectionError unless something listens at ``address`` (host:port; ``auto`` and
    ``ray://`` addresses are Ray's to resolve): Ray itself retries an address where nothing
    answers for minutes."""
    host, _, port = address.rpartition(":")
    if address == "auto" or "://" in address or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=_CONNECT_SECONDS).close()
    except OSError as err:
        raise ConnectionError(
            f"nothing answers there within {_CONNECT_SECONDS:g} s ({err})"
        ) from err


class _EnvActor:
    """A worker's environments in a Ray actor (made remote by :class:`RayVecEnv`)."""

    def __init__(
        self,
        make_env: EnvFactory,
        num_envs: int,
        seed: int | None,
        seed_offset: int,
        validate: bool,
        wrap: Callable[[VecEnv], VecEnv] | None,
        build: Callable[..., VecEnv],
    ) -> None:
        self.worker = WorkerEnvs(make_env, num_envs, seed, seed_offset, validate, wrap, build)

    def started(self) -> tuple[tuple[str, Any], str, int]:
        """The answer to building the environments, the node this actor runs on and its pid."""
        ray = _ray()
        node = f"{ray.util.get_node_ip_address()} ({ray.get_runtime_context().get_node_id()[:8]})"
        return self.worker.started, node, os.getpid()

    def answer(self, command: str, payload: Any) -> tuple[str, Any]:
        return self.worker.answer(command, payload)

    def close(self) -> None:
        self.worker.close()


class RayVecEnv(ProcessVecEnv):
    """``num_envs`` environments split over ``num_workers`` Ray actors (one CPU each), spread
    over the nodes of the Ray cluster this process is connected to (see :func:`connect`).

    Plays exactly the episodes a :class:`~entityrl.env.vec_env.SerialVecEnv` with the same
    ``seed`` plays, like a ProcessVecEnv. The make_env and wrap callables travel to the actors
    pickled: on other machines their modules (entityrl, your environment's) must be
    installed. An actor that does not start or answer within ``answer_timeout`` seconds is
    killed and reported; one that dies is reported at once.
    """

    def __init__(
        self,
        make_env: EnvFactory,
        num_envs: int,
        seed: int | None = None,
        *,
        num_workers: int,
        validate: bool = False,
        wrap: Callable[[VecEnv], VecEnv] | None = None,
        answer_timeout: float | None = DEFAULT_ANSWER_TIMEOUT,
        address: str | None = None,
        build: Callable[..., VecEnv] = SerialVecEnv,
    ) -> None:
        sizes = self._split(num_envs, num_workers, answer_timeout)
        self._actors: list[Any] = []
        connect(address, len(sizes))
        ray = _ray()
        actor = ray.remote(num_cpus=1, scheduling_strategy="SPREAD", max_restarts=0)(_EnvActor)
        self._actors = [
            actor.remote(make_env, size, seed, self.bounds[k], validate, wrap, build)
            for k, size in enumerate(sizes)
        ]
        self._nodes: list[str | None] = [None] * len(sizes)
        self._pids: list[int] = []
        self._pending: list[Any] = [actor.started.remote() for actor in self._actors]
        try:
            spaces = self._gather("building its environments")
        except BaseException:
            self.close()  # no actor outlives a failed start
            raise
        self.obs_space, self.action_space = spaces[0]

    @property
    def num_workers(self) -> int:
        return len(self._actors)

    @property
    def pids(self) -> list[int]:
        """Process ids of the actors, on their nodes (for monitoring and tests)."""
        return list(self._pids)

    @property
    def nodes(self) -> list[str | None]:
        """Per worker, the node its actor runs on: IP address (and the start of the node id);
        None until the actor has started."""
        return list(self._nodes)

    def _describe(self, k: int) -> str:
        where = (
            "not started on any node yet" if self._nodes[k] is None else f"on node {self._nodes[k]}"
        )
        return f"{super()._describe(k)} {where}"

    def _send(self, k: int, message: tuple[str, Any]) -> None:
        self._pending[k] = self._actors[k].answer.remote(*message)

    def _receive(self, k: int, doing: str, *, fatal: bool = True) -> Any:
        ray = _ray()
        try:
            status, payload = self._answer(
                k, ray.get(self._pending[k], timeout=self.answer_timeout)
            )
        except ray.exceptions.GetTimeoutError:
            self._stuck(k, f"did not answer within {self.answer_timeout:g} s while {doing}")
        except ray.exceptions.RayActorError as err:
            self.close()
            raise EnvWorkerError(
                f"{self._describe(k)} died unexpectedly while {doing} ({_cause(err)})"
            ) from None
        return self._unpack(k, doing, status, payload, fatal)

    def _answer(self, k: int, reply: Any) -> tuple[str, Any]:
        """An actor's reply as ``(status, payload)``: the answer to its start also tells its
        node and pid."""
        if self._nodes[k] is not None:
            return reply
        started, self._nodes[k], pid = reply
        self._pids.append(pid)
        return started

    def _stuck(self, k: int, what: str) -> NoReturn:
        _ray().kill(self._actors[k])
        self.close()
        raise EnvWorkerError(
            f"{self._describe(k)} {what} (stopped or stuck, or the cluster has no free CPU "
            "for it; it was killed). Slower environments need a larger answer_timeout "
            "(rollout.worker_timeout)"
        )

    def close(self) -> None:
        if getattr(self, "_closed", True):
            return
        self._closed = True
        ray = _ray()
        if not ray.is_initialized():  # disconnected (at exit): the actors went with it
            return
        closing = [actor.close.remote() for actor in self._actors]
        with contextlib.suppress(Exception):  # dead or stuck actors are killed below
            ray.wait(closing, num_returns=len(closing), timeout=_CLOSE_SECONDS)
        for actor in self._actors:
            ray.kill(actor)


def _cause(err: BaseException) -> str:
    """Ray's first sentence on why an actor is gone (its message runs over many lines)."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    because = [line for line in lines if "because" in line]
    return (because or lines or [type(err).__name__])[0].split(". ")[0]
