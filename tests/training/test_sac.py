"""Soft actor-critic (``algo=sac``): masks, entropy tuning, bounds of continuous actions, the
saved policy, mixed action spaces, exact resume, and learning with a fixed seed."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from stop_after import StopAfter

from entityrl.algorithms.sac.algorithm import SAC
from entityrl.algorithms.sac.critic import encode
from entityrl.algorithms.sac.policy import EDGE, masked_policy, sample_squashed
from entityrl.nn.heads import ChoiceScores
from entityrl.training import evaluate, load_agent, make_eval_env
from entityrl.training.checkpoint import load_checkpoint
from entityrl.training.config import ConfigError, load_config
from entityrl.training.runner import Trainer

QUIET = ["algo=sac", "log.tensorboard=false", "log.progress=false", "torch_threads=1"]
TINY = [*QUIET, "rollout.num_envs=4", "net.d_model=16", "net.n_head=1", "net.n_layer=1",
        "sac.learning_starts=16", "sac.batch_size=16", "sac.critic_hidden=16",
        "total_timesteps=96"]  # fmt: skip


def trainer(tmp_path: Path, source: str | None, *overrides: str) -> Trainer:
    config = load_config(
        source, [*TINY, f"log.run_dir={tmp_path}", *overrides], check_env=source is not None
    )
    return Trainer(config)


def last_metrics(run_dir: Path) -> dict[str, float]:
    """The metrics of the run's last iteration."""
    return json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])


def sac(run: Trainer) -> SAC:
    assert isinstance(run.algorithm, SAC)
    return run.algorithm


def test_illegal_choices_get_no_probability_and_no_entropy() -> None:
    logits = torch.tensor([[1.0, 5.0, 2.0], [0.0, 0.0, 0.0], [3.0, 1.0, 9.0]])
    legal = torch.tensor([[True, False, True], [False, False, False], [False, False, True]])
    policy = masked_policy(ChoiceScores(logits, legal))
    assert policy.probs[0, 1] == 0 and policy.probs[0].sum().item() == pytest.approx(1.0)
    expected = torch.softmax(torch.tensor([1.0, 2.0]), 0)
    assert torch.allclose(policy.probs[0, [0, 2]], expected)
    assert policy.entropy[0].item() == pytest.approx(-(expected * expected.log()).sum().item())
    # No legal choice: nothing anywhere. One legal choice: certain, no entropy.
    assert policy.probs[1].abs().sum() == 0 and policy.entropy[1] == 0
    assert policy.probs[2].tolist() == [0.0, 0.0, 1.0] and policy.entropy[2] == 0
    huge = torch.tensor([[1e3, -1e3, 0.0]])
    values = torch.tensor([[1.0, 1e30, 2.0]])
    assert policy.expected(values)[2].item() == 2.0  # an illegal choice's value never counts
    finite = masked_policy(ChoiceScores(huge, torch.tensor([[False, True, True]])))
    assert torch.isfinite(finite.logprobs).all() and torch.isfinite(finite.entropy).all()


def test_actions_and_learning_respect_masks(tmp_path: Path) -> None:
    """Count masks half of the wrong answers: SAC never takes one, and its updates see only
    legal choices (every stored action is legal, every loss finite)."""
    run = trainer(tmp_path, "Count", "total_timesteps=160")
    algorithm = sac(run)
    for _ in range(20):
        obs = algorithm.obs
        actions = algorithm.act(obs, 0)["count"]
        legal = obs.action_masks["count"].mask
        assert legal is not None
        assert legal.data[np.arange(len(actions.data)), actions.data[:, 0]].all()
        algorithm.obs = run.env.act({"count": actions})
    metrics = last_metrics(run.run().run_dir)
    assert math.isfinite(metrics["loss/critic"]) and math.isfinite(metrics["loss/actor"])


def test_the_temperature_moves_toward_the_target_entropy(tmp_path: Path) -> None:
    """A near-uniform policy is above a target of half its largest entropy: alpha falls. A
    gap below the target makes it rise."""
    run = trainer(tmp_path, "CherryPick", "sac.initial_alpha=0.5", "sac.alpha_lr=0.01")
    algorithm = sac(run)
    run.run()
    assert algorithm.log_alpha["Pick Cherry"].exp().item() < 0.5
    fresh = sac(trainer(tmp_path / "fresh", "CherryPick", "sac.initial_alpha=0.5"))
    for _ in range(3):
        fresh._tune_temperatures({"Pick Cherry": torch.tensor([-1.0, -0.5])}, 0.01)
    assert fresh.log_alpha["Pick Cherry"].exp().item() > 0.5


