"""A callback that stops a training run after some iterations (to test resuming)."""

from __future__ import annotations

from entityrl.training import Callback, Trainer


class StopAfter(Callback):
    def __init__(self, iterations: int) -> None:
        self.iterations = iterations

    def on_iteration(self, trainer: Trainer, metrics: dict[str, float]) -> None:
        if trainer.iteration >= self.iterations:
            trainer.request_stop("test")
