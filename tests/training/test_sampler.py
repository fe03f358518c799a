"""Rollout collection: the serial sampler and the worker-process sampler."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from entityrl.envs import make_vec
from entityrl.nn import RogueNet, RogueNetConfig
from entityrl.training.config import load_config
from entityrl.training.runner import Trainer
from entityrl.training.sampler import Sampler, WorkerSampler, make_sampler

STEPS, ENVS = 6, 6


@pytest.fixture(params=["serial", "workers"])
def sampler(request: pytest.FixtureRequest):
    processes = 0 if request.param == "serial" else 3
    env = make_vec("MoveToOrigin", ENVS, seed=0, processes=processes)
    torch.manual_seed(0)
    net = RogueNet(env.obs_space, env.action_space, RogueNetConfig(d_model=16))
    made = make_sampler(env, net, STEPS, np.random.default_rng(0))
    assert isinstance(made, WorkerSampler) == (request.param == "workers")
    yield made
    env.close()


def test_rows_are_ordered_by_step_then_environment(sampler: Sampler) -> None:
    rollout = sampler.collect()
    assert rollout.num_rows == STEPS * ENVS
    # MoveToOrigin's "step" feature counts the steps of the episode: row t * ENVS + e was seen
    # by environment e at step t of its first episode.
    step = rollout.obs.features["Spaceship"].data[:, 4].reshape(STEPS, ENVS)
    np.testing.assert_array_equal(step, np.repeat(np.arange(STEPS)[:, None], ENVS, axis=1))
    assert rollout.rewards.shape == rollout.dones.shape == (STEPS, ENVS)
    # The next rollout continues the same episodes.
    again = sampler.collect()
    assert again.obs.features["Spaceship"].data[0, 4] == STEPS


def test_stored_log_probabilities_are_what_the_network_says(sampler: Sampler) -> None:
    first = sampler.collect()
    # The next rollout acts with the network as it is now (workers hold copies of it): new
    # parameters and new input statistics.
    with torch.no_grad():
        for p in sampler.net.parameters():
            p.add_(0.1 * torch.randn_like(p))
    sampler.net.update_normalizers(first.obs)
    rollout = sampler.collect()
    rollout.estimate_advantages(rollout.rewards, 0.99, 0.95)
    rows = np.arange(rollout.num_rows)
    batch = rollout.minibatch(rows, rollout.advantages)
    with torch.no_grad():
        out = sampler.net.evaluate(batch.obs, batch.actions)
    for name, head in out.heads.items():
        torch.testing.assert_close(head.logprob, batch.logprobs[name], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out.values, batch.values, atol=1e-5, rtol=1e-5)


def test_a_run_with_worker_processes_is_reproducible(tmp_path: Path) -> None:
    def run(name: str) -> list[dict]:
        config = load_config(
            "CherryPick",
            ["rollout.num_envs=8", "rollout.steps=8", "rollout.processes=2", "optim.bs=32",
             "total_timesteps=192", "log.tensorboard=false", "log.progress=false",
             f"log.run_dir={tmp_path / name}"],
        )  # fmt: skip
        Trainer(config).run()
        lines = (tmp_path / name / "metrics.jsonl").read_text().splitlines()
        return [
            {k: v for k, v in json.loads(x).items() if k != "time" and not k.startswith("perf/")}
            for x in lines
        ]

    assert run("a") == run("b")
