"""Evaluation during training (``eval.interval``): the current policy plays complete episodes on
environments of its own, the best agent so far is kept, and a run can stop at its target.

The evaluation environments are seeded apart from the training ones (seed + 1,000,000 + i),
step in this process, and do not touch the training environments or random generators, so a
run with evaluation trains exactly as one without.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from entityrl.nn.rogue_net import RogueNet
from entityrl.training.agent import Agent, Evaluation, evaluate
from entityrl.training.threads import inference_threads

if TYPE_CHECKING:
    from entityrl.env.vec_env import VecEnv
    from entityrl.training.config import TrainConfig
    from entityrl.training.runner import EnvSource

BEST_FILE = "best.pt"
SEED_OFFSET = 1_000_000


class PeriodicEvaluator:
    """Evaluates a network on ``config.eval.episodes`` episodes when asked (the trainer asks
    every ``eval.interval`` steps)."""

    def __init__(self, config: TrainConfig, env: EnvSource | None) -> None:
        from entityrl.training.runner import make_local_env

        self.config = config
        self.env: VecEnv = make_local_env(config, env, config.eval.num_envs, SEED_OFFSET)
        self.best = float("-inf")
        self.evaluations = 0

    def run(self, net: RogueNet) -> tuple[Evaluation, bool]:
        """Evaluate ``net``; the evaluation and whether its mean return is the best so far."""
        cfg = self.config.eval
        # Sampling from a generator of its own, seeded per evaluation: reproducible, and the
        # training's generators are left alone.
        agent = Agent(net, self.config, deterministic=cfg.deterministic,
                      seed=self.config.seed + SEED_OFFSET + self.evaluations)  # fmt: skip
        try:
            evaluation = evaluate(
                agent,
                self.env,
                cfg.episodes,
                threads=inference_threads(self.config.torch_threads),
            )
        finally:
            net.train()
        self.evaluations += 1
        improved = evaluation.mean() > self.best
        self.best = max(self.best, evaluation.mean())
        return evaluation, improved

    def reached_target(self, evaluation: Evaluation) -> bool:
        target = self.config.target_return
        return (
            self.config.eval.stop_at_target and target is not None and (evaluation.mean() >= target)
        )

    def close(self) -> None:
        self.env.close()


__all__ = ["BEST_FILE", "PeriodicEvaluator"]
