"""Intrinsic curiosity: action summaries are exact, the bonus is the forward model's error on
transitions (none across episode ends), the models learn, and it solves a sparse corridor."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from entityrl.algorithms.common.optimizer import OptimConfig
from entityrl.algorithms.common.rollout import Rollout
from entityrl.algorithms.icm import ICM, ICMConfig, action_parts, summarize
from entityrl.env.spaces import (
    CategoricalActionSpace,
    ContinuousActionSpace,
    GlobalCategoricalActionSpace,
    SelectEntityActionSpace,
)
from entityrl.env.vec_obs import VecObs
from entityrl.envs import make_vec
from entityrl.ragged import RaggedArray
from entityrl.training import checkpoint as ckpt
from entityrl.training.callbacks import Callback
from entityrl.training.config import ConfigError, load_config
from entityrl.training.runner import Trainer

QUIET = ["log.tensorboard=false", "log.progress=false", "torch_threads=1"]


def test_a_rows_actions_are_summarized_as_choice_shares_and_continuous_means() -> None:
    space = {
        "move": CategoricalActionSpace(["a", "b", "c"]),
        "pick": SelectEntityActionSpace(),
        "mode": GlobalCategoricalActionSpace(["x", "y"]),
        "push": ContinuousActionSpace(["dx", "dy"]),
    }
    parts = action_parts(space)
    assert [(p.name, p.width, p.categorical) for p in parts] == [
        ("move", 3, True), ("mode", 2, True), ("push", 2, False),
    ]  # fmt: skip
    actions = {
        # Row 0: two actors chose a and c; row 1: none; row 2: one chose c.
        "move": RaggedArray(np.array([[0], [2], [2]]), np.array([2, 0, 1])),
        "mode": RaggedArray(np.array([[1], [0], [1]]), np.array([1, 1, 1])),
        "push": RaggedArray(np.array([[1.0, 2.0], [3.0, -2.0]], np.float32), np.array([2, 0, 0])),
    }
    summary, acted = summarize(actions, parts, 3)
    np.testing.assert_allclose(
        summary,
        [
            [0.5, 0, 0.5, 0, 1, 2.0, 0.0],
            [0, 0, 0, 1, 0, 0, 0],
            [0, 0, 1, 0, 1, 0, 0],
        ],
    )
    assert acted.tolist() == [[True, True, True], [False, True, False], [True, True, False]]


def test_an_environment_of_select_entity_actions_only_is_refused() -> None:
    with pytest.raises(ValueError, match="icm needs at least one categorical or continuous"):
        action_parts({"pick": SelectEntityActionSpace()})


def corridor_rollout(icm: ICM, length: int = 4, start: int = 0, steps: int = 8) -> Rollout:
    """A rollout of random moves in 16 corridors of ``length`` cells, starting at cell
    ``start`` (episodes of up to twice the length)."""
    env = make_vec("Corridor", 16, seed=0, length=length)
    env.reset()
    env.cell[:] = start
    obs = env.observe()
    rng = np.random.default_rng(start)
    rows, actions, dones = [], [], []
    for _ in range(steps):
        moves = RaggedArray(rng.integers(0, 2, (16, 1)), np.ones(16, np.int64))
        rows.append(obs)
        actions.append(moves)
        obs = env.act({"Move": moves})
        dones.append(obs.done)
    zeros = np.zeros((steps, 16), np.float32)
    return Rollout(
        obs=VecObs.concat(rows, icm.choices), actions={"Move": RaggedArray.concat(actions)},
        logprobs={}, values=zeros.reshape(-1), rewards=zeros, dones=np.stack(dones),
        bootstrap=zeros, next_obs=obs, next_values=np.zeros(16, np.float32), metrics={},
    )  # fmt: skip


def make_icm(coef: float = 1.0) -> ICM:
    env = make_vec("Corridor", 16, seed=0, length=4)
    return ICM(env.obs_space, env.action_space, ICMConfig(coef=coef), OptimConfig(bs=32), 16)


def test_the_bonus_is_the_centred_forward_error_and_nothing_across_episode_ends() -> None:
    torch.manual_seed(0)
    icm = make_icm(coef=2.0)
    rollout = corridor_rollout(icm)
    assert rollout.dones.any() and not rollout.dones.all()
    bonus = icm.rollout_bonus(rollout)
    assert bonus.shape == (8, 16)
    assert (bonus[rollout.dones] == 0).all()
    successors, summary, acted, _ = icm._transitions(rollout)
    errors, _ = icm.model.losses(rollout.obs, successors, summary, acted)
    errors = errors.detach().numpy().reshape(8, 16)
    counted = ~rollout.dones
    expected = np.where(counted, errors - errors[counted].mean(), 0.0)
    np.testing.assert_allclose(bonus / 2.0 * icm.scale.scaler.std, expected, rtol=1e-4, atol=1e-7)


def forward_error(icm: ICM, rollout: Rollout) -> float:
    successors, summary, acted, transition = icm._transitions(rollout)
    errors, _ = icm.model.losses(rollout.obs, successors, summary, acted)
    return errors[torch.from_numpy(transition)].mean().item()


def test_training_teaches_the_actions_and_leaves_unseen_transitions_surprising() -> None:
    torch.manual_seed(0)
    env = make_vec("Corridor", 16, seed=0, length=40)
    icm = ICM(env.obs_space, env.action_space, ICMConfig(coef=1), OptimConfig(bs=128), 16)
    near, far = corridor_rollout(icm, 40, start=0), corridor_rollout(icm, 40, start=30)
    icm.model.update_normalizers(near.obs, None)
    rng = np.random.default_rng(0)
    first = icm.learn(near, rng)
    for _ in range(40):
        last = icm.learn(near, rng)
    # Two moves: guessing is ln 2 = 0.69; the next cell tells which was taken.
    assert first["loss/icm_inverse"] > 0.6 and last["loss/icm_inverse"] < 0.1
    assert forward_error(icm, far) > 2 * forward_error(icm, near)


def test_icm_solves_the_corridor_plain_ppo_does_not(tmp_path: Path) -> None:
    # The shipped budget (30,720 steps): benchmarks/RESULTS.md has seeds 1-3 of each.
    def final_return(name: str, overrides: list[str]) -> float | None:
        config = load_config("Corridor", [*QUIET, "seed=1", f"log.run_dir={tmp_path / name}",
                                          *overrides])  # fmt: skip
        return Trainer(config).run().mean_return

    assert final_return("plain", ["rnd.coef=0"]) == 0.0
    assert final_return("icm", ["rnd.coef=0", "icm.coef=1"]) >= 0.95


class StopAfterFirstIteration(Callback):
    def on_iteration(self, trainer: Trainer, metrics: dict[str, float]) -> None:
        trainer.request_stop("stopped to resume")


def test_a_resumed_run_continues_icm_exactly(tmp_path: Path) -> None:
    def config(name: str):  # type: ignore[no-untyped-def]
        return load_config("Corridor", [*QUIET, "rnd.coef=0", "icm.coef=1",
                                        "total_timesteps=6144", f"log.run_dir={tmp_path / name}"])  # fmt: skip

    Trainer(config("whole")).run()
    Trainer(config("split"), callbacks=[StopAfterFirstIteration()]).run()
    Trainer(config("split"), resume=tmp_path / "split").run()
    whole = ckpt.load_checkpoint(tmp_path / "whole")["icm"][0]
    split = ckpt.load_checkpoint(tmp_path / "split")["icm"][0]
    assert all(torch.equal(whole["model"][k], split["model"][k]) for k in whole["model"])
    assert whole["reward_scale"] == split["reward_scale"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["icm.coef=-1"], "icm.coef must be >= 0, got -1.0"),
        (["icm.beta=2"], r"icm.beta must be in \[0, 1\], got 2.0"),
        (["icm.epochs=0"], "icm.epochs must be > 0, got 0"),
        (["algo=dqn", "rnd.coef=0", "icm.coef=1"], "algo=dqn takes no exploration bonus"),
    ],
)
def test_bad_settings_are_refused(overrides: list[str], message: str, tmp_path: Path) -> None:
    with pytest.raises((ConfigError, ValueError), match=message):
        Trainer(load_config("Corridor", [*QUIET, f"log.run_dir={tmp_path}/run", *overrides]))
