"""MA-POCA: the group's returns credit agents that left, the critic's shapes, training."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from env.player_envs import Bigger, Dropout
from stop_after import StopAfter

from entityrl.algorithms.poca.critic import GroupCritic, POCAConfig, group_returns, group_rewards
from entityrl.env.multiplayer_vec import PlayerVecEnv
from entityrl.nn.rogue_net import RogueNet
from entityrl.ragged import RaggedArray
from entityrl.training import Trainer, load_config
from entityrl.training.checkpoint import load_checkpoint
from entityrl.training.config import ConfigError
from entityrl.training.player_sampler import PlayerSampler

QUIET = ["log.tensorboard=false", "log.progress=false", "torch_threads=1"]
POCA = ["algo=poca", "rollout.num_envs=8", "rollout.steps=8", "optim.bs=64", *QUIET]


def test_an_agent_that_left_is_credited_with_the_groups_later_reward() -> None:
    # One game of two agents: agent 0 leaves on step 0 (individual reward 1), agent 1 plays
    # on; the group earns 2 on step 2, when the game ends.
    rewards = np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 2.0]], np.float32)  # per row
    shared = np.array([[0.0, 0.0], [0.0, 0.0], [2.0, 2.0]], np.float32)
    active = np.array([[True, True], [False, True], [False, True]])
    team = group_rewards(rewards, shared, active, players=2)
    # The individual reward is averaged over the agents in play; the shared one counted once.
    np.testing.assert_allclose(team[:, 0], [0.5, 0.0, 2.0])
    over = np.array([[False], [False], [True]])
    returns = group_returns(
        team, np.zeros((3, 1), np.float32), over, np.zeros(1, np.float32), 0.9, 1.0
    )
    # Agent 0's last step (step 0) is worth what the group got after it left.
    np.testing.assert_allclose(returns[:, 0], [0.5 + 0.81 * 2.0, 0.9 * 2.0, 2.0], rtol=1e-6)


def test_rollout_returns_are_the_groups_for_every_agent_and_step() -> None:
    env = PlayerVecEnv(Dropout, num_games=2, seed=0)
    torch.manual_seed(0)
    net = RogueNet(env.obs_space, env.action_space)
    rollout = PlayerSampler(env, net, steps=5).collect()
    assert rollout.group_rewards is not None and rollout.game_over is not None
    # Rows of a game share their group's reward and end together.
    shared = rollout.group_rewards.reshape(5, 2, 3)
    np.testing.assert_array_equal(shared, np.repeat(shared[..., :1], 3, axis=-1))
    over = rollout.game_over.reshape(5, 2, 3)
    np.testing.assert_array_equal(over, np.repeat(over[..., :1], 3, axis=-1))


def test_the_baseline_of_an_agent_ignores_its_own_action() -> None:
    env = PlayerVecEnv(Dropout, num_games=1, seed=0)
    obs = env.reset()
    torch.manual_seed(0)
    critic = GroupCritic(env.obs_space, env.action_space, 3, POCAConfig())
    critic.encoder.update_normalizers(obs)
    present = torch.ones(1, 3, dtype=torch.bool)

    def baselines(choices: list[int]) -> torch.Tensor:
        data = np.array(choices, np.int64).reshape(-1, 1)
        with torch.no_grad():
            return critic(obs, {"choice": RaggedArray(data, np.ones(3, np.int64))}, present)[1]

    stay, leave = baselines([0, 0, 0]), baselines([1, 0, 0])
    assert stay[0, 0].item() == pytest.approx(leave[0, 0].item(), abs=1e-6)  # its own action
    assert stay[0, 1].item() != pytest.approx(leave[0, 1].item(), abs=1e-6)  # another's


def test_a_resumed_poca_run_continues_exactly(tmp_path: Path) -> None:
    def config(run_dir: Path):  # type: ignore[no-untyped-def]
        overrides = [*POCA, "total_timesteps=1536", f"log.run_dir={run_dir}"]
        return load_config(None, overrides, check_env=False)

    Trainer(config(tmp_path / "whole"), Dropout).run()
    Trainer(config(tmp_path / "parts"), Dropout, callbacks=[StopAfter(3)]).run()
    Trainer(config(tmp_path / "parts"), Dropout, resume=tmp_path / "parts").run()
    a, b = load_checkpoint(tmp_path / "whole"), load_checkpoint(tmp_path / "parts")
    for name, value in a["poca"][0]["critic"].items():
        assert value.allclose(b["poca"][0]["critic"][name], atol=1e-6), name
    for name, value in a["model"].items():
        assert value.allclose(b["model"][name], atol=1e-6), name


def test_poca_needs_one_cooperative_group(tmp_path: Path) -> None:
    config = load_config(None, [*POCA, f"log.run_dir={tmp_path}"], check_env=False)
    with pytest.raises(ConfigError, match="algo=poca needs every player of Bigger in one group"):
        Trainer(config, Bigger)
