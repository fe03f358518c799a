"""algo=dac: off-policy adversarial imitation on the replay buffer (issue #30)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from entityrl.envs import make_vec
from entityrl.envs.experts import CherryPickExpert, ContinuousMoveToOriginExpert
from entityrl.recording import record
from entityrl.training import Trainer, load_config
from entityrl.training.checkpoint import load_checkpoint
from entityrl.training.config import ConfigError, describe

QUIET = ["log.tensorboard=false", "log.progress=false", "torch_threads=1"]


@pytest.fixture(scope="module")
def demos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("dac") / "expert.arrow"
    env = make_vec("CherryPick", 4, seed=0, num_cherries=4)
    record(CherryPickExpert(), env, path, 16, env_id="CherryPick", env_kwargs={"num_cherries": 4})
    return path


def _config(demos: Path, run_dir: Path, *extra: str):
    return load_config(
        "CherryPick",
        [*QUIET, "env.kwargs={num_cherries: 4}", "algo=dac", f"bc.demos=[{demos}]",
         "rollout.num_envs=8", "net.d_model=16", "net.n_head=1", "net.n_layer=1",
         "dac.learning_starts=32", "dac.batch_size=32", "total_timesteps=256",
         f"log.run_dir={run_dir}", *extra],
    )  # fmt: skip


@pytest.mark.parametrize("extra", [[], ["dac.structured=true"]])
def test_dac_trains_and_logs_its_discriminator_critic_and_policy(
    demos: Path, tmp_path: Path, extra: list[str]
) -> None:
    result = Trainer(_config(demos, tmp_path / "run", *extra)).run()
    assert result.steps == 256
    last = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[-1])
    for key in ("loss/dac_expert_accuracy", "loss/dac_policy_accuracy", "loss/dac_grad_penalty",
                "loss/dac_absorbing_reward", "loss/critic_loss", "loss/actor_loss"):  # fmt: skip
        assert key in last, key
    owned = load_checkpoint(tmp_path / "run")["owned"][0]
    assert {"replay", "discriminator", "critic", "critic_optimizer", "target"} <= set(owned)


def test_a_resumed_dac_run_continues_exactly(demos: Path, tmp_path: Path) -> None:
    from stop_after import StopAfter

    Trainer(_config(demos, tmp_path / "whole")).run()
    Trainer(_config(demos, tmp_path / "parts"), callbacks=[StopAfter(10)]).run()
    Trainer(_config(demos, tmp_path / "parts"), resume=tmp_path / "parts").run()
    a, b = load_checkpoint(tmp_path / "whole"), load_checkpoint(tmp_path / "parts")
    for name, value in a["model"].items():
        torch.testing.assert_close(value, b["model"][name], msg=name)


def test_its_settings_are_a_config_section(demos: Path) -> None:
    config = load_config("CherryPick", ["algo=dac", f"bc.demos=[{demos}]", "dac.alpha=0.1"])
    text = describe(config)
    assert "dac.alpha=0.1" in text and "dac.grad_penalty=10.0" in text
    assert "dac.buffer_size=100000" in text
    with pytest.raises(ConfigError, match=r"bc\.demos is empty: DAC learns its reward"):
        Trainer(load_config("CherryPick", [*QUIET, "algo=dac"]))


def test_dac_refuses_continuous_actions(tmp_path: Path) -> None:
    path = tmp_path / "ship.arrow"
    record(ContinuousMoveToOriginExpert(), make_vec("ContinuousMoveToOrigin", 2, seed=0), path, 2)
    config = load_config(
        "ContinuousMoveToOrigin", [*QUIET, "algo=dac", f"bc.demos=[{path}]", "rollout.num_envs=2"]
    )
    with pytest.raises(
        ConfigError, match=r"actions \['thrust'\] are continuous: train them with algo=gail"
    ):
        Trainer(config)
