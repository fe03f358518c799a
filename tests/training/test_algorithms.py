"""The algorithm seam: every algorithm runs in the one loop, with its checkpoints and resume."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from stop_after import StopAfter

from entityrl.algorithms import lookup, names
from entityrl.envs import make_vec
from entityrl.envs.experts import EXPERTS
from entityrl.recording import record
from entityrl.training import Trainer, evaluate, load_agent, load_config, make_eval_env
from entityrl.training.checkpoint import load_checkpoint
from entityrl.training.config import ConfigError
from entityrl.training.demonstrations import join

QUIET = ["log.tensorboard=false", "log.progress=false", "torch_threads=1"]


def test_every_built_in_algorithm_name_has_an_algorithm_with_its_settings() -> None:
    assert names() == ["ppo", "bc", "gail", "dac", "selfplay", "poca", "dqn", "sac"]
    for name in names():
        algorithm = lookup(name)
        assert algorithm.name == name
        # A section that is not a field of TrainConfig joins the schema when algo names it.
        config = load_config(None, [*QUIET, f"algo={name}", "bc.demos=[demo.arrow]"])
        assert isinstance(getattr(config, name), algorithm.Settings)


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


def _gail_config(demos: Path, run_dir: Path, *extra: str):
    return load_config(
        "CherryPick",
        [*QUIET, "env.kwargs={num_cherries: 4}", "algo=gail", f"bc.demos=[{demos}]",
         "rollout.num_envs=16", "net.d_model=16", "net.n_head=1", "net.n_layer=1",
         "gail.batches=2", "gail.bs=32", "total_timesteps=1024", f"log.run_dir={run_dir}",
         *extra],
    )  # fmt: skip


def test_gail_trains_in_two_processes_with_one_discriminator(demos: Path, tmp_path: Path) -> None:
    """Each process learns its discriminator from its own rollout and expert rows; their
    gradients are averaged, so the discriminators stay identical (the loop checks the
    policies and discriminators of the processes after every iteration and raises if they
    differ)."""
    from entityrl.training.runner import train

    config = _gail_config(demos, tmp_path, "world_size=2", "log.checkpoint_interval=512")
    result = train(config=config)
    assert result.steps == 1024
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert all(0 <= row["loss/gail_expert_accuracy"] <= 1 for row in rows)
    with pytest.raises(ConfigError, match=r"gail.bs \(33\) must be a multiple of world_size"):
        Trainer(_gail_config(demos, tmp_path / "odd", "world_size=2", "gail.bs=33"))


def test_the_discriminator_reads_the_value_and_the_actors_log_probabilities(demos: Path) -> None:
    from entityrl.algorithms.common.optimizer import OptimConfig
    from entityrl.algorithms.gail.discriminator import Discriminator, GAILConfig, Steps
    from entityrl.recording import Recording

    recording = Recording(demos)
    episode = next(recording.episodes())
    discriminator = Discriminator(
        recording.obs_space, recording.action_space, GAILConfig(), "gail", OptimConfig(),
        torch.device("cpu"),
    )  # fmt: skip
    with torch.no_grad():
        z = discriminator.embedded(episode.obs, episode.actions)
        out = discriminator.net.evaluate(episode.obs, episode.actions)
        logits = discriminator.logits(z)
    # CherryPick: one pick per step, so one actor per row.
    expected = torch.stack(
        [torch.zeros_like(out.values), out.values, out.heads["Pick Cherry"].logprob], dim=1
    )
    torch.testing.assert_close(z, expected)
    # The reward is the logit (by default), measured from a reference (no step ends here).
    steps = Steps(episode.obs, episode.actions, np.zeros(episode.obs.num_rows, np.bool_))
    rewards = discriminator.rewards(steps, 0.99, 0.25)
    np.testing.assert_allclose(rewards, logits.numpy() - 0.25, rtol=1e-5, atol=1e-6)


def test_the_discriminator_learns_to_tell_the_expert_from_a_random_policy(demos: Path) -> None:
    from entityrl.algorithms.common.optimizer import OptimConfig
    from entityrl.algorithms.gail.discriminator import Discriminator, GAILConfig, Steps
    from entityrl.env.random_policy import RandomPolicy
    from entityrl.recording import read_recordings

    _, episodes = read_recordings([str(demos)])
    env = make_vec("CherryPick", 4, seed=1, num_cherries=4)
    expert = join(episodes, env)
    random_demos = demos.parent / "random.arrow"
    if not random_demos.exists():
        record(RandomPolicy(env.action_space, seed=0), env, random_demos, 12, env_id="CherryPick")
    _, random_episodes = read_recordings([str(random_demos)])
    policy = join(random_episodes, make_vec("CherryPick", 4, seed=1, num_cherries=4))
    torch.manual_seed(0)
    config = GAILConfig(lr=0.003)
    discriminator = Discriminator(
        env.obs_space, env.action_space, config, "gail", OptimConfig(), torch.device("cpu")
    )
    discriminator.net.update_normalizers(expert.obs)
    no_ending = np.zeros(policy.num_rows, np.bool_)
    policy_steps = Steps(policy.obs, policy.actions, no_ending)
    expert_steps = Steps(expert.obs, expert.actions, np.zeros(expert.num_rows, np.bool_))
    before = discriminator.rewards(expert_steps, 0.99, 0.0).mean()
    stats = discriminator.update(
        policy_steps, expert_steps, np.random.default_rng(0), batches=60, bs=32, gamma=0.99
    )
    assert stats["expert_accuracy"] > 0.6
    after = discriminator.rewards(expert_steps, 0.99, 0.0).mean()
    assert after > before
    assert after > discriminator.rewards(policy_steps, 0.99, 0.0).mean()


@pytest.mark.parametrize(
    "extra",
    [
        [],
        ["gail.structured=true"],
        # Select-entity picks: q' over each actor's candidates.
        ["gail.structured=true", "gail.entropy=0.5", "gail.sharpen_q=true", "gail.n_head=2"],
    ],
)
def test_a_resumed_gail_run_continues_exactly(
    demos: Path, tmp_path: Path, extra: list[str]
) -> None:
    Trainer(_gail_config(demos, tmp_path / "whole", *extra)).run()
    Trainer(_gail_config(demos, tmp_path / "parts", *extra), callbacks=[StopAfter(2)]).run()
    Trainer(_gail_config(demos, tmp_path / "parts", *extra), resume=tmp_path / "parts").run()
    a, b = load_checkpoint(tmp_path / "whole"), load_checkpoint(tmp_path / "parts")
    assert a["step"] == b["step"] == 1024
    for part in ("model",):
        for name, value in a[part].items():
            torch.testing.assert_close(value, b[part][name], msg=name)
    for name, value in a["gail"][0]["model"].items():
        torch.testing.assert_close(value, b["gail"][0]["model"][name], msg=name)


def test_gail_without_recordings_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"bc\.demos is empty: GAIL needs recordings"):
        load_config("CherryPick", ["algo=gail"])


def test_gail_without_the_environment_reward_learns_to_pick_like_the_expert(
    demos: Path, tmp_path: Path
) -> None:
    """The expert's return is 1.0 and a random policy's far below; GAIL never sees a reward
    of the environment (gail.env_reward=0) and reaches 0.8 of the expert's."""
    from entityrl.env.random_policy import RandomPolicy

    config = _gail_config(demos, tmp_path / "gail", "total_timesteps=8192", "rollout.num_envs=32")
    Trainer(config).run()
    agent = load_agent(tmp_path / "gail", seed=0)
    with make_eval_env(agent, num_envs=8, seed=12345) as env:
        assert evaluate(agent, env, episodes=200).mean() >= 0.8
    with make_vec("CherryPick", 8, seed=12345, num_cherries=4) as env:
        assert evaluate(RandomPolicy(env.action_space, seed=0), env, 200).mean() < 0.5


def test_gail_with_recordings_of_other_spaces_is_a_one_line_error(
    demos: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from entityrl.cli.main import main

    args = ["train", "PickMatchingBalls", "algo=gail", f"bc.demos=[{demos}]", *QUIET,
            f"log.run_dir={tmp_path / 'run'}"]  # fmt: skip
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("entityrl train: error: bc.demos (for algo=gail): ")
    assert "entity type 'Cherry' is missing from the environment" in err
    assert len(err.strip().splitlines()) == 1
