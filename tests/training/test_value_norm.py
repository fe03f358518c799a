"""ppo.norm_value: the value head learns normalized targets; its outputs are mapped back to
values before advantages are estimated."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from entityrl.algorithms import registry
from entityrl.algorithms.common.value_norm import ValueNormalizer
from entityrl.training.config import ConfigError, load_config
from entityrl.training.runner import Trainer


def rollout(outputs: np.ndarray, cut: np.ndarray, bootstrap: np.ndarray, learned=None):
    return SimpleNamespace(
        values=outputs.astype(np.float32),
        next_values=np.array([0.5, -0.5], dtype=np.float32),
        bootstrap=bootstrap.astype(np.float32),
        cut=cut,
        returns=None,
        learned=lambda: learned,
    )


def test_advantages_see_values_and_the_loss_sees_normalized_targets() -> None:
    norm = ValueNormalizer()
    norm.moments.update([-12.0, -8.0, -10.0, -10.0])  # mean -10, std sqrt(2)
    std = float(np.sqrt(2.0))
    outputs = np.array([0.0, 1.0, -1.0, 2.0])  # 2 steps x 2 environments
    cut = np.array([[False, True], [False, False]])
    bootstrap = np.array([[0.0, 1.0], [0.0, 0.0]])
    r = rollout(outputs, cut, bootstrap)
    seen = {}

    def estimate(r):
        # What GAE is given: values, not the head's outputs; the bootstrap only where cut.
        seen["values"] = r.values.copy()
        seen["next"] = r.next_values.copy()
        seen["bootstrap"] = r.bootstrap.copy()
        r.returns = np.array([-20.0, -16.0, -18.0, -18.0], dtype=np.float32)

    norm.estimate(r, estimate, None)
    np.testing.assert_allclose(seen["values"], outputs * std - 10, rtol=1e-6)
    np.testing.assert_allclose(seen["next"], np.array([0.5, -0.5]) * std - 10, rtol=1e-6)
    np.testing.assert_allclose(seen["bootstrap"], [[0.0, std - 10], [0.0, 0.0]], rtol=1e-6)
    # The statistics now hold all eight targets; the returns are in their units; the values
    # are the head's outputs again (the centre of the value clip).
    every = np.array([-12.0, -8.0, -10.0, -10.0, -20.0, -16.0, -18.0, -18.0])
    assert norm.moments.mean == pytest.approx(every.mean())
    assert norm.std == pytest.approx(every.std(), rel=1e-6)
    np.testing.assert_allclose(
        r.returns, (r.returns * 0 + [-20, -16, -18, -18] - every.mean()) / every.std(), rtol=1e-5
    )
    np.testing.assert_array_equal(r.values, outputs.astype(np.float32))


def test_rare_rewards_are_not_magnified() -> None:
    # Targets of a sparse task: all 0 but one success. Their spread (0.03) would blow that one
    # up to 31 standard deviations; the scale stays at 1 instead.
    norm = ValueNormalizer()
    targets = np.zeros(1000, dtype=np.float32)
    targets[0] = 1.0
    r = rollout(np.zeros(1000), None, np.zeros((1, 1000)))

    def estimate(r):
        r.returns = targets.copy()

    norm.estimate(r, estimate, None)
    assert norm.std == 1.0
    np.testing.assert_allclose(r.returns, targets - 0.001, atol=1e-7)


def test_only_the_rows_learned_from_count() -> None:
    norm = ValueNormalizer()
    r = rollout(np.zeros(4), None, np.zeros((2, 2)), learned=np.array([True, False, True, False]))

    def estimate(r):
        r.returns = np.array([1.0, 100.0, 3.0, 100.0], dtype=np.float32)

    norm.estimate(r, estimate, None)
    assert norm.moments.count == 2 and norm.moments.mean == pytest.approx(2.0)


def test_a_run_learns_and_resumes_with_its_statistics(tmp_path: Path) -> None:
    small = [
        "rollout.num_envs=8", "rollout.steps=8", "optim.bs=32", "net.d_model=16",
        "total_timesteps=128", "log.tensorboard=false", "log.progress=false",
        "ppo.norm_value=true", f"log.run_dir={tmp_path}",
    ]  # fmt: skip
    trainer = Trainer(load_config("MineSweeper", small))
    trainer.run()
    norm = trainer.algorithm.value_norm
    assert norm is not None and norm.moments.count == 128
    resumed = Trainer(load_config("MineSweeper", small), resume=tmp_path)
    assert resumed.algorithm.value_norm.state_dict() == norm.state_dict()


def test_poca_refuses_it() -> None:
    poca = registry.lookup("poca")
    config = load_config("PackHunt", ["algo=poca", "ppo.norm_value=true", "ppo.norm_reward=false"])
    with pytest.raises(ConfigError, match=r"algo=poca does not support ppo\.norm_value"):
        poca.check(config)
    poca.check(load_config("PackHunt", ["algo=poca", "ppo.norm_reward=false"]))  # without: accepted