def test_continuous_actions_stay_within_bounds_and_the_saved_policy_takes_the_mean(
    tmp_path: Path,
) -> None:
    run = trainer(tmp_path, "ContinuousMoveToOrigin", "total_timesteps=64")
    result = run.run()
    algorithm = sac(run)
    space = run.net.action_space["thrust"]
    low, high = np.array(space.low), np.array(space.high)
    for _ in range(5):
        values = algorithm.act(algorithm.obs, 0)["thrust"].data
        assert ((values >= low) & (values <= high)).all() and values.std() > 0
        algorithm.obs = run.env.act(algorithm.act(algorithm.obs, 0))
    # Squashed samples reach toward the bounds without passing them.
    far = sample_squashed(torch.full((1000, 2), 0.999), torch.zeros(1000, 2), None).actions
    assert far.abs().max() <= 1 and far.mean() > 0.9
    # What eval/play/export load acts as SAC's deterministic policy: the squashed mean.
    agent = load_agent(result.run_dir, seed=0)
    obs = algorithm.obs
    sampled = agent.net.act(obs).heads["thrust"].actions.numpy()
    with torch.no_grad():
        units = algorithm._mean_action(encode(algorithm.ctx.net, obs), "thrust")
    centre, half = (high + low) / 2, (high - low) / 2
    mean = centre + half * units.clamp(-1 + EDGE, 1 - EDGE).numpy()
    assert np.allclose(np.clip(sampled, low, high), mean, atol=0.01 * half.max())


def test_mixed_action_spaces_train(tmp_path: Path) -> None:
    """Every kind of action at once (continuous, categorical, select-entity, global ones):
    one temperature per action, every loss finite."""
    run = trainer(tmp_path, None, "env.id=mixed_actions:Mixed", "net.precision=float32")
    metrics = last_metrics(run.run().run_dir)
    alphas = {key.rpartition("/")[2] for key in metrics if key.startswith("sac/alpha/")}
    assert alphas == {"move", "grip", "pick", "speed", "mode"}
    assert all(math.isfinite(v) for k, v in metrics.items() if k.startswith("loss/"))


def test_n_step_returns_and_prioritized_replay_train(tmp_path: Path) -> None:
    run = trainer(tmp_path, "CherryPick", "sac.n_step=3", "sac.prioritized=true")
    metrics = last_metrics(run.run().run_dir)
    assert all(math.isfinite(v) for k, v in metrics.items() if k.startswith("loss/"))


def test_a_resumed_run_ends_like_an_uninterrupted_one(tmp_path: Path) -> None:
    def config(name: str, source: str):
        return load_config(source, [*TINY, f"log.run_dir={tmp_path / name}"])

    for source in ("CherryPick", "ContinuousMoveToOrigin"):
        whole = Trainer(config(f"whole-{source}", source)).run()
        Trainer(config(f"parts-{source}", source), callbacks=[StopAfter(10)]).run()
        resumed = Trainer(config(f"parts-{source}", source), resume=tmp_path / f"parts-{source}")
        assert resumed.step == 40
        rest = resumed.run()
        assert rest.steps == whole.steps == 96
        a, b = load_checkpoint(whole.checkpoint), load_checkpoint(rest.checkpoint)
        for key, value in a["model"].items():
            assert torch.equal(value, b["model"][key]), (source, key)
        for part in ("critic", "target", "log_alpha", "std_heads"):
            mine, theirs = a["owned"][0][part], b["owned"][0][part]
            assert all(torch.equal(v, theirs[k]) for k, v in mine.items()), (source, part)


def test_settings_are_checked_with_their_names() -> None:
    with pytest.raises(ConfigError, match=re.escape("sac.tau must be in (0, 1], got 0.0")):
        load_config("CherryPick", [*QUIET, "sac.tau=0"])
    with pytest.raises(ConfigError, match=re.escape("sac.target_entropy_scale must be in [0, 1)")):
        load_config("CherryPick", [*QUIET, "sac.target_entropy_scale=1.2"])
    with pytest.raises(ConfigError, match=re.escape("sac.critic_lr must be > 0, got -1")):
        load_config("CherryPick", [*QUIET, "sac.critic_lr=-1"])


def test_it_learns_count_with_a_fixed_seed(tmp_path: Path) -> None:
    """Count (one step per episode, masked answers): a random legal answer scores about 0.3;
    SAC reaches above 0.9 in 6,000 steps (about 10 s)."""
    run = trainer(
        tmp_path, "Count", "total_timesteps=6000", "seed=1", "rollout.num_envs=16",
        "sac.learning_starts=256", "sac.batch_size=64", "sac.updates=3",
        "sac.actor_lr=0.003", "sac.critic_lr=0.003", "optim.anneal_lr=false",
    )  # fmt: skip
    run.run()
    agent = load_agent(tmp_path, seed=0, deterministic=True)
    with make_eval_env(agent, num_envs=16, seed=12345) as env:
        assert evaluate(agent, env, 400).mean() > 0.9
