"""Evaluation during training, best.pt, stopping at a target, callbacks, reward scaling."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from entityrl.algorithms.common.reward_scale import RewardScaler
from entityrl.training import Callback, Evaluation, load_agent
from entityrl.training import checkpoint as ckpt
from entityrl.training.config import ConfigError, load_config
from entityrl.training.runner import Trainer, train

SMALL = ["rollout.num_envs=8", "rollout.steps=8", "optim.bs=32", "net.d_model=16",
         "total_timesteps=192", "log.tensorboard=false", "log.progress=false"]  # fmt: skip
EVAL = ["eval.interval=64", "eval.episodes=4", "eval.num_envs=2"]


def config(run_dir: Path, *extra: str):
    return load_config("CherryPick", [*SMALL, f"log.run_dir={run_dir}", *extra])


def records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_evaluations_are_logged_and_the_best_agent_kept(tmp_path: Path) -> None:
    Trainer(config(tmp_path, *EVAL)).run()
    evals = [r for r in records(tmp_path) if "eval/episode_return" in r]
    assert [r["step"] for r in evals] == [64, 128, 192]
    best = max(evals, key=lambda r: r["eval/episode_return"])
    assert evals[-1]["eval/best_return"] == best["eval/episode_return"]
    agent = load_agent(tmp_path / "best.pt")
    # The first of equal bests is kept: a later evaluation must beat it to replace it.
    assert agent.step == next(
        r["step"] for r in evals if r["eval/episode_return"] == best["eval/episode_return"]
    )


def test_evaluating_does_not_change_the_training(tmp_path: Path) -> None:
    Trainer(config(tmp_path / "plain")).run()
    Trainer(config(tmp_path / "evaluated", *EVAL)).run()
    plain, evaluated = (ckpt.load_checkpoint(tmp_path / d)["model"] for d in ("plain", "evaluated"))
    assert all(torch.equal(plain[k], evaluated[k]) for k in plain)


def test_a_run_stops_once_an_evaluation_reaches_the_target(tmp_path: Path) -> None:
    result = train(config=config(tmp_path, *EVAL, "target_return=-100", "eval.stop_at_target=true"))
    assert result.steps == 64 and not result.interrupted
    assert result.stop_reason is not None and "reached target_return -100" in result.stop_reason
    assert ckpt.load_checkpoint(tmp_path)["step"] == 64


def test_stopping_at_a_target_needs_one_and_evaluations() -> None:
    with pytest.raises(ConfigError, match=r"eval.stop_at_target needs target_return and eval"):
        load_config("CherryPick", ["eval.stop_at_target=true", "target_return=null"])
    with pytest.raises(ConfigError, match=r"eval.interval must be >= 0"):
        load_config("CherryPick", ["eval.interval=-1"])


class Recorder(Callback):
    def __init__(self) -> None:
        self.iterations: list[int] = []
        self.evaluations: list[Evaluation] = []

    def on_iteration(self, trainer: Trainer, metrics: dict[str, float]) -> None:
        self.iterations.append(trainer.step)
        if trainer.step >= 128:
            trainer.request_stop("enough")

    def on_eval(self, trainer: Trainer, evaluation: Evaluation) -> None:
        self.evaluations.append(evaluation)


def test_callbacks_see_iterations_and_evaluations_and_can_stop(tmp_path: Path) -> None:
    recorder = Recorder()
    result = train(config=config(tmp_path, *EVAL), callbacks=[recorder])
    assert recorder.iterations == [64, 128]
    assert [e.episodes for e in recorder.evaluations] == [4, 4]
    assert result.steps == 128 and result.stop_reason == "enough"


def discounted(rewards: np.ndarray, dones: np.ndarray, gamma: float) -> np.ndarray:
    returns, out = np.zeros(rewards.shape[1]), []
    for r, d in zip(rewards, dones, strict=True):
        returns = returns * gamma + r
        out.append(returns.copy())
        returns[d] = 0.0
    return np.stack(out)


def test_rewards_are_divided_by_the_running_scale_of_the_return() -> None:
    rng = np.random.default_rng(0)
    rewards = (rng.normal(size=(2, 16, 4)) * 100).astype(np.float32)
    dones = rng.random((2, 16, 4)) < 0.1
    scaler = RewardScaler(4, gamma=0.9)
    scaler(rewards[0], dones[0])
    scaled = scaler(rewards[1], dones[1])
    # Returns carry over from the first rollout into the second.
    seen = discounted(np.concatenate(list(rewards)), np.concatenate(list(dones)), 0.9)
    assert scaler.std == pytest.approx(float(np.sqrt(seen.var() + 1e-8)), rel=1e-9)
    np.testing.assert_allclose(scaled, rewards[1] / seen.std(), rtol=1e-5)


def test_processes_share_one_scale() -> None:
    # Two processes with half the environments each, their statistics summed, scale like one.
    rng = np.random.default_rng(1)
    rewards = rng.normal(size=(8, 6)).astype(np.float32)
    dones = rng.random((8, 6)) < 0.2
    whole = RewardScaler(6, gamma=0.99)
    whole(rewards, dones)
    halves = [RewardScaler(3, gamma=0.99), RewardScaler(3, gamma=0.99)]
    parts = [np.zeros(3), np.zeros(3)]

    def capture(i: int):
        def combine(part):
            parts[i] = np.asarray(part)
            return parts[0] + parts[1]

        return combine

    halves[0](rewards[:, :3], dones[:, :3], capture(0))  # sees only its own part so far
    halves[1](rewards[:, 3:], dones[:, 3:], capture(1))  # sees both: the summed statistics
    assert halves[1].std == pytest.approx(whole.std, rel=1e-9)
