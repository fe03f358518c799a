"""Data-parallel training: several processes, each with its own share of the environments,
taking identical optimizer steps (rlpyt's ``world_size`` / ``rank``).

Two ways to start them:

- ``world_size=N`` on one machine: the calling process is rank 0 and starts ranks 1..N-1 with
  the ``spawn`` method; they meet on a free port of 127.0.0.1.
- A launcher, such as ``torchrun --nnodes=2 --nproc-per-node=4 -m entityrl train ...``: every
  process it starts reads its rank, the world size and the master's address from the
  environment (torch.distributed's ``env://``), so a run spans machines.

Rank 0 shows the progress bar, writes logs and checkpoints. Every minibatch the processes sum
their gradients and a few counts (gloo on the CPU, NCCL on CUDA), so all of them hold the same
parameters throughout. A process that dies or stops answering makes the others stop with
:class:`PeerLostError` (at once for a closed connection, after ``distributed_timeout``
seconds for a silent peer) instead of hanging; with ``world_size=N``, rank 0 then ends the
others (SIGTERM, then SIGKILL, a few seconds apart) and its error names the ones that failed
or stopped answering.
"""

from __future__ import annotations

import dataclasses
import datetime
import multiprocessing as mp
import os
import re
import signal
import socket
import time
from collections.abc import Callable, Sequence
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import numpy.typing as npt
import torch
import torch.distributed as dist

from entityrl.algorithms.common.reduce import Reducer
from entityrl.nn.device import resolve_device

if TYPE_CHECKING:
    from entityrl.training.callbacks import Callback
    from entityrl.training.config import TrainConfig
    from entityrl.training.runner import EnvSource, TrainResult

T = TypeVar("T")

# What a launcher sets for torch.distributed's env:// rendezvous.
LAUNCHER_VARIABLES = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


class PeerLostError(RuntimeError):
    """A collective failed: another training process died or did not answer in time."""


class ProcessGroupReducer(Reducer):
    """Sums and gathers over the processes of the default process group."""

    def __init__(self, device: torch.device, timeout: float) -> None:
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()
        # NCCL only moves tensors that live on the GPU; gloo takes CPU tensors.
        self.device = device if dist.get_backend() == "nccl" else torch.device("cpu")
        self.timeout = timeout

    def sum(self, values: npt.ArrayLike) -> npt.NDArray[np.float64]:
        tensor = torch.as_tensor(np.asarray(values, dtype=np.float64), device=self.device).clone()
        self._collective("a sum of statistics", dist.all_reduce, tensor)
        return tensor.cpu().numpy()

    def sum_in_place(self, tensor: torch.Tensor) -> None:
        self._collective("the gradient sum", dist.all_reduce, tensor)

    def gather(self, value: Any) -> list[Any]:
        gathered: list[Any] = [None] * self.world_size
        self._collective("a gather", dist.all_gather_object, gathered, value)
        return gathered

    def _collective(self, what: str, op: Callable[..., T], *args: Any) -> T:
        try:
            return op(*args)
        except RuntimeError as err:  # gloo's and NCCL's errors (DistBackendError included)
            raise PeerLostError(
                f"training process {self.rank} of {self.world_size} lost the others during "
                f"{what} ({_gist(err)}): one of them died or did not answer within "
                f"distributed_timeout={self.timeout:g} s; see its own output for why"
            ) from err


def _gist(err: Exception) -> str:
    """The first sentence of a backend's error, without the source location it starts with
    ("[.../gloo/transport/tcp/pair.cc:553] Connection closed by peer ...")."""
    text = str(err).strip() or type(err).__name__
    text = re.sub(r"^\[[^\]]*\]\s*", "", text.splitlines()[0])
    return text.split(". ")[0].rstrip(".")


