"""The live progress line of a training run."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.progress import Progress


class ProgressReporter:
    """A rich progress bar (steps, SPS, mean episode return, ETA) on a terminal; on anything
    else (CI logs, pipes) a plain line about every 10% of the run."""

    def __init__(self, total: int, start: int = 0, enabled: bool = True) -> None:
        self.total = total
        self.enabled = enabled
        self._next_report = start
        self._started = time.time()
        self._progress: Progress | None = None
        # rich is imported only to draw (a few MB that runs without progress output save).
        if enabled:
            self._start_bar(total, start)

    def _start_bar(self, total: int, start: int) -> None:
        """The live bar, on a terminal (elsewhere: plain lines)."""
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        console = Console(stderr=True)
        if console.is_terminal:
            self._progress = Progress(
                TextColumn("[bold]train"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("steps  {task.fields[sps]} SPS  return {task.fields[ret]}"),
                TimeElapsedColumn(),
                TextColumn("eta"),
                TimeRemainingColumn(),
                console=console,
            )
            self._task = self._progress.add_task(
                "train", total=total, completed=start, sps="-", ret="-"
            )

    def __enter__(self) -> ProgressReporter:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def update(self, step: int, sps: float, mean_return: float | None) -> None:
        if not self.enabled:
            return
        ret = "-" if mean_return is None else f"{mean_return:.3f}"
        if self._progress is not None:
            self._progress.update(self._task, completed=step, sps=f"{sps:,.0f}", ret=ret)
            return
        if step >= self._next_report or step >= self.total:
            elapsed = time.time() - self._started
            print(
                f"step {step:,}/{self.total:,}  {sps:,.0f} SPS  return {ret}  {elapsed:.0f}s",
                file=sys.stderr,
                flush=True,
            )
            self._next_report = step + max(self.total // 10, 1)
