"""Hooks into a training run: subclass :class:`Callback`, override what you need, and pass
instances to :func:`entityrl.train` (``callbacks=[...]``) or :class:`Trainer`.

Callbacks run in the calling process (rank 0 of a data-parallel run). From any hook,
``trainer.request_stop(reason)`` ends the run after the current iteration; the final
checkpoint is written as usual and the result's ``stop_reason`` carries the reason.

    class StopWhenSolved(Callback):
        def on_iteration(self, trainer, metrics):
            if metrics.get("episode/episode_return", 0.0) > 0.99:
                trainer.request_stop("solved")
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from entityrl.training.agent import Evaluation
    from entityrl.training.runner import Trainer


class Callback:
    """Base class of training hooks; every method does nothing unless overridden."""

    def on_iteration(self, trainer: Trainer, metrics: dict[str, float]) -> None:
        """After each iteration (rollout and update), with the metrics it logged."""

    def on_eval(self, trainer: Trainer, evaluation: Evaluation) -> None:
        """After each periodic evaluation (``eval.interval``), with its episodes' metrics."""


__all__ = ["Callback"]
