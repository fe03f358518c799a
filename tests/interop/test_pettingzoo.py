"""PettingZoo environments as multi-player games: agents leave, join, are cut off, take turns."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pytest

pytest.importorskip("pettingzoo")

from gymnasium import spaces
from pettingzoo import ParallelEnv

from entityrl.env import RandomPolicy
from entityrl.env.multiplayer_vec import PlayerVecEnv
from entityrl.envs import make_vec
from entityrl.interop.gym_spaces import UnsupportedSpaceError
from entityrl.interop.pettingzoo import PettingZooGame
from entityrl.ragged import RaggedArray


class LeaveEarly(ParallelEnv):  # type: ignore[misc]
    """ "quick" finishes (terminated) after one step; "slow" is cut off after three; "late"
    appears after the first step and finishes with "slow". Each agent's reward is its action;
    it observes the step count."""

    metadata = {"name": "leave_early"}  # noqa: RUF012
    possible_agents = ["quick", "slow", "late"]  # noqa: RUF012

    def __init__(self, action_size: int = 2) -> None:
        self.action_size = action_size

    def observation_space(self, agent: str) -> spaces.Space[Any]:
        return spaces.Box(0, 9, (1,), np.float32)

    def action_space(self, agent: str) -> spaces.Space[Any]:
        return spaces.Discrete(self.action_size if agent == "slow" else 2)

    def reset(self, seed: int | None = None, options: Any = None) -> tuple[dict, dict]:
        self.t = 0
        self.agents = ["quick", "slow"]
        return {a: np.zeros(1, np.float32) for a in self.agents}, {}

    def step(self, actions: dict) -> tuple[dict, ...]:
        self.t += 1
        obs = {a: np.full(1, self.t, np.float32) for a in actions}
        rewards = {a: float(v) for a, v in actions.items()}
        terminated = {a: a == "quick" for a in actions}
        truncated = {a: a != "quick" and self.t == 3 for a in actions}
        self.agents = [a for a in self.agents if not (terminated[a] or truncated[a])]
        if self.t == 1:
            self.agents.append("late")
            obs["late"] = np.full(1, self.t, np.float32)
        return obs, rewards, terminated, truncated, {a: {} for a in actions}


def _act(env: PlayerVecEnv, last, choice: int):  # type: ignore[no-untyped-def]
    lengths = last.action_masks["action"].actors.lengths
    data = np.full((int(lengths.sum()), 1), choice, np.int64)
    return env.act({"action": RaggedArray(data, lengths)})


def test_agents_are_players_that_leave_join_and_are_cut_off() -> None:
    env = make_vec("entityrl.interop.pettingzoo:PettingZooGame", 2, seed=0, validate=True,
                   env_id=LeaveEarly)  # fmt: skip
    assert isinstance(env, PlayerVecEnv) and env.players == ["quick", "slow", "late"]
    assert env.obs_space.global_features == ("obs[0]", "agent=quick", "agent=slow", "agent=late")
    obs = env.reset()
    assert obs.action_masks["action"].actors.lengths.tolist() == [1, 1, 0] * 2
    obs = _act(env, obs, 1)
    # "quick" left, "late" joined (its first observation earns nothing).
    assert obs.done.tolist() == [True, False, False] * 2
    assert obs.active.tolist() == [False, True, True] * 2
    assert obs.reward.tolist() == [1, 1, 0] * 2
    obs = _act(env, obs, 1)
    obs = _act(env, obs, 1)
    assert obs.game_over.all()
    assert obs.truncated is not None and obs.truncated.tolist() == [False, True, True] * 2
    assert obs.final is not None and obs.final.global_features[:, 0].tolist() == [3.0] * 4
    assert obs.metrics["episode_return"].tolist() == [1, 3, 2] * 2


def test_agents_must_share_their_spaces() -> None:
    with pytest.raises(UnsupportedSpaceError, match="'quick' and 'slow' have different spaces"):
        PettingZooGame(lambda: LeaveEarly(action_size=3))


def test_registry_builds_pettingzoo_modules_as_games() -> None:
    env = make_vec("pettingzoo:classic/rps-v2", 2, seed=0, max_cycles=3)
    assert env.num_envs == 4 and "agent=player_1" in env.obs_space.global_features
    with pytest.raises(KeyError, match="Did you mean classic/rps-v2"):
        make_vec("pettingzoo:classic/rps-v3", 2)


class LeaveEarlyWithTorque(LeaveEarly):
    """LeaveEarly with a Box action in [-1, 1]: each agent's reward is its torque."""

    def action_space(self, agent: str) -> spaces.Space[Any]:
        return spaces.Box(-1.0, 1.0, (1,), np.float32)

    def step(self, actions: dict) -> tuple[dict, ...]:
        return super().step({a: float(v[0]) for a, v in actions.items()})


