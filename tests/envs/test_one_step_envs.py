"""Behaviour of the one-step environments: Xor, Count, NotHotdog, FloorIsLava,
RockPaperScissors."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from entityrl.env import (
    CategoricalAction,
    Environment,
    GlobalCategoricalAction,
    Observation,
)
from entityrl.envs import Count, FloorIsLava, NotHotdog, RockPaperScissors, Xor
from entityrl.envs.floor_is_lava import DIRECTIONS
from entityrl.envs.rock_paper_scissors import THROWS


def choose(actor: tuple[str, int], index: int) -> CategoricalAction:
    return CategoricalAction([actor], np.array([index]))


# ---------------------------------------------------------------------------- Xor
def xor_answer(env: Environment, obs: Observation) -> dict[str, GlobalCategoricalAction]:
    bits = np.asarray(obs.features["Input"], dtype=np.int64)[:, 0]
    answer = int(bits[0] ^ bits[1] ^ int(obs.global_features[0]))
    return {"output": GlobalCategoricalAction(answer, str(answer))}


def test_xor_answered_right_returns_one(play: Callable[..., float]) -> None:
    assert [play(Xor(), xor_answer, seed) for seed in range(20)] == [1.0] * 20


def test_xor_pays_only_the_negated_xor() -> None:
    env = Xor()
    env.bits, env.negate = (1, 0), 1
    assert env.act({"output": GlobalCategoricalAction(0, "0")}).reward == 1.0
    env.bits, env.negate = (1, 1), 1
    obs = env.act({"output": GlobalCategoricalAction(0, "0")})
    assert obs.reward == 0.0 and obs.done


# ---------------------------------------------------------------------------- Count
def count_beans(env: Environment, obs: Observation) -> dict[str, CategoricalAction]:
    return {"count": choose(("Player", 0), obs.num_entities("Bean"))}


def test_counting_the_beans_returns_one(play: Callable[..., float]) -> None:
    assert [play(Count(), count_beans, seed) for seed in range(20)] == [1.0] * 20


def test_count_masks_keep_the_answer_and_stay_in_range() -> None:
    env = Count(masked_choices=4)
    env.seed(0)
    for _ in range(50):
        obs = env.reset()
        mask = np.asarray(obs.actions["count"].mask)  # type: ignore[union-attr]
        beans = obs.num_entities("Bean")
        assert beans < 4
        assert mask.shape == (1, 10)
        assert mask[0, beans]
        assert not mask[0, 4:].any()


def test_count_pays_only_the_right_count() -> None:
    env = Count()
    env.seed(1)
    beans = env.reset().num_entities("Bean")
    assert env.act({"count": choose(("Player", 0), (beans + 1) % 10)}).reward == 0.0


# ---------------------------------------------------------------------------- NotHotdog
def classify(env: Environment, obs: Observation) -> dict[str, CategoricalAction]:
    shown_hotdog = obs.num_entities("Hotdog") == 1
    is_hotdog = shown_hotdog or bool(np.asarray(obs.features["Object"])[0, 0])
    return {"classify": choose(("Player", 0), 0 if is_hotdog else 1)}


def test_classifying_right_returns_one(play: Callable[..., float]) -> None:
    assert [play(NotHotdog(), classify, seed) for seed in range(20)] == [1.0] * 20


def test_not_hotdog_shows_one_thing_and_no_actor_for_the_unused_action() -> None:
    env = NotHotdog()
    env.seed(0)
    for _ in range(20):
        obs = env.reset()
        assert obs.num_entities("Object") + obs.num_entities("Hotdog") == 1
        assert obs.actions["unused_action"].actor_types == []  # type: ignore[union-attr]
        if obs.num_entities("Hotdog"):
            assert env.is_hotdog


def test_not_hotdog_rewards_the_label_not_the_index() -> None:
    env = NotHotdog()
    env.is_hotdog, env.shown_as_hotdog = True, True
    assert env.act({"classify": choose(("Player", 0), 0)}).reward == 1.0  # "hotdog"
    env.is_hotdog, env.shown_as_hotdog, env.steps = False, False, 0
    assert env.act({"classify": choose(("Player", 0), 0)}).reward == 0.0


# ---------------------------------------------------------------------------- FloorIsLava
def step_to_high_ground(env: Environment, obs: Observation) -> dict[str, CategoricalAction]:
    offset = np.asarray(obs.features["HighGround"])[0] - np.asarray(obs.features["Player"])[0]
    return {"move": choose(("Player", 0), DIRECTIONS.index(tuple(offset.astype(int).tolist())))}


def test_stepping_onto_the_high_ground_returns_one(play: Callable[..., float]) -> None:
    assert [play(FloorIsLava(), step_to_high_ground, seed) for seed in range(20)] == [1.0] * 20


def test_floor_is_lava_surrounds_the_player_with_tiles_and_pays_nothing_on_lava() -> None:
    env = FloorIsLava()
    env.seed(3)
    obs = env.reset()
    player = np.asarray(obs.features["Player"])[0]
    tiles = np.concatenate([obs.features["Lava"], obs.features["HighGround"]])
    assert 1 <= len(tiles) <= 8
    assert (np.abs(tiles - player).max(axis=1) == 1).all()
    off_high_ground = next(
        i for i, d in enumerate(DIRECTIONS) if tuple(env.high_ground - env.player) != d
    )
    obs = env.act({"move": choose(("Player", 0), off_high_ground)})
    assert obs.done and obs.reward == 0.0


# ---------------------------------------------------------------------------- RockPaperScissors
def always_paper(env: Environment, obs: Observation) -> dict[str, CategoricalAction]:
    return {"throw": choose(("Player", 0), THROWS.index("paper"))}


def beat_the_visible_throw(env: Environment, obs: Observation) -> dict[str, CategoricalAction]:
    opponent = int(np.argmax(np.asarray(obs.features["Opponent"])[0]))
    return {"throw": choose(("Player", 0), (opponent + 1) % 3)}


def test_always_paper_returns_one_on_average(play: Callable[..., float]) -> None:
    returns = [play(RockPaperScissors(), always_paper, seed) for seed in range(2000)]
    # Paper wins 2 with probability 0.5: the mean of 2000 has a standard error of 0.022.
    assert abs(np.mean(returns) - 1.0) < 0.1


def test_with_cheat_the_visible_throw_can_always_be_beaten(play: Callable[..., float]) -> None:
    env = RockPaperScissors(cheat=True)
    assert [play(env, beat_the_visible_throw, seed) for seed in range(20)] == [2.0] * 20


def test_the_opponent_is_hidden_from_the_policy_unless_cheating() -> None:
    for cheat in (False, True):
        env = RockPaperScissors(cheat=cheat)
        env.seed(0)
        obs = env.reset()
        assert np.asarray(obs.visible["Opponent"]).tolist() == [cheat]
        assert np.asarray(obs.features["Opponent"]).sum() == 1.0
