"""The algorithm seam: every algorithm runs in the one loop, with its checkpoints and resume."""

from __future__ import annotations

from pathlib import Path

import pytest

from entityrl.envs import make_vec
from entityrl.envs.experts import EXPERTS
from entityrl.recording import record
from entityrl.training import Callback, Trainer, load_config
from entityrl.training.algorithms import ALGORITHMS
from entityrl.training.checkpoint import load_checkpoint
from entityrl.training.config import ALGORITHMS as ALGORITHM_NAMES
from entityrl.training.config import ConfigError

QUIET = ["log.tensorboard=false", "log.progress=false", "torch_threads=1"]


def test_every_algorithm_name_of_the_config_has_an_algorithm() -> None:
    assert set(ALGORITHMS) == set(ALGORITHM_NAMES)
    for name, algorithm in ALGORITHMS.items():
        assert algorithm.name == name


class StopAfter(Callback):
    def __init__(self, iterations: int) -> None:
        self.iterations = iterations

    def on_iteration(self, trainer: Trainer, metrics: dict[str, float]) -> None:
        if trainer.iteration >= self.iterations:
            trainer.request_stop("test")


@pytest.fixture(scope="module")
def demos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("demos") / "demo.arrow"
    env = make_vec("CherryPick", 4, seed=0, num_cherries=4)
    record(
        EXPERTS["CherryPick"](), env, path, 12, env_id="CherryPick", env_kwargs={"num_cherries": 4}
    )
    return path


def _bc_config(demos: Path, run_dir: Path, *extra: str):
    return load_config(
        "CherryPick",
        [*QUIET, "env.kwargs={num_cherries: 4}", "algo=bc", f"bc.demos=[{demos}]",
         "bc.epochs=4", "bc.patience=10", "bc.eval_episodes=2", "bc.eval_envs=2",
         "net.d_model=16", "net.n_head=1", "net.n_layer=1", "optim.bs=64",
         f"log.run_dir={run_dir}", *extra],
    )  # fmt: skip


def test_a_resumed_behaviour_cloning_run_ends_like_an_uninterrupted_one(
    demos: Path, tmp_path: Path
) -> None:
    whole = Trainer(_bc_config(demos, tmp_path / "whole")).run()
    first = Trainer(_bc_config(demos, tmp_path / "parts"), callbacks=[StopAfter(2)]).run()
    assert first.stop_reason == "test" and first.steps == whole.steps // 2
    resumed = Trainer(_bc_config(demos, tmp_path / "parts"), resume=tmp_path / "parts")
    assert resumed.algorithm.epoch == 2
    rest = resumed.run()
    assert rest.steps == whole.steps
    a, b = load_checkpoint(tmp_path / "whole"), load_checkpoint(tmp_path / "parts")
    assert a["bc"][0]["best_val_nll"] == pytest.approx(b["bc"][0]["best_val_nll"], rel=1e-5)
    for name, value in a["model"].items():
        assert value.allclose(b["model"][name], atol=1e-5), name


def test_behaviour_cloning_refuses_several_processes(demos: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="algo=bc trains in one process: set world_size=1"):
        Trainer(_bc_config(demos, tmp_path / "bc", "world_size=2", "rollout.num_envs=2"))
