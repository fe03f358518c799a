"""RL^2 learns within a trial: PPO with memory on trials of HiddenArm (entityrl/configs/
trials.yaml) earns more in the last episode of a held-out trial than in the first."""

from __future__ import annotations

from pathlib import Path

from entityrl.envs import make_vec
from entityrl.training import evaluate, load_agent, train

QUIET = ["log.tensorboard=false", "log.progress=false", "torch_threads=1", "seed=1"]


def test_rl2_finds_the_paying_arm_of_held_out_tasks_within_a_trial(tmp_path: Path) -> None:
    train("Trials", overrides=[*QUIET, f"log.run_dir={tmp_path}"])
    agent = load_agent(tmp_path, seed=0)
    kwargs = {**agent.config.env.kwargs, "split": "test"}
    with make_vec("Trials", 32, seed=123, **kwargs) as env:
        played = evaluate(agent, env, 256)
    returns = [played.mean(f"episode{i}/return") for i in range(1, 5)]
    # Three arms, one pays: a first pull expects 1/3 whatever the policy; after two misses
    # the third pull knows the arm. 256 trials: a standard error of about 0.03.
    assert returns[0] < 0.45
    assert returns[3] > 0.9
    assert returns[3] - returns[0] > 0.4
