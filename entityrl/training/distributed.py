"""Data-parallel training: ``world_size`` processes, each with its own share of the
environments, taking identical optimizer steps (rlpyt's ``world_size`` / ``rank``).

The calling process is rank 0 (it shows the progress bar, writes logs and checkpoints); ranks
1.. are started with the ``spawn`` method. The processes talk over a gloo process group on
localhost: every minibatch they sum their gradients and a few counts, so all of them hold the
same parameters throughout.
"""

from __future__ import annotations

import datetime
import multiprocessing as mp
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import torch
import torch.distributed as dist

from entityrl.algo.reduce import Reducer

if TYPE_CHECKING:
    from entityrl.training.config import TrainConfig
    from entityrl.training.runner import EnvSource, TrainResult

# A peer that stops answering (killed, crashed) fails the others' collectives after this long.
TIMEOUT = datetime.timedelta(minutes=5)


class ProcessGroupReducer(Reducer):
    """Sums and gathers over the processes of the default process group."""

    def __init__(self) -> None:
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()

    def sum(self, values: npt.ArrayLike) -> npt.NDArray[np.float64]:
        tensor = torch.as_tensor(np.asarray(values, dtype=np.float64)).clone()
        dist.all_reduce(tensor)
        return tensor.numpy()

    def sum_in_place(self, tensor: torch.Tensor) -> None:
        dist.all_reduce(tensor)

    def gather(self, value: Any) -> list[Any]:
        gathered: list[Any] = [None] * self.world_size
        dist.all_gather_object(gathered, value)
        return gathered


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _join(rank: int, world_size: int, port: int) -> None:
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=TIMEOUT,
    )


def _run_rank(
    rank: int,
    world_size: int,
    port: int,
    config: TrainConfig,
    env: EnvSource | None,
    resume: str | Path | None,
) -> None:
    from entityrl.training.runner import Trainer

    _join(rank, world_size, port)
    try:
        Trainer(config, env, resume, reducer=ProcessGroupReducer()).run()
    finally:
        dist.destroy_process_group()


def launch(
    config: TrainConfig, env: EnvSource | None = None, resume: str | Path | None = None
) -> TrainResult:
    """Train with ``config.world_size`` processes; returns rank 0's result."""
    from entityrl.training.runner import Trainer

    world_size = config.world_size
    port = _free_port()
    context = mp.get_context("spawn")
    others = [
        context.Process(
            target=_run_rank,
            args=(rank, world_size, port, config, env, resume),
            name=f"entityrl-train-rank-{rank}",
            daemon=True,
        )
        for rank in range(1, world_size)
    ]
    for process in others:
        process.start()
    try:
        _join(0, world_size, port)
        try:
            result = Trainer(config, env, resume, reducer=ProcessGroupReducer()).run()
        finally:
            dist.destroy_process_group()
    finally:
        for process in others:
            process.join(timeout=30)
            if process.is_alive():
                process.terminate()
                process.join()
    failed = [p.name for p in others if p.exitcode not in (0, None)]
    if failed:
        raise RuntimeError(f"training processes {failed} failed (exit codes "
                           f"{[p.exitcode for p in others]}); see their output above")  # fmt: skip
    return result


__all__ = ["ProcessGroupReducer", "launch"]
