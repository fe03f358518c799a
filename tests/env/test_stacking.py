"""Observation stacking: histories follow entity ids, start over for new entities and new
episodes, and are the same in worker processes."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from player_envs import Dropout, Reinforcements
from stacking_envs import Blinking
from tiny_envs import Countdown
from vec_env_checks import assert_plain

from entityrl.env import ProcessVecEnv, SerialVecEnv
from entityrl.env.multiplayer_vec import MultiPlayerSettingError, MultiPlayerVecEnv, PlayerVecEnv
from entityrl.env.stacking import StackedPlayerVecEnv, StackedVecEnv, stacked_space, stacking
from entityrl.env.vec_obs import VecObs
from entityrl.envs import make_vec
from entityrl.ragged import RaggedArray

K = 3
STAY, LEAVE = 0, 1


def noop(obs: VecObs) -> dict[str, RaggedArray]:
    actors = obs.action_masks["Noop"].actors
    return {"Noop": RaggedArray(np.zeros((actors.items, 1), np.int64), actors.lengths)}


def expected_history(x: np.ndarray, t: int, start: int) -> np.ndarray:
    """What Blinking's stacked ``x`` should be on step ``t`` of an episode (one row per entity):
    ``10 * id + max(t - lag, first step of the entity's current presence)``."""
    ids = (x // 10).astype(int)
    first = np.array([_present_since(i, t, start) for i in ids])
    return np.stack([10 * ids + np.maximum(t - lag, first) for lag in range(K)], axis=1)


def _present_since(entity: int, t: int, start: int) -> int:
    since = t
    while since > start and (entity + since - 1) % 4 != 0:
        since -= 1
    return since


@pytest.mark.parametrize("ids", ["int", "str"])
def test_histories_follow_ids_through_shuffles_appearances_and_resets(ids: str) -> None:
    env = StackedVecEnv(SerialVecEnv(functools.partial(Blinking, 6, ids), 2, seed=0), K)
    assert env.obs_space == stacked_space(Blinking().obs_space(), K)
    assert list(env.obs_space.entities["E"].features) == ["x", "x@t-1", "x@t-2"]
    obs = env.reset()
    for step in range(15):  # two and a half episodes
        t = step % 6  # the step that ends an episode (t = 6) shows the next one's first
        for row in range(2):
            stacked = obs.features["E"][row]
            np.testing.assert_array_equal(stacked, expected_history(stacked[:, 0], t, 0))
            # Global features: the step, then earlier steps of this episode (repeated at 0).
            np.testing.assert_array_equal(
                obs.global_features[row], [t, max(t - 1, 0), max(t - 2, 0)]
            )
        if step == 14:
            break
        obs = env.act(noop(obs))


def test_final_observation_of_a_truncated_episode_keeps_its_history() -> None:
    env = StackedVecEnv(SerialVecEnv(Blinking, 1, seed=1), K)
    obs = env.reset()
    for _ in range(6):
        obs = env.act(noop(obs))
    assert obs.done[0] and obs.truncated is not None and obs.truncated[0]
    assert obs.final is not None
    final = obs.final.features["E"][0]
    np.testing.assert_array_equal(final, expected_history(final[:, 0], 6, 0))
    np.testing.assert_array_equal(obs.final.global_features[0], [6, 5, 4])
    # ...while the new episode's first observation starts over.
    first = obs.features["E"][0]
    np.testing.assert_array_equal(first, np.repeat(first[:, :1], K, axis=1))


def test_environments_without_ids_are_matched_by_position() -> None:
    env = StackedVecEnv(Countdown(8, seed=0), 2)
    obs = env.reset()
    for _ in range(5):
        before = obs.features["Clock"].data[:, 0].copy()
        obs = env.act({"Tick": RaggedArray(np.zeros((8, 1), np.int64), np.ones(8, np.int64))})
        stacked = obs.features["Clock"].data
        np.testing.assert_array_equal(stacked[~obs.done, 1], before[~obs.done])
        np.testing.assert_array_equal(stacked[obs.done, 1], stacked[obs.done, 0])


def test_worker_processes_stack_like_one_process() -> None:
    wrap = functools.partial(StackedVecEnv, k=K)
    serial = wrap(SerialVecEnv(Blinking, 4, seed=3))
    workers = ProcessVecEnv(Blinking, 4, seed=3, num_workers=2, wrap=wrap)
    try:
        assert workers.obs_space == serial.obs_space
        a, b = serial.reset(), workers.reset()
        for _ in range(9):
            np.testing.assert_array_equal(a.features["E"].data, b.features["E"].data)
            np.testing.assert_array_equal(a.global_features, b.global_features)
            a, b = serial.act(noop(a)), workers.act(noop(b))
    finally:
        workers.close()


def test_saved_state_continues_the_same_histories() -> None:
    env = StackedVecEnv(SerialVecEnv(Blinking, 2, seed=5), K)
    obs = env.reset()
    for _ in range(3):
        obs = env.act(noop(obs))
    state = env.get_state()
    later = [env.act(noop(obs)) for _ in range(2)]
    copy = StackedVecEnv(SerialVecEnv(Blinking, 2, seed=99), K)
    resumed = copy.set_state(state)
    np.testing.assert_array_equal(resumed.features["E"].data, obs.features["E"].data)
    for expected in later:
        resumed = copy.act(noop(resumed))
        np.testing.assert_array_equal(resumed.features["E"].data, expected.features["E"].data)
    assert_plain(state)  # it travels in checkpoints that load without unpickling


def test_k_below_two_is_refused() -> None:
    with pytest.raises(ValueError, match="k \\(steps stacked\\) must be an integer >= 2, got 1"):
        StackedVecEnv(SerialVecEnv(Blinking, 1), 1)


# ---------------------------------------------------------------------- multi-player games


def test_each_seat_of_a_game_stacks_its_own_history() -> None:
    env = make_vec_game(Dropout, 2)
    assert isinstance(env, MultiPlayerVecEnv)
    assert (env.players, env.num_games, env.groups) == (
        ["a", "b", "c"],
        2,
        dict.fromkeys("abc", "team"),
    )
    obs = env.reset()
    # Self's features: step, seat; stacked: step, seat, step@t-1, seat@t-1, step@t-2, seat@t-2.
    np.testing.assert_array_equal(obs.features["Self"].data[:, 0::2], np.zeros((6, 3)))
    np.testing.assert_array_equal(obs.features["Self"].data[:, 1], [0, 1, 2, 0, 1, 2])
    obs = act_game(env, {0: STAY, 1: LEAVE, 2: STAY, 3: STAY, 4: STAY, 5: STAY})
    obs = act_game(env, {0: STAY, 2: STAY, 3: STAY, 4: STAY, 5: STAY})
    steps = obs.features["Self"].data[:, 0::2]
    # Rows in play: steps 2, 1, 0. Row 1 left at step 1: its row shows that last observation.
    np.testing.assert_array_equal(steps[[0, 2, 3, 4, 5]], np.tile([2, 1, 0], (5, 1)))
    # The games are cut off at step 3: the next game's first observation starts fresh.
    obs = act_game(env, {0: STAY, 2: STAY, 3: STAY, 4: STAY, 5: STAY})
    # b's row ended when b left; it is back in play in the next game, and starts fresh too.
    np.testing.assert_array_equal(obs.done, [True, False, True, True, True, True])
    np.testing.assert_array_equal(obs.features["Self"].data[:, 0::2], np.zeros((6, 3)))
    # The observation that ended the cut-off game is stacked with that game's history.
    assert obs.final is not None
    np.testing.assert_array_equal(
        obs.final.features["Self"].data[:, 0::2], np.tile([3, 2, 1], (5, 1))
    )


def test_a_player_that_joins_a_game_under_way_starts_fresh() -> None:
    env = make_vec_game(Reinforcements, 1)
    obs = env.reset()
    np.testing.assert_array_equal(obs.global_features[0], [0, 0, 0])
    obs = act_game(env, {0: 0})
    # b joins at step 1: its history is its first observation repeated, not its empty row.
    np.testing.assert_array_equal(obs.global_features, [[1, 0, 0], [1, 1, 1]])
    obs = act_game(env, {0: 0, 1: 0})
    np.testing.assert_array_equal(obs.global_features, [[2, 1, 0], [2, 1, 1]])


def test_scripted_players_read_the_games_own_observations() -> None:
    env = make_vec_game(Dropout, 1)
    env.reset()
    assert [o.features["Self"].shape for o in env.observations] == [(1, 2)] * 3


def test_a_stacked_game_resumes_from_its_state() -> None:
    env = make_vec_game(Dropout, 2)
    env.reset()
    act_game(env, {row: STAY for row in range(6)})
    saved = env.get_state()
    after = act_game(env, {row: STAY for row in range(6)})
    restored = env.set_state(saved)
    np.testing.assert_array_equal(
        restored.features["Self"].data[:, 0::2], np.tile([1, 0, 0], (6, 1))
    )
    again = act_game(env, {row: STAY for row in range(6)})
    np.testing.assert_array_equal(after.features["Self"].data, again.features["Self"].data)
    np.testing.assert_array_equal(after.features["Self"].data[:, 0::2], np.tile([2, 1, 0], (6, 1)))


def test_a_wrapper_that_loses_the_seats_of_a_game_is_refused() -> None:
    with pytest.raises(MultiPlayerSettingError, match="lost the game's seats"):
        make_vec("CoinDuel", 2, wrap=functools.partial(StackedVecEnv, k=2))


def make_vec_game(game: type, num_games: int) -> MultiPlayerVecEnv:
    env = stacking(K)(PlayerVecEnv(game, num_games, seed=0))  # type: ignore[misc]
    assert isinstance(env, StackedPlayerVecEnv)
    return env


def act_game(env: MultiPlayerVecEnv, per_row: dict[int, int]) -> VecObs:
    """Step with ``per_row`` choices for the rows in play (others: no actors)."""
    lengths = np.zeros(env.num_envs, np.int64)
    lengths[list(per_row)] = 1
    data = np.array([per_row[r] for r in sorted(per_row)], np.int64).reshape(-1, 1)
    return env.act({"choice": RaggedArray(data, lengths)})
