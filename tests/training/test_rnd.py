"""Random network distillation: the bonus is novelty, it is what solves a sparse corridor,
and a resumed run continues it exactly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from entityrl.algorithms.common.optimizer import OptimConfig
from entityrl.algorithms.rnd import RND, RNDConfig
from entityrl.envs import make_vec
from entityrl.training import checkpoint as ckpt
from entityrl.training.callbacks import Callback
from entityrl.training.config import ConfigError, load_config
from entityrl.training.runner import Trainer

QUIET = ["log.tensorboard=false", "log.progress=false"]


def test_observations_seen_often_earn_less_than_new_ones() -> None:
    torch.manual_seed(0)
    env = make_vec("Corridor", 64, seed=0)
    start = env.reset()  # every walker in cell 0
    rnd = RND(env.obs_space, RNDConfig(coef=1.0), OptimConfig(bs=64), num_envs=64)
    rnd.model.update_normalizers(start, None)
    env.cell[:] = env.length - 1  # every walker at the far end, where none has been
    far = env.observe()
    before = rnd.model.errors(start).mean().item()
    rng = np.random.default_rng(0)
    for _ in range(50):
        rnd.update(start, rng)
    familiar, novel = rnd.model.errors(start).mean().item(), rnd.model.errors(far).mean().item()
    assert familiar < before / 10
    assert novel > 10 * familiar


def test_bonus_is_the_next_observations_centred_novelty_in_return_units() -> None:
    env = make_vec("Corridor", 4, seed=0)
    obs = env.reset()
    rnd = RND(env.obs_space, RNDConfig(coef=2.0), OptimConfig(), num_envs=4)
    rows = make_vec("Corridor", 8, seed=0).reset()  # two steps of four environments
    bonus = rnd.bonus(rows, obs)
    assert bonus.shape == (2, 4)
    novelty = torch.cat([rnd.model.errors(rows), rnd.model.errors(obs)]).detach().numpy()
    following = novelty[4:].reshape(2, 4)
    scaled = bonus / 2.0 * rnd.scale.scaler.std
    np.testing.assert_allclose(scaled, following - following.mean(), rtol=1e-4, atol=1e-7)


def corridor_return(tmp_path: Path, seed: int, coef: float) -> float | None:
    config = load_config(
        "Corridor",
        [*QUIET, f"seed={seed}", f"rnd.coef={coef}", f"log.run_dir={tmp_path / str(coef)}"],
    )
    return Trainer(config).run().mean_return


def test_rnd_solves_the_corridor_plain_ppo_does_not(tmp_path: Path) -> None:
    # The shipped budget (30,720 steps): see benchmarks/RESULTS.md for three seeds of each.
    assert corridor_return(tmp_path, 1, 0.0) == 0.0
    assert corridor_return(tmp_path, 1, 1.0) >= 0.95


class StopAfterFirstIteration(Callback):
    def on_iteration(self, trainer: Trainer, metrics: dict[str, float]) -> None:
        trainer.request_stop("stopped to resume")


def test_resumed_run_continues_rnd_exactly(tmp_path: Path) -> None:
    def config(name: str):
        return load_config(
            "Corridor",
            [*QUIET, "rnd.coef=1.0", "total_timesteps=6144", f"log.run_dir={tmp_path / name}"],
        )

    Trainer(config("whole")).run()
    Trainer(config("split"), callbacks=[StopAfterFirstIteration()]).run()
    Trainer(config("split"), resume=tmp_path / "split").run()
    whole = ckpt.load_checkpoint(tmp_path / "whole")["rnd"][0]
    split = ckpt.load_checkpoint(tmp_path / "split")["rnd"][0]
    assert all(torch.equal(whole["model"][k], split["model"][k]) for k in whole["model"])
    assert whole["reward_scale"] == split["reward_scale"]
    moments = zip(_tensors(whole["optimizer"]), _tensors(split["optimizer"]), strict=True)
    assert all(torch.equal(a, b) for a, b in moments)
    assert _tensors(whole["optimizer"])  # the optimizer's state was saved at all


def _tensors(state: object) -> list[torch.Tensor]:
    if torch.is_tensor(state):
        return [state]
    if isinstance(state, dict):
        return [t for key in sorted(state, key=str) for t in _tensors(state[key])]
    if isinstance(state, list | tuple):
        return [t for item in state for t in _tensors(item)]
    return []


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("rnd.coef=-1", "rnd.coef must be >= 0, got -1.0"),
        ("rnd.gamma=2", "rnd.gamma must be in \\[0, 1\\], got 2.0"),
        ("rnd.epochs=0", "rnd.epochs must be > 0, got 0"),
    ],
)
def test_bad_settings_are_refused(override: str, message: str) -> None:
    with pytest.raises((ConfigError, ValueError), match=message):
        load_config("Corridor", [override])
