"""How many threads torch uses when nobody said.

On a busy machine a torch operation split over more threads than there are free cores waits
for its slowest thread, which waits for a core: measured on a loaded 2-core machine, behaviour
cloning took 21-37 s per epoch with two threads against 1.5-1.8 s with one (see
benchmarks/threads.py). So the default counts the cores this process may run on, less the
load already on them (the one-minute load average), shared among the training processes
started on this machine. Acting on a few rows (evaluation, play) gains nothing from more than
one thread.

An explicit ``torch_threads`` setting always wins, and so does ``OMP_NUM_THREADS`` (then torch
is left as it is).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch

INFERENCE_THREADS = 1
"""Threads for acting on a batch of a few rows (evaluation, matches, play)."""


def usable_cores() -> int:
    """The cores this process may be scheduled on (its CPU affinity)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def free_cores() -> int:
    """The usable cores not already busy: the usable cores less their share of the one-minute
    load average (which counts the whole machine's runnable processes), at least 1."""
    cores = usable_cores()
    try:
        load = os.getloadavg()[0]
    except OSError:  # no load average on this system
        load = 0.0
    busy = load * cores / (os.cpu_count() or cores)
    return max(1, min(cores, round(cores - busy)))


def training_threads(torch_threads: int, processes: int = 1) -> int | None:
    """Threads for each of ``processes`` training processes on this machine: ``torch_threads``
    when it is set (> 0); None (leave torch as it is) when ``OMP_NUM_THREADS`` is set; else
    the free cores shared among the processes, at least one each.

    Environment worker processes are not counted: they wait while the network updates, when
    threads matter most (measured: two threads beat one on two quiet cores with two workers).
    """
    if torch_threads < 0:
        raise ValueError(f"torch_threads must be >= 0 (0: choose), got {torch_threads}")
    if processes < 1:
        raise ValueError(f"processes must be >= 1, got {processes}")
    if torch_threads:
        return torch_threads
    if os.environ.get("OMP_NUM_THREADS"):
        return None
    return max(1, free_cores() // processes)


def inference_threads(torch_threads: int = 0) -> int:
    """Threads for acting: ``torch_threads`` when it is set (> 0), else
    :data:`INFERENCE_THREADS`."""
    return torch_threads or INFERENCE_THREADS


@contextmanager
def using_threads(threads: int | None) -> Iterator[None]:
    """Run the block with ``threads`` torch threads (None: as torch is), then restore the
    count it had, so the caller's process is left as it was."""
    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        if threads is not None:
            torch.set_num_threads(previous)


__all__ = [
    "INFERENCE_THREADS",
    "free_cores",
    "inference_threads",
    "training_threads",
    "usable_cores",
    "using_threads",
]
