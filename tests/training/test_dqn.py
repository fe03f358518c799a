"""DQN (algo=dqn): masks in acting and in targets, its switches, exact resume, learning."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from stop_after import StopAfter

from entityrl.algorithms.dqn.algorithm import DQN
from entityrl.algorithms.dqn.q_values import RowQ
from entityrl.env.vec_obs import VecCategoricalMask, VecObs
from entityrl.training import Trainer, evaluate, load_agent, load_config, make_eval_env
from entityrl.training.checkpoint import load_checkpoint
from entityrl.training.config import CONFIG_DIR, ConfigError

QUIET = ["algo=dqn", "log.tensorboard=false", "log.progress=false", "torch_threads=1"]
TINY = [*QUIET, "rollout.num_envs=4", "net.d_model=16", "net.n_head=1", "net.n_layer=1",
        "dqn.learning_starts=16", "dqn.batch_size=16", "total_timesteps=96"]  # fmt: skip


def dqn(tmp_path: Path, env_id: str = "MineSweeper", *overrides: str) -> DQN:
    config = load_config(env_id, [*TINY, f"log.run_dir={tmp_path}", *overrides])
    algorithm = Trainer(config).algorithm
    assert isinstance(algorithm, DQN)
    return algorithm


def scramble(algorithm: DQN) -> None:
    """Large random head weights: unmasked argmaxes land on illegal choices often."""
    with torch.no_grad():
        for parameter in algorithm.ctx.net.heads.parameters():
            parameter.normal_(0, 10.0)


def legal_choices(obs: VecObs, name: str) -> list[set[int]]:
    """Per actor, the legal choices of ``name`` (categorical) or candidate positions."""
    mask = obs.action_masks[name]
    if isinstance(mask, VecCategoricalMask):
        return [set(np.flatnonzero(m).tolist()) for m in mask.mask.data]
    actors = mask.actors.lengths
    actees = np.repeat(mask.actees.lengths, actors)  # candidates of each actor's row
    return [set(range(n)) for n in actees]


@pytest.mark.parametrize("epsilon", [0.0, 1.0])
def test_every_action_taken_is_legal(tmp_path: Path, epsilon: float) -> None:
    algorithm = dqn(tmp_path, "MineSweeper", f"dqn.epsilon_start={epsilon}")
    scramble(algorithm)
    env, obs, illegal_argmax = algorithm.ctx.env, algorithm.obs, 0
    for _ in range(30):
        actions = algorithm.act(obs, 0)
        q = algorithm.ctx.net.choice_scores(obs)["Move"].scores.argmax(1).tolist()
        legal = legal_choices(obs, "Move")
        illegal_argmax += sum(best not in ok for best, ok in zip(q, legal, strict=True))
        for name in actions:
            chosen = actions[name].data[:, 0].tolist()
            allowed = legal_choices(obs, name)
            assert all(c in ok for c, ok in zip(chosen, allowed, strict=True) if ok), name
        obs = env.act(actions)
    assert illegal_argmax > 10  # the masks, not the scores, kept the choices legal


def test_targets_bootstrap_from_the_best_legal_choices(tmp_path: Path) -> None:
    algorithm = dqn(tmp_path, "MineSweeper", "dqn.double_q=false", "dqn.n_step=1")
    scramble(algorithm)
    algorithm.target.load_state_dict(algorithm.ctx.net.state_dict())
    for _ in range(8):
        algorithm.iterate(0, 1e-3)
    batch = algorithm.replay.sample(32, np.random.default_rng(0))
    targets = algorithm.targets(batch)
    scores = algorithm.target.choice_scores(batch.next_obs)
    expected = batch.rewards.astype(np.float64).copy()
    for name, s in scores.items():
        rows = np.repeat(
            np.arange(batch.num_rows), batch.next_obs.action_masks[name].actors.lengths
        )
        for actor, ok in enumerate(legal_choices(batch.next_obs, name)):
            if ok:  # an actor without a legal choice adds nothing
                best = max(float(s.scores[actor, c]) for c in ok)
                expected[rows[actor]] += batch.discount[rows[actor]] * best
    torch.testing.assert_close(targets, torch.tensor(expected, dtype=torch.float32))


def test_double_q_values_the_networks_choice_with_the_target_network(tmp_path: Path) -> None:
    algorithm = dqn(tmp_path, "CherryPick")
    for _ in range(8):
        algorithm.iterate(0, 1e-3)
    scramble(algorithm)  # the network now differs from its target
    batch = algorithm.replay.sample(32, np.random.default_rng(0))
    following = RowQ.of(algorithm.target, batch.next_obs, False)
    chooser = RowQ.of(algorithm.ctx.net, batch.next_obs, False)
    name = "Pick Cherry"
    value = torch.from_numpy(batch.rewards) + torch.from_numpy(batch.discount) * (
        following.of_choices({name: chooser.greedy(name)})
    )
    torch.testing.assert_close(algorithm.targets(batch), value)
    single = dataclasses.replace(algorithm.settings, double_q=False)
    algorithm.ctx.config.dqn = single
    plain = following.of_choices({name: following.greedy(name)})
    value = torch.from_numpy(batch.rewards) + torch.from_numpy(batch.discount) * plain
    torch.testing.assert_close(algorithm.targets(batch), value)
    assert not torch.allclose(plain, following.of_choices({name: chooser.greedy(name)}))


def test_dueling_adds_the_rows_value_to_centered_advantages(tmp_path: Path) -> None:
    algorithm = dqn(tmp_path, "MineSweeper", "dqn.dueling=true")
    scramble(algorithm)
    obs = algorithm.obs
    q = RowQ.of(algorithm.ctx.net, obs, True)
    plain = RowQ.of(algorithm.ctx.net, obs, False)
    values = algorithm.ctx.net.values(obs)
    greedy = {name: plain.greedy(name) for name in q.scores}
    assert all(torch.equal(q.greedy(n), g) for n, g in greedy.items())  # V moves no argmax
    expected = values.clone()
    for name, s in plain.scores.items():
        rows = np.repeat(np.arange(obs.num_rows), obs.action_masks[name].actors.lengths)
        for actor, ok in enumerate(legal_choices(obs, name)):
            if ok:
                advantages = [float(s.scores[actor, c]) for c in sorted(ok)]
                best = float(s.scores[actor, int(greedy[name][actor])])
                expected[rows[actor]] += best - float(np.mean(advantages))
    torch.testing.assert_close(q.of_choices(greedy).detach(), expected, atol=1e-4, rtol=1e-4)


def test_n_step_and_prioritized_replay_reach_the_buffer(tmp_path: Path) -> None:
    algorithm = dqn(tmp_path, "CherryPick", "dqn.n_step=3", "dqn.prioritized=true")
    replay = algorithm.replay
    assert replay.n_step == 3 and replay.prioritized
    for _ in range(8):
        algorithm.iterate(0, 1e-3)
    # The updates set the sampled transitions' priorities from their errors.
    held = replay._priority[: len(replay)]
    assert len(np.unique(held)) > 5
    batch = replay.sample(16, np.random.default_rng(0), beta=0.4)
    # Weights are relative to the least likely transition held, which has weight 1.
    assert 0 < batch.weights.min() < batch.weights.max() <= 1
    allowed = np.array([0.0, 0.99, 0.99**2, 0.99**3])  # 3 steps, fewer at an episode's end
    assert np.isclose(batch.discount[:, None], allowed).any(1).all()
    assert np.isclose(batch.discount, 0.99**3).any()


def test_continuous_actions_are_refused_naming_sac(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="are continuous: train them with algo=sac"):
        dqn(tmp_path, "ContinuousMoveToOrigin")
    with pytest.raises(ConfigError, match=re.escape("evaluate with eval.deterministic=true")):
        dqn(tmp_path, "MineSweeper", "eval.interval=1000")


def test_a_resumed_run_ends_with_the_weights_of_an_uninterrupted_one(tmp_path: Path) -> None:
    switches = ["dqn.n_step=2", "dqn.prioritized=true", "dqn.dueling=true",
                "dqn.target_update_interval=24"]  # fmt: skip

    def config(name: str):
        return load_config("CherryPick", [*TINY, *switches, f"log.run_dir={tmp_path / name}"])

    whole = Trainer(config("whole")).run()
    Trainer(config("parts"), callbacks=[StopAfter(10)]).run()
    rest = Trainer(config("parts"), resume=tmp_path / "parts").run()
    assert rest.steps == whole.steps == 96
    a, b = load_checkpoint(whole.checkpoint), load_checkpoint(rest.checkpoint)
    for key, value in a["model"].items():
        assert torch.equal(value, b["model"][key]), key
    for key, value in a["owned"][0]["target"].items():
        assert torch.equal(value, b["owned"][0]["target"][key]), key
    assert torch.equal(a["owned"][0]["replay"]["priority"], b["owned"][0]["replay"]["priority"])


def test_shipped_dqn_configs_are_found_by_their_environment_and_algo() -> None:
    files = sorted((CONFIG_DIR / "dqn").glob("*.yaml"))
    assert files
    for path in files:
        config = load_config(path)
        assert config.algo == "dqn", path.name
        found = load_config(config.env.id, ["algo=dqn"])
        assert found == config, f"{path.name}: algo=dqn on {config.env.id} loads another file"
    # PPO keeps its own file; an algorithm without a file of its own gets the environment's.
    assert load_config("gymnasium:CartPole-v1").algo == "ppo"
    assert load_config("MineSweeper", ["algo=dqn"]).total_timesteps == 153600


def test_it_learns_cherry_pick(tmp_path: Path) -> None:
    """Seed 1 of the shipped CherryPick DQN config, shortened."""
    config = load_config(
        "CherryPick", [*QUIET, "seed=1", "total_timesteps=8192", f"log.run_dir={tmp_path}"]
    )
    Trainer(config).run()
    agent = load_agent(tmp_path, seed=0, deterministic=True)
    with make_eval_env(agent, num_envs=16, seed=12345) as env:
        result = evaluate(agent, env, episodes=100)
    assert result.mean() >= 0.9
