"""PackHunt: captures take two hunters, hazards eliminate, sight hides, the pack shares."""

from __future__ import annotations

import statistics
from typing import Any

import pytest

from entityrl.env import Action
from entityrl.envs import PackHunt
from entityrl.envs.players import (
    ScriptedFunction,
    move,
    pack_hunt_baseline,
    play_game,
    uniform_random,
)


def moves(*names: str) -> dict[str, dict[str, Action]]:
    return {str(i): move(name) for i, name in enumerate(names)}


def test_one_hunter_next_to_a_prey_is_not_enough() -> None:
    env = PackHunt()
    env.set_state([(1, 1), (5, 5), (7, 7)], [(2, 2), (6, 0)], [])
    obs = env.act(moves("up", "stay", "stay"))  # (1, 2) is next to the prey at (2, 2)
    assert env.group_reward() == {"pack": 0.0}
    assert obs["0"].features["Prey"][0][4] == 1  # one hunter next to it
    assert env.prey == [(2, 2), (6, 0)]


def test_two_hunters_next_to_a_prey_capture_it_for_the_pack() -> None:
    env = PackHunt()
    env.set_state([(1, 2), (3, 3), (7, 7)], [(2, 2), (6, 0)], [])
    obs = env.act(moves("stay", "down", "stay"))
    assert env.group_reward() == {"pack": 1.0}
    assert env.groups() == {"0": "pack", "1": "pack", "2": "pack"}
    assert env.prey == [(6, 0)] and not obs["0"].done
    assert all(o.reward == 0 for o in obs.values())  # the capture is the pack's reward
    env.act(moves("stay", "stay", "stay"))
    assert env.group_reward() == {"pack": 0.0}


def test_the_last_capture_ends_the_game() -> None:
    env = PackHunt()
    env.set_state([(1, 2), (3, 3), (7, 7)], [(2, 2)], [])
    obs = env.act(moves("stay", "down", "stay"))
    assert all(o.done for o in obs.values())
    assert obs["2"].metrics == {"captured": 1.0, "hunters_left": 3.0}


def test_a_hunter_on_a_hazard_leaves_and_the_pack_plays_on() -> None:
    env = PackHunt()
    env.set_state([(0, 0), (5, 5), (5, 7)], [(6, 6)], [(1, 0)])
    obs = env.act(moves("right", "stay", "stay"))
    assert obs["0"].done and not obs["1"].done and not obs["2"].done
    assert obs["0"].features["Self"] == [(1, 0)]  # its last view, from the hazard
    assert env.players() == ("0", "1", "2") and set(env.hunters) == {"1", "2"}
    with pytest.raises(ValueError, match=r"not in play: \['0'\]"):
        env.act(moves("stay", "stay", "stay"))
    obs = env.act({"1": move("right"), "2": move("right")})  # (6, 5) and (6, 7): capture
    assert set(obs) == {"1", "2"} and env.group_reward() == {"pack": 1.0}
    assert len(obs["1"].features["Ally"]) == 1  # the eliminated hunter is gone


class FixedStart(PackHunt):
    """PackHunt that starts every game from one layout."""

    def __init__(self, hunters: Any, prey: Any, hazards: Any) -> None:
        super().__init__()
        self.start = (hunters, prey, hazards)

    def reset(self) -> Any:
        return self.set_state(*self.start)


def scripted(*names: str) -> ScriptedFunction:
    """A player making the moves ``names``, one per call."""
    planned = iter(names)
    return lambda obs: move(next(planned))


def test_the_group_reward_reaches_eliminated_hunters() -> None:
    env = FixedStart([(0, 0), (5, 5), (5, 7)], [(6, 6)], [(1, 0)])
    seats = {"0": scripted("right"), "1": scripted("stay", "right"), "2": scripted("stay", "right")}
    assert play_game(env, seats) == {"0": 1.0, "1": 1.0, "2": 1.0}


def test_fewer_than_two_hunters_end_the_game() -> None:
    env = PackHunt()
    env.set_state([(0, 0), (5, 5), (7, 7)], [(3, 3)], [(1, 0), (7, 6)])
    obs = env.act(moves("right", "stay", "down"))
    assert all(o.done for o in obs.values())
    assert obs["1"].metrics == {"captured": 0.0, "hunters_left": 1.0}


def test_walking_onto_a_prey_or_off_the_grid_is_staying() -> None:
    env = PackHunt()
    env.set_state([(0, 0), (2, 1), (7, 7)], [(3, 1)], [])
    env.act(moves("left", "right", "up"))
    assert env.hunters == {"0": (0, 0), "1": (2, 1), "2": (7, 7)}


def test_entities_out_of_sight_are_hidden_from_the_policy_only() -> None:
    env = PackHunt(sight=2)
    obs = env.set_state([(0, 0), (2, 2), (7, 7)], [(3, 0), (0, 2)], [(1, 1), (5, 5)])["0"]
    assert obs.features["Ally"] == [(2, 2, 2, 2), (7, 7, 7, 7)]
    assert obs.visible == {
        "Ally": [True, False],
        "Prey": [False, True],
        "Hazard": [True, False],
    }
    assert obs.features["Self"] == [(0, 0)] and obs.global_features == [50, 8]


def test_the_baseline_waits_next_to_prey_and_avoids_hazards() -> None:
    env = PackHunt()
    obs = env.set_state([(0, 0), (4, 4), (7, 7)], [(0, 2)], [(1, 0)])
    assert pack_hunt_baseline(obs["0"])["move"].label == "up"
    obs = env.set_state([(0, 1), (4, 4), (7, 7)], [(0, 2)], [])
    assert pack_hunt_baseline(obs["0"])["move"].label == "stay"
    # Nothing in sight: to the centre (4, 4), but not over the hazard at (1, 0).
    obs = env.set_state([(0, 0), (7, 0), (7, 7)], [(7, 5)], [(1, 0)])
    assert pack_hunt_baseline(obs["0"])["move"].label == "up"


def test_the_baseline_pack_captures_far_more_than_random_hunters() -> None:
    env = PackHunt()
    random_hunter = uniform_random(env.obs_space(), env.action_space(), seed=0)

    def mean_return(player: ScriptedFunction) -> float:
        env.seed(0)
        seats = dict.fromkeys(env.players(), player)
        return statistics.mean(play_game(env, seats)["0"] for _ in range(150))

    # Measured over 2,000 games: baseline 1.23, random 0.16.
    assert mean_return(pack_hunt_baseline) >= 1.1
    assert mean_return(random_hunter) <= 0.4


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"size": 1}, "size must be >= 2, got 1"),
        ({"num_hunters": 1}, "num_hunters must be >= 2 (a capture takes 2), got 1"),
        ({"num_prey": 0}, "need num_prey >= 1 and num_hazards >= 0, got num_prey=0"),
        ({"size": 3, "num_hazards": 4}, "a 3x3 grid cannot hold 3 hunters, 3 prey and 4 hazards"),
        ({"sight": -1}, "sight must be >= 0, got -1"),
        ({"max_steps": 0}, "max_steps must be >= 1, got 0"),
    ],
)
def test_bad_arguments_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match="PackHunt: ") as error:
        PackHunt(**kwargs)
    assert message in str(error.value)


def test_an_action_that_is_not_a_move_is_refused() -> None:
    env = PackHunt()
    env.reset()
    with pytest.raises(ValueError, match=r"PackHunt\.act: player '2' must choose 'move'"):
        env.act({"0": move("stay"), "1": move("stay"), "2": {}})
