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
seconds for a silent peer) instead of hanging.
"""

from __future__ import annotations

import dataclasses
import datetime
import multiprocessing as mp
import os
import re
import socket
from collections.abc import Callable, Sequence
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


def launch(
    config: TrainConfig,
    env: EnvSource | None = None,
    resume: str | Path | None = None,
    callbacks: Sequence[Callback] = (),
) -> TrainResult:
    """Train with ``config.world_size`` processes on this machine; returns rank 0's result.
    ``callbacks`` run in this process (rank 0)."""
    world_size = config.world_size
    init_method = f"tcp://127.0.0.1:{_free_port()}"
    configs = [rank_config(config, world_size, rank) for rank in range(world_size)]
    context = mp.get_context("spawn")
    others = [
        context.Process(
            target=_spawned_rank,
            args=(rank, world_size, init_method, configs[rank], env, resume),
            name=f"entityrl-train-rank-{rank}",
            daemon=True,
        )
        for rank in range(1, world_size)
    ]
    for process in others:
        process.start()
    # The others finish their last collective soon after rank 0; after a failure they may
    # be stuck (the rank that hangs), so they get a short grace only.
    grace = 5.0
    try:
        result = _train_rank(0, world_size, init_method, configs[0], env, resume, callbacks)
        grace = 60.0
    finally:
        for process in others:
            process.join(timeout=grace)
            if process.is_alive():
                process.terminate()
                process.join()
    failed = {p.name: p.exitcode for p in others if p.exitcode not in (0, None)}
    if failed:
        raise PeerLostError(f"training processes failed (exit codes {failed}); see their output")
    return result


__all__ = [
    "PeerLostError",
    "ProcessGroupReducer",
    "is_rank_zero",
    "join_launcher",
    "launch",
    "launched",
]
