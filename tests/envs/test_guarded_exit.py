"""GuardedExit: the guard takes one explorer and drops the key; the key opens the exit for the
group, the explorer given up included."""

from __future__ import annotations

import numpy as np
import pytest

from entityrl.env import Action
from entityrl.env.multiplayer_vec import PlayerVecEnv
from entityrl.envs import GuardedExit, make_vec
from entityrl.envs.players import guarded_exit_baseline, move, play_game, uniform_random
from entityrl.training.match import play_group
from entityrl.training.players import RandomPlayer, ScriptedPlayer


def moves(*names: str) -> dict[str, dict[str, Action]]:
    return {str(i): move(name) for i, name in enumerate(names)}


def test_an_explorer_that_walks_into_the_guard_leaves_and_drops_the_key() -> None:
    env = GuardedExit()
    env.set_state([(1, 1), (4, 4), (0, 5)], guard=(2, 1), exit=(5, 5))
    obs = env.act(moves("right", "stay", "stay"))
    assert obs["0"].done and not obs["1"].done and not obs["2"].done
    assert obs["0"].metrics == {"escaped": 0.0, "given_up": 1.0, "explorers_left": 2.0}
    assert env.guard is None and env.key == (2, 1)
    assert "Guard" not in obs["1"].features and obs["1"].features["Key"] == [(2, 1, -2, -3)]
    assert env.group_reward() == {"explorers": 0.0}


def test_the_key_holder_on_the_exit_lets_the_group_out() -> None:
    env = GuardedExit()
    env.set_state([(1, 1), (3, 1), (0, 5)], guard=(2, 1), exit=(4, 1))
    env.act(moves("right", "stay", "stay"))  # explorer 0 slays the guard
    obs = env.act({"1": moves("left")["0"], "2": moves("stay")["0"]})  # 1 takes the key
    assert env.holder == "1" and obs["1"].features["Self"] == [(2, 1, 1)]
    assert obs["2"].features["Ally"] == [(2, 1, 2, -4, 1)]  # an ally seen to hold the key
    env.act({"1": moves("right")["0"], "2": moves("stay")["0"]})
    obs = env.act({"1": moves("right")["0"], "2": moves("stay")["0"]})
    assert env.group_reward() == {"explorers": 1.0}
    assert all(o.done for o in obs.values())
    assert obs["1"].metrics["escaped"] == 1.0 and obs["2"].metrics["escaped"] == 1.0
    assert all(o.reward == 0 for o in obs.values())  # the escape is the group's reward


def test_the_exit_stays_shut_without_the_key_and_the_time_runs_out() -> None:
    env = GuardedExit(max_steps=2)
    env.set_state([(4, 0), (0, 0), (0, 1)], guard=(3, 3), exit=(5, 0))
    obs = env.act(moves("right", "stay", "stay"))
    assert not obs["0"].done
    obs = env.act(moves("stay", "stay", "stay"))
    assert all(o.done for o in obs.values()) and env.group_reward() == {"explorers": 0.0}


def test_explorers_see_only_near_themselves() -> None:
    env = GuardedExit(sight=1)
    obs = env.set_state([(0, 0), (1, 1), (5, 5)], guard=(2, 0), exit=(0, 1))
    assert obs["0"].visible == {"Ally": [True, False], "Guard": [False], "Exit": [True]}
    assert obs["2"].visible == {"Ally": [False, False], "Guard": [False], "Exit": [False]}


def test_every_explorer_that_steps_onto_the_guard_is_lost() -> None:
    env = GuardedExit()
    env.set_state([(1, 2), (3, 2), (0, 0)], guard=(2, 2), exit=(5, 5))
    obs = env.act(moves("right", "left", "stay"))
    assert obs["0"].done and obs["1"].done and not obs["2"].done


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_explorers": 1}, "num_explorers must be >= 2"),
        ({"size": 2, "num_explorers": 3}, "cannot hold 3 explorers"),
        ({"sight": -1}, "sight must be >= 0"),
        ({"max_steps": 0}, "max_steps must be >= 1"),
    ],
)
def test_bad_arguments_are_named(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        GuardedExit(**kwargs)


def test_the_scripted_baseline_escapes_far_more_often_than_random_explorers() -> None:
    env = GuardedExit()
    random_player = uniform_random(env.obs_space(), env.action_space(), seed=0)
    rates = {}
    for name, player in {"baseline": guarded_exit_baseline, "random": random_player}.items():
        env.seed(0)
        games = [play_game(env, dict.fromkeys(env.players(), player)) for _ in range(200)]
        # The group's reward reaches every explorer, the one given up included.
        assert all(len(set(returns.values())) == 1 for returns in games)
        rates[name] = float(np.mean([returns["0"] for returns in games]))
    assert rates["baseline"] > 0.75 and rates["random"] < 0.1


def test_play_group_counts_each_game_once_with_rewards_paid_after_leaving() -> None:
    env = make_vec("GuardedExit", 8, seed=0)
    assert isinstance(env, PlayerVecEnv)
    player = ScriptedPlayer(guarded_exit_baseline, env)
    returns = play_group(player, env, 100)
    assert returns.shape == (100,) and set(returns.tolist()) <= {0.0, 1.0}
    assert returns.mean() > 0.75
    env = make_vec("GuardedExit", 8, seed=0)
    assert play_group(RandomPlayer(env.action_space, seed=0), env, 100).mean() < 0.1
    with pytest.raises(ValueError, match="games must be >= 1"):
        play_group(player, env, 0)


def test_the_batch_reports_the_group_return_for_every_row_of_an_ended_game() -> None:
    env = make_vec("GuardedExit", 4, seed=0)
    player = ScriptedPlayer(guarded_exit_baseline, env)
    obs, state = env.reset(), player.initial_state(np.arange(env.num_envs))
    for _ in range(30):
        actions, state = player.act(obs, state)
        obs = env.act(actions)
        if obs.game_over is not None and obs.game_over.any():
            ended = int(obs.game_over.sum())
            assert obs.metrics["group_return"].shape == (ended,)
            # The three rows of a game share one group return.
            assert (obs.metrics["group_return"].reshape(-1, 3).std(axis=1) == 0).all()
            return
    pytest.fail("no game ended in 30 steps")