def launched() -> bool:
    """Whether a launcher (torchrun, or any that sets torch.distributed's ``env://``
    variables) started this process as one rank of several."""
    return all(name in os.environ for name in LAUNCHER_VARIABLES) and (
        int(os.environ["WORLD_SIZE"]) > 1
    )


def is_rank_zero() -> bool:
    """Whether this process reports for the run (rank 0, or a run of one process)."""
    return os.environ.get("RANK", "0") == "0" if launched() else True


def rank_config(config: TrainConfig, world_size: int, local_rank: int) -> TrainConfig:
    """``config`` for one rank: the launcher's world size (checked against the config's, and
    against the batch: num_envs and minibatches must split evenly) and, on CUDA, the GPU of
    this rank's position on its machine."""
    from entityrl.training.config import ConfigError

    if config.world_size not in (1, world_size):
        raise ConfigError(
            f"world_size={config.world_size} in the config, but the launcher started "
            f"{world_size} processes; leave world_size at 1 under a launcher"
        )
    device = resolve_device(config.device)
    if device.type == "cuda" and config.device in ("auto", "cuda"):
        device = torch.device("cuda", local_rank % torch.cuda.device_count())
    return dataclasses.replace(config, world_size=world_size, device=str(device))


def _train_rank(
    rank: int,
    world_size: int,
    init_method: str,
    config: TrainConfig,
    env: EnvSource | None,
    resume: str | Path | None,
    callbacks: Sequence[Callback] = (),
) -> TrainResult:
    from entityrl.training.runner import Trainer

    device = resolve_device(config.device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    try:
        dist.init_process_group(
            "nccl" if device.type == "cuda" else "gloo",
            init_method=init_method,
            rank=rank,
            world_size=world_size,
            timeout=datetime.timedelta(seconds=config.distributed_timeout),
        )
    except RuntimeError as err:  # DistStoreError: the others did not come in time
        raise PeerLostError(
            f"training process {rank} of {world_size} waited for the others to join at "
            f"{init_method} ({_gist(err)}); raise distributed_timeout="
            f"{config.distributed_timeout:g} if they start late"
        ) from err
    try:
        reducer = ProcessGroupReducer(device, config.distributed_timeout)
        return Trainer(config, env, resume, reducer=reducer, callbacks=callbacks).run()
    finally:
        dist.destroy_process_group()


def join_launcher(
    config: TrainConfig,
    env: EnvSource | None = None,
    resume: str | Path | None = None,
    callbacks: Sequence[Callback] = (),
) -> TrainResult:
    """Train as the rank a launcher (torchrun) started; every rank returns its own result.
    ``callbacks`` run in rank 0."""
    world_size, rank = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
    config = rank_config(config, world_size, int(os.environ.get("LOCAL_RANK", "0")))
    ours = callbacks if rank == 0 else ()
    return _train_rank(rank, world_size, "env://", config, env, resume, ours)


def _spawned_rank(*args: Any) -> None:
    """A rank started by :func:`launch` (arguments as :func:`_train_rank`'s)."""
    try:
        _train_rank(*args)
    except PeerLostError as err:  # rank 0 reports the run's failure; one line here is enough
        raise SystemExit(f"entityrl train: error: {err}") from None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# Seconds given to the other ranks at each step of ending them: to end on their own (a rank
# that lost rank 0 stops at once with its own error), then after SIGTERM, then after SIGKILL
# (which a stopped process cannot ignore; only one in uninterruptible I/O outlives it).
GRACE_SECONDS = 3.0
# Seconds the other ranks get, after rank 0 finished, for their share of the last collective
# and their teardown.
FINISH_SECONDS = 60.0


def _wait_all(processes: Sequence[BaseProcess], seconds: float) -> None:
    """Wait until every process in ``processes`` ended, or ``seconds`` passed for them all."""
    deadline = time.monotonic() + seconds
    for process in processes:
        process.join(timeout=max(0.0, deadline - time.monotonic()))


def _end_ranks(others: Sequence[BaseProcess], patience: float) -> list[str]:
    """End the ranks ``others`` (rank 1 on): ``patience`` seconds to end on their own, then
    SIGTERM, then SIGKILL, each after :data:`GRACE_SECONDS`; never waits longer. Returns a
    phrase for each rank that did not end on its own with exit code 0."""
    _wait_all(others, patience)
    on_their_own = [process.exitcode for process in others]
    for process in others:
        if process.exitcode is None:
            process.terminate()
    _wait_all(others, GRACE_SECONDS)
    for process in others:
        if process.exitcode is None:
            process.kill()
    _wait_all(others, GRACE_SECONDS)

    phrases = []
    for rank, (process, code) in enumerate(zip(others, on_their_own, strict=True), start=1):
        who = f"training process {rank} (pid {process.pid})"
        silent = f"{who} stopped answering (still running {patience:g} s after rank 0 stopped)"
        if code is not None:
            if code != 0:
                phrases.append(f"{who} {_ended(code)}")
        elif process.exitcode == -signal.SIGTERM:
            phrases.append(f"{silent}: ended by SIGTERM")
        elif process.exitcode is not None:
            # A stopped process (SIGSTOP, a debugger) holds SIGTERM pending; SIGKILL ends it.
            phrases.append(
                f"{silent}: stopped or stuck, it ignored SIGTERM for {GRACE_SECONDS:g} s and "
                f"was killed"
            )
        else:
            phrases.append(f"{silent}: in uninterruptible I/O, it outlived SIGKILL")
    return phrases


def _ended(code: int) -> str:
    """How a process with exit code ``code`` (negative: the signal) ended."""
    if code < 0:
        return f"was killed by {signal.Signals(-code).name}"
    return f"exited with code {code}"


def launch(
    config: TrainConfig,
    env: EnvSource | None = None,
    resume: str | Path | None = None,
    callbacks: Sequence[Callback] = (),
) -> TrainResult:
    """Train with ``config.world_size`` processes on this machine; returns rank 0's result.
    ``callbacks`` run in this process (rank 0).

    No wait here is unbounded: rank 0 learns of a lost rank within ``distributed_timeout``
    seconds (its collectives time out), and the others are then ended in at most
    3 x :data:`GRACE_SECONDS` (SIGTERM, then SIGKILL); the error names the ranks that failed
    or stopped answering."""
    world_size = config.world_size
    init_method = f"tcp://127.0.0.1:{_free_port()}"
    configs = [rank_config(config, world_size, rank) for rank in range(world_size)]
    context = mp.get_context("spawn")
    others = [
        context.Process(
            target=_spawned_rank,
            args=(rank, world_size, init_method, configs[rank], env, resume),
            name=f"entityrl-train-rank-{rank}",
            # Not daemonic: a rank starts worker processes of its own (rollout.processes),
            # which a daemonic process may not. Every way out of this function ends them.
            daemon=False,
        )
        for rank in range(1, world_size)
    ]
    for process in others:
        process.start()
    try:
        result = _train_rank(0, world_size, init_method, configs[0], env, resume, callbacks)
    except PeerLostError as err:
        # Name the rank that failed or stopped answering: rank 0 knows only that one did.
        raise PeerLostError("; ".join([str(err), *_end_ranks(others, GRACE_SECONDS)])) from err
    except BaseException:
        # Rank 0's own error (or Ctrl-C) is the run's; the others lose rank 0 and stop.
        _end_ranks(others, GRACE_SECONDS)
        raise
    failed = _end_ranks(others, FINISH_SECONDS)
    if failed:
        raise PeerLostError(
            f"training process 0 of {world_size} finished, but "
            + "; ".join(failed)
            + "; see their output"
        )
    return result


__all__ = [
    "PeerLostError",
    "ProcessGroupReducer",
    "is_rank_zero",
    "join_launcher",
    "launch",
    "launched",
]