def test_box_actions_are_continuous_and_every_agent_receives_its_own_clipped() -> None:
    env = PlayerVecEnv(lambda: PettingZooGame(LeaveEarlyWithTorque), 2, seed=0, validate=True)
    last = env.reset()
    lengths = last.action_masks["action"].actors.lengths
    torques = np.array([[0.5], [7.0], [-0.25], [-3.0]], np.float32)  # quick, slow, quick, slow
    obs = env.act({"action": RaggedArray(torques, lengths)})
    np.testing.assert_array_equal(obs.reward, [0.5, 1.0, 0.0, -0.25, -1.0, 0.0])


@pytest.mark.parametrize(
    ("game", "extra"),
    [("classic/rps-v2", ["env.kwargs.max_cycles=3"]), ("classic/tictactoe-v3", [])],
    ids=["parallel", "turns"],
)
def test_self_play_trains_on_a_pettingzoo_game(tmp_path, game: str, extra: list[str]) -> None:  # type: ignore[no-untyped-def]
    from entityrl.training import train

    result = train(
        f"pettingzoo:{game}",
        overrides=["algo=selfplay", "rollout.num_envs=8", "rollout.steps=4", "optim.bs=32",
                   "total_timesteps=256", "log.progress=false", "log.tensorboard=false",
                   "torch_threads=1", f"log.run_dir={tmp_path}", *extra],
    )  # fmt: skip
    assert result.steps == 256
    assert '"selfplay/elo"' in (tmp_path / "metrics.jsonl").read_text()


def test_turn_based_games_give_the_move_to_one_player_with_its_legal_choices() -> None:
    env = make_vec("pettingzoo:classic/tictactoe-v3", 4, seed=0, validate=True)
    assert isinstance(env, PlayerVecEnv) and env.players == ["player_1", "player_2"]
    obs = env.reset()
    # Player 1 moves first, with all 9 squares legal; player 2 waits, in play.
    assert obs.action_masks["action"].actors.lengths.tolist() == [1, 0] * 4
    assert obs.active.all()
    policy = RandomPolicy(env.action_space, seed=0)
    returns = []
    for _ in range(200):
        chosen = policy.act(obs)
        obs = env.act(chosen)
        if obs.game_over is not None and obs.game_over.any():
            returns.append(obs.metrics["episode_return"].reshape(-1, 2))
    games = np.concatenate(returns)
    assert len(games) >= 20
    # Zero-sum: a win for one is a loss for the other, a draw nothing.
    np.testing.assert_array_equal(games.sum(axis=1), 0)
    assert set(np.unique(games)) <= {-1.0, 0.0, 1.0}


def test_a_turn_based_games_masks_forbid_taken_squares() -> None:
    env = make_vec("pettingzoo:classic/tictactoe-v3", 1, seed=0)
    obs = env.reset()
    env.act({"action": RaggedArray(np.array([[4]]), np.array([1, 0]))})
    with pytest.raises(ValueError, match="the mask forbids"):
        env.act({"action": RaggedArray(np.array([[4]]), np.array([0, 1]))})
    assert obs.action_masks["action"].mask is not None


def test_mpe_tasks_of_the_mpe2_package_are_reached_by_their_names() -> None:
    pytest.importorskip("mpe2")
    for name in ("pettingzoo:simple_spread_v3", "mpe2:simple_spread_v3",
                 "pettingzoo:mpe/simple_spread-v3"):  # fmt: skip
        env = make_vec(name, 2, seed=0)
        assert env.reset().num_rows == 6  # 3 agents in each of 2 games
        env.close()
    with pytest.raises(KeyError, match="Did you mean simple_spread_v3"):
        make_vec("pettingzoo:simple_sprad_v3", 1)


def test_an_mpe_name_without_mpe2_says_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mpe2", None)  # as if not installed
    with pytest.raises(
        KeyError, match=r"moved to the mpe2 package: pip install 'entityrl\[mpe2\]'"
    ):
        make_vec("pettingzoo:simple_reference_v9", 1)
