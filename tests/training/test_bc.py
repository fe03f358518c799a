"""Behaviour cloning: the loss, the run it makes, and learning from a scripted expert."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from entityrl.algorithms.bc.loss import bc_terms
from entityrl.cli.main import main
from entityrl.envs import make_vec
from entityrl.envs.experts import EXPERTS
from entityrl.nn.rogue_net import RogueNet
from entityrl.recording import Recording, RecordingError, record
from entityrl.training import Trainer, evaluate, load_agent, load_config, make_eval_env, train

QUIET = ["log.tensorboard=false", "log.progress=false", "torch_threads=1"]
SMALL_NET = ["net.d_model=16", "net.n_head=1", "net.n_layer=1"]


def _expert_demos(path: Path, name: str, episodes: int, **kwargs) -> Path:
    env = make_vec(name, 8, seed=0, **kwargs)
    record(EXPERTS[name](), env, path, episodes, env_id=name, env_kwargs=kwargs)
    return path


def test_the_loss_is_the_negative_log_likelihood_of_the_recorded_actions(tmp_path: Path) -> None:
    recording = Recording(_expert_demos(tmp_path / "demo.arrow", "CherryPick", 4, num_cherries=6))
    episode = next(recording.episodes())
    torch.manual_seed(0)
    net = RogueNet(recording.obs_space, recording.action_space)
    out = net.evaluate(episode.obs, episode.actions)
    terms = bc_terms(out)
    logprob = out.heads["Pick Cherry"].logprob
    assert terms.actors == {"Pick Cherry": episode.length}
    assert terms.total.item() == pytest.approx(-logprob.sum().item())
    assert terms.per_action["Pick Cherry"] == pytest.approx(-logprob.sum().item())
    # A step on the loss makes the recorded actions more likely.
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    (terms.total / episode.length).backward()
    optimizer.step()
    after = bc_terms(net.evaluate(episode.obs, episode.actions)).total.item()
    assert after < terms.total.item()


def test_masked_choices_never_enter_the_loss(tmp_path: Path) -> None:
    """PickMatchingBalls offers only unpicked balls: the recorded pick's probability is
    normalized over those, so a network scoring all balls equally gets log(1 / legal)."""
    recording = Recording(
        _expert_demos(tmp_path / "demo.arrow", "PickMatchingBalls", 2, max_balls=6)
    )
    episode = next(recording.episodes())
    net = RogueNet(recording.obs_space, recording.action_space)
    with torch.no_grad():
        for p in net.heads.parameters():
            p.zero_()  # every candidate scores the same
        out = net.evaluate(episode.obs, episode.actions)
    legal = episode.obs.action_masks["Pick Ball"].actees.lengths
    np.testing.assert_allclose(out.heads["Pick Ball"].logprob.numpy(), -np.log(legal), rtol=1e-5)


def test_bc_learns_cherry_pick_from_an_expert_and_ppo_starts_from_it(tmp_path: Path) -> None:
    """The expert's return is 1.0; the clone reaches >= 0.9 of it. PPO started from the
    clone begins with its weights and input normalization."""
    demos = _expert_demos(tmp_path / "demo.arrow", "CherryPick", 120, num_cherries=8)
    run_dir = tmp_path / "bc"
    result = train(
        "CherryPick",
        overrides=[
            *QUIET,
            *SMALL_NET,
            "env.kwargs={num_cherries: 8}",
            "algo=bc",
            f"bc.demos=[{demos}]",
            "bc.epochs=40",
            "bc.eval_episodes=0",
            "optim.bs=128",
            "optim.lr=0.003",
            f"log.run_dir={run_dir}",
        ],
    )
    assert result.checkpoint.exists()
    agent = load_agent(run_dir, seed=0)
    with make_eval_env(agent, num_envs=8, seed=1) as env:
        assert evaluate(agent, env, episodes=200).mean() >= 0.9

    config = load_config(
        "CherryPick",
        [*QUIET, *SMALL_NET, "env.kwargs={num_cherries: 8}", f"init_from={run_dir}",
         "rollout.num_envs=8", f"log.run_dir={tmp_path / 'ppo'}"],
    )  # fmt: skip
    trainer = Trainer(config)
    try:
        for name, value in agent.net.state_dict().items():
            torch.testing.assert_close(trainer.net.state_dict()[name], value, msg=name)
    finally:
        trainer.env.close()
        assert trainer.log is not None
        trainer.log.close()


def test_bc_clones_a_continuous_expert(tmp_path: Path) -> None:
    """Recorded continuous actions train a Gaussian policy by maximum likelihood; the
    expert's return is 1.0 (a random policy's is about -0.3)."""
    demos = _expert_demos(tmp_path / "demo.arrow", "ContinuousMoveToOrigin", 48)
    run_dir = tmp_path / "bc"
    train(
        "ContinuousMoveToOrigin",
        overrides=[*QUIET, "algo=bc", f"bc.demos=[{demos}]", "bc.epochs=30",
                   "bc.eval_episodes=0", "optim.bs=256", f"log.run_dir={run_dir}"],
    )  # fmt: skip
    agent = load_agent(run_dir, seed=0, deterministic=True)
    with make_eval_env(agent, num_envs=8, seed=1) as env:
        assert evaluate(agent, env, episodes=64).mean() >= 0.9


def test_the_run_logs_each_epoch_and_stops_early(tmp_path: Path, capsys) -> None:
    demos = _expert_demos(tmp_path / "demo.arrow", "CherryPick", 20, num_cherries=4)
    run_dir = tmp_path / "bc"
    args = ["bc", str(demos), *QUIET, *SMALL_NET, "bc.epochs=50", "bc.patience=1",
            "bc.eval_episodes=4", "bc.eval_envs=2", "optim.lr=0.05", f"log.run_dir={run_dir}"]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out
    assert f"continue with PPO: entityrl train CherryPick init_from={run_dir}" in out
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    assert 2 <= len(lines) < 50  # patience 1 with a large learning rate stops early
    last = json.loads(lines[-1])
    for key in (
        "loss/train_nll",
        "loss/val_nll",
        "loss/val_nll/Pick Cherry",
        "episode/episode_return",
    ):
        assert key in last
    assert (run_dir / "config.yaml").read_text().count("algo: bc") == 1
    assert main(["eval", str(run_dir), "--episodes", "4"]) == 0


def test_demonstrations_of_other_spaces_are_refused_naming_what_differs(tmp_path: Path) -> None:
    demos = _expert_demos(tmp_path / "demo.arrow", "CherryPick", 4, num_cherries=4)
    overrides = [*QUIET, "algo=bc", f"bc.demos=[{demos}]", f"log.run_dir={tmp_path / 'bc'}"]
    with pytest.raises(
        RecordingError, match="entity type 'Cherry' is missing from the environment"
    ):
        train("PickMatchingBalls", overrides=overrides)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.arrow"], "no recording at 'missing.arrow'"),
        (["bc.epochs=3"], "give at least one recording"),
    ],
)
def test_bad_input_is_a_one_line_error(
    tmp_path: Path, capsys, args: list[str], message: str
) -> None:
    assert main(["bc", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("entityrl bc: error: ") and message in err
    assert len(err.strip().splitlines()) == 1


def test_one_episode_is_too_few_to_validate(tmp_path: Path, capsys) -> None:
    demos = tmp_path / "demo.arrow"
    env = make_vec("CherryPick", 1, num_cherries=4)  # one environment: exactly one episode
    record(
        EXPERTS["CherryPick"](), env, demos, 1, env_id="CherryPick", env_kwargs={"num_cherries": 4}
    )
    assert main(["bc", str(demos), *QUIET, f"log.run_dir={tmp_path / 'bc'}"]) == 2
    assert "needs at least 2 complete episodes" in capsys.readouterr().err


def test_ppo_with_a_demonstration_loss_learns_faster(tmp_path: Path) -> None:
    """CherryPick with 8 cherries, 2,048 steps: PPO alone reaches 0.35 (measured), PPO
    with behaviour cloning on 40 expert episodes alongside (strength annealed to 0) >= 0.9."""
    demos = _expert_demos(tmp_path / "demo.arrow", "CherryPick", 40, num_cherries=8)
    run_dir = tmp_path / "ppo"
    overrides = [*QUIET, *SMALL_NET, "env.kwargs={num_cherries: 8}", "total_timesteps=2048",
                 "rollout.num_envs=32", f"bc.demos=[{demos}]", "bc.strength=1",
                 "bc.anneal_steps=2048", f"log.run_dir={run_dir}"]  # fmt: skip
    train("CherryPick", overrides=overrides)
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    strengths = [line["schedule/bc_strength"] for line in lines]
    assert strengths[0] == 1.0 and strengths == sorted(strengths, reverse=True)
    assert lines[-1]["loss/bc_nll"] < lines[0]["loss/bc_nll"]
    agent = load_agent(run_dir, seed=0)
    with make_eval_env(agent, num_envs=8, seed=1) as env:
        assert evaluate(agent, env, episodes=200).mean() >= 0.9
