"""The multi-player API: one row per (game, player), players leaving, games ending, checks."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from player_envs import Dropout, Reinforcements

from entityrl.env import CategoricalAction, EnvValidationError, Observation, plain_state
from entityrl.env.multiplayer_validator import ValidatingMultiPlayer
from entityrl.env.multiplayer_vec import PlayerVecEnv
from entityrl.ragged import RaggedArray

STAY, LEAVE = 0, 1


def choices(*values: int) -> dict[str, RaggedArray]:
    """One choice per row, for rows that act (a row without actors gets none)."""
    return {
        "choice": RaggedArray(
            np.array(values, np.int64).reshape(-1, 1), np.ones(len(values), np.int64)
        )
    }


def act(env: PlayerVecEnv, per_row: dict[int, int]) -> object:
    """Step with ``per_row`` choices for the rows in play (others: no actors)."""
    lengths = np.zeros(env.num_envs, np.int64)
    lengths[list(per_row)] = 1
    data = np.array([per_row[r] for r in sorted(per_row)], np.int64).reshape(-1, 1)
    return env.act({"choice": RaggedArray(data, lengths)})


def test_rows_are_game_major_seats_and_actions_reach_their_player() -> None:
    env = PlayerVecEnv(Dropout, num_games=2, seed=0)
    obs = env.reset()
    assert env.num_envs == 6 and env.players == ["a", "b", "c"]
    assert obs.active is not None and obs.active.all()
    seats = obs.features["Self"].data[:, 1]
    np.testing.assert_array_equal(seats, [0, 1, 2, 0, 1, 2])
    act(env, {0: STAY, 1: LEAVE, 2: STAY, 3: LEAVE, 4: STAY, 5: STAY})
    assert env.games[0].log == [{"a": 0, "b": 1, "c": 0}]
    assert env.games[1].log == [{"a": 1, "b": 0, "c": 0}]


def test_a_player_that_leaves_ends_its_row_but_not_the_game() -> None:
    env = PlayerVecEnv(Dropout, num_games=1)
    env.reset()
    obs = act(env, {0: LEAVE, 1: STAY, 2: STAY})
    # Its own reward 1 plus the group's 0.5 (others stay); the others get the group's.
    np.testing.assert_allclose(obs.reward, [1.5, 0.5, 0.5])
    np.testing.assert_array_equal(obs.done, [True, False, False])
    np.testing.assert_array_equal(obs.active, [False, True, True])
    assert obs.game_over is not None and not obs.game_over.any()
    assert obs.action_masks["choice"].actors.lengths.tolist() == [0, 1, 1]
    # The inactive row gets no reward, but still sees its group's.
    obs = act(env, {1: STAY, 2: LEAVE})
    np.testing.assert_allclose(obs.reward, [0.0, 0.5, 1.5])
    np.testing.assert_allclose(obs.group_reward, [0.5, 0.5, 0.5])
    assert not obs.done[0]
    assert env.games[0].log[-1] == {"b": 0, "c": 1}


def test_a_game_ends_when_every_player_has_left_and_reports_each_player() -> None:
    env = PlayerVecEnv(Dropout, num_games=2)
    env.reset()
    act(env, {0: LEAVE, 1: STAY, 2: STAY, 3: STAY, 4: STAY, 5: STAY})
    obs = act(env, {1: LEAVE, 2: LEAVE, 3: STAY, 4: STAY, 5: STAY})
    np.testing.assert_array_equal(obs.game_over, [True, True, True, False, False, False])
    # The new game's rows are all in play again; the ended rows report in row order.
    np.testing.assert_array_equal(obs.active, [True] * 6)
    np.testing.assert_allclose(obs.metrics["episode_return"], [1.5, 1.5, 1.5])
    np.testing.assert_allclose(obs.metrics["episode_length"], [1, 2, 2])
    assert obs.features["Self"].data[:3, 0].tolist() == [0, 0, 0]  # the new game's first step


def test_a_time_limit_truncates_every_row_in_play_with_its_final_observation() -> None:
    env = PlayerVecEnv(Dropout, num_games=1)
    env.reset()
    act(env, {0: LEAVE, 1: STAY, 2: STAY})
    act(env, {1: STAY, 2: STAY})
    obs = act(env, {1: STAY, 2: STAY})
    np.testing.assert_array_equal(obs.done, [False, True, True])
    np.testing.assert_array_equal(obs.truncated, [False, True, True])
    assert obs.final is not None and obs.final.num_rows == 2
    np.testing.assert_array_equal(obs.final.features["Self"].data[:, 0], [3, 3])
    np.testing.assert_array_equal(obs.game_over, [True, True, True])


def test_state_round_trip_continues_identically() -> None:
    env = PlayerVecEnv(Dropout, num_games=2, seed=1)
    env.reset()
    act(env, {0: LEAVE, 1: STAY, 2: STAY, 3: STAY, 4: STAY, 5: STAY})
    saved = env.get_state()
    first = act(env, {1: STAY, 2: LEAVE, 3: LEAVE, 4: STAY, 5: STAY})
    env.set_state(saved)
    again = act(env, {1: STAY, 2: LEAVE, 3: LEAVE, 4: STAY, 5: STAY})
    np.testing.assert_array_equal(first.reward, again.reward)
    np.testing.assert_array_equal(first.active, again.active)


def test_actions_for_a_player_that_left_are_refused() -> None:
    env = PlayerVecEnv(Dropout, num_games=1)
    env.reset()
    act(env, {0: LEAVE, 1: STAY, 2: STAY})
    with pytest.raises(ValueError, match="row 0: expected 0 values"):
        env.act(choices(STAY, STAY, STAY))


class WrongPlayers(Dropout):
    def act(self, actions):  # type: ignore[no-untyped-def]
        out = super().act(actions)
        out.pop("b")
        return out


def test_a_game_that_answers_for_the_wrong_players_is_named() -> None:
    env = PlayerVecEnv(WrongPlayers, num_games=1)
    env.reset()
    with pytest.raises(EnvValidationError, match=r"WrongPlayers: act\(\).*missing \['b'\]"):
        act(env, {0: STAY, 1: STAY, 2: STAY})


def stay() -> CategoricalAction:
    return CategoricalAction(actors=[("Self", 0)], indices=np.array([STAY]))


def test_validator_names_unknown_missing_and_departed_players() -> None:
    game = ValidatingMultiPlayer(Dropout())
    game.reset()
    with pytest.raises(EnvValidationError, match="unknown player 'z'"):
        game.act({"z": {"choice": stay()}})
    with pytest.raises(EnvValidationError, match=r"no actions for players in play \['c'\]"):
        game.act({"a": {"choice": stay()}, "b": {"choice": stay()}})
    leave = CategoricalAction(actors=[("Self", 0)], indices=np.array([LEAVE]))
    game.act({"a": {"choice": leave}, "b": {"choice": stay()}, "c": {"choice": stay()}})
    with pytest.raises(EnvValidationError, match="player 'a', which has left"):
        game.act({"a": {"choice": stay()}, "b": {"choice": stay()}, "c": {"choice": stay()}})


class BadObservation(Dropout):
    def reset(self) -> dict[str, Observation]:
        first = super().reset()
        first["c"] = Observation(features={"Self": np.zeros((1, 5), np.float32)})
        return first


def test_validator_names_the_player_of_a_bad_observation() -> None:
    with pytest.raises(EnvValidationError, match=r"BadObservation \(player 'c'\).*features"):
        PlayerVecEnv(BadObservation, num_games=1, validate=True).reset()


class BadPlayers(Dropout):
    def players(self) -> list[str]:
        return ["a", "a"]


def test_repeated_player_names_are_refused() -> None:
    with pytest.raises(EnvValidationError, match="names repeat"):
        PlayerVecEnv(BadPlayers, num_games=1)


def test_a_player_joins_mid_game_with_an_empty_row_until_then() -> None:
    env = PlayerVecEnv(Reinforcements, num_games=1)
    obs = env.reset()
    np.testing.assert_array_equal(obs.active, [True, False])
    assert obs.action_masks["choice"].actors.lengths.tolist() == [1, 0]
    assert obs.features["Self"].lengths.tolist() == [1, 0]
    obs = act(env, {0: 0})
    # b joined: in play from now on; its first observation's reward does not count.
    np.testing.assert_array_equal(obs.active, [True, True])
    np.testing.assert_allclose(obs.reward, [1.0, 0.0])
    obs = act(env, {0: 0, 1: 0})
    obs = act(env, {0: 0, 1: 0})
    np.testing.assert_array_equal(obs.game_over, [True, True])
    np.testing.assert_allclose(obs.metrics["episode_return"], [3.0, 2.0])
    np.testing.assert_allclose(obs.metrics["episode_length"], [3, 2])
    np.testing.assert_array_equal(obs.active, [True, False])  # the next game, b to join


def test_validator_refuses_actions_for_a_player_yet_to_join() -> None:
    game = ValidatingMultiPlayer(Reinforcements())
    game.reset()
    wait = CategoricalAction(actors=[("Self", 0)], indices=np.array([0]))
    with pytest.raises(EnvValidationError, match="player 'b', which has not joined the game yet"):
        game.act({"a": {"choice": wait}, "b": {"choice": wait}})
    game.act({"a": {"choice": wait}})
    assert game.in_play == {"a", "b"}


class Returns(Dropout):
    def act(self, actions):  # type: ignore[no-untyped-def]
        out = super().act(actions)
        if "a" not in actions:
            out["a"] = self._observe("a", 0.0, False)  # a left earlier: may not come back
        return out


def test_a_player_that_left_cannot_come_back() -> None:
    env = PlayerVecEnv(Returns, num_games=1)
    env.reset()
    act(env, {0: LEAVE, 1: STAY, 2: STAY})
    with pytest.raises(EnvValidationError, match=r"neither in play nor able to join \['a'\]"):
        act(env, {1: STAY, 2: STAY})


def test_a_state_of_another_kind_is_refused() -> None:
    env = PlayerVecEnv(Dropout, num_games=1)
    env.reset()
    with pytest.raises(ValueError, match="not a state of this version's PlayerVecEnv"):
        env.set_state(plain_state.capture({"games": [], "observations": []}))
    with pytest.raises(ValueError, match="not a saved state: found bytes"):
        env.set_state(pickle.dumps(("games", "observations")))  # an earlier version's state
