"""Observation stacking in training: the trainer stacks when env.stack > 1 (in worker
processes too), and stacking is what lets a memoryless policy see velocities."""

from __future__ import annotations

from pathlib import Path

import pytest
from stacking_envs import Drift

from entityrl.training import evaluate, load_agent, make_eval_env
from entityrl.training.config import TrainConfig, load_config
from entityrl.training.runner import Trainer

QUIET = ["log.tensorboard=false", "log.progress=false", "seed=1"]


def drift_config(tmp_path: Path, *overrides: str) -> TrainConfig:
    return load_config(
        None,
        [
            *QUIET,
            f"log.run_dir={tmp_path}",
            "total_timesteps=24576",
            # The regime this test was sized with (PPO's defaults take 16 x 128 samples).
            "rollout.num_envs=64",
            "rollout.steps=16",
            "optim.bs=1024",
            "optim.lr=0.005",
            "ppo.update_epochs=3",
            "net.d_model=32",
            "net.n_layer=1",
            *overrides,
        ],
        check_env=False,
    )


def drift_return(tmp_path: Path, stack: int) -> float:
    Trainer(drift_config(tmp_path, f"env.stack={stack}"), env=Drift).run()
    agent = load_agent(tmp_path, seed=0)
    with make_eval_env(agent, env=Drift, num_envs=16, seed=123) as env:
        return evaluate(agent, env, 200).mean()


def test_stacking_lets_a_memoryless_policy_see_velocities(tmp_path: Path) -> None:
    # 8 steps of 3 balls: chance is 4.0; with two steps stacked every step but an episode's
    # first can be answered (optimum 0.5 + 7 = 7.5).
    assert drift_return(tmp_path / "stacked", 2) >= 6.5
    assert drift_return(tmp_path / "plain", 1) <= 4.5


def test_worker_processes_train_on_stacked_observations(tmp_path: Path) -> None:
    config = drift_config(tmp_path, "env.stack=3", "rollout.processes=2", "total_timesteps=2048")
    trainer = Trainer(config, env=Drift)
    assert list(trainer.env.obs_space.entities["Ball"].features) == ["x", "x@t-1", "x@t-2"]
    trainer.train_iteration()
    stacked = trainer.algorithm.sampler.obs.features["Ball"].data
    assert stacked.shape[1] == 3
    trainer.env.close()


def test_a_stack_below_one_is_refused() -> None:
    with pytest.raises(
        ValueError, match=r"env\.stack must be >= 1 \(steps of features stacked\), got 0"
    ):
        load_config("Corridor", ["env.stack=0"])
