"""The stuck-training warning: each sign fires once, and a healthy run does not warn."""

from __future__ import annotations

import json
import warnings

import pytest

from entityrl.training import train
from entityrl.training.stuck import StuckConfig, StuckDetector, StuckTrainingWarning

QUIET = ["log.tensorboard=false", "log.progress=false", "torch_threads=1", "seed=1"]


def feed(detector: StuckDetector, iterations: list[dict[str, float]], steps: int = 100) -> list:
    """The signs each iteration raised, one list per iteration."""
    return [list(detector.check((i + 1) * steps, m)) for i, m in enumerate(iterations)]


def test_no_finished_episode_after_n_updates_warns_once() -> None:
    detector = StuckDetector(StuckConfig(no_episode_updates=3), budget=10_000)
    signs = feed(detector, [{"episodes": 0.0}] * 5)
    assert signs == [[], [], ["no_episode"], [], []]
    finished = StuckDetector(StuckConfig(no_episode_updates=3), budget=10_000)
    assert feed(finished, [{"episodes": 0.0}, {"episodes": 2.0}, {"episodes": 0.0}]) == [[]] * 3


def test_explained_variance_near_zero_for_many_updates_in_a_row_warns() -> None:
    detector = StuckDetector(StuckConfig(explained_variance_updates=3), budget=10_000)
    values = [0.0, 0.01, 0.5, 0.0, 0.02, 0.01, 0.0]  # the 0.5 restarts the count
    signs = feed(detector, [{"episodes": 1.0, "loss/explained_variance": v} for v in values])
    assert signs == [[], [], [], [], [], ["explained_variance"], []]
    message = detector.check(800, {})
    assert message == {}


def entropy(value: float, episode_return: float = 0.0) -> dict[str, float]:
    return {"loss/entropy": value, "episode/episode_return": episode_return}


def test_entropy_collapsed_early_without_better_returns_warns() -> None:
    config = StuckConfig(entropy_fraction=0.1, entropy_within=0.25)
    early = StuckDetector(config, budget=1000)
    assert feed(early, [entropy(1.6), entropy(0.1)]) == [[], ["entropy"]]
    late = StuckDetector(config, budget=1000)
    collapse_late = [entropy(1.6), *[entropy(0.5)] * 4, entropy(0.1)]
    assert all(not s for s in feed(late, collapse_late))
    solved = StuckDetector(config, budget=1000)  # a task learned fast: nothing is wrong
    assert feed(solved, [entropy(1.6, 0.2), entropy(0.1, 1.0)]) == [[], []]


def timed(episode_return: float, cut_off: float = 1.0, length: float = 25.0) -> dict[str, float]:
    """An iteration's metrics: 10 episodes of ``length`` steps, a share ``cut_off`` of them
    cut off by a time limit, with a mean return of ``episode_return``."""
    return {
        "episodes": 10.0,
        "episode/episode_return": episode_return,
        "episode/episode_length": length,
        "episode/episode_truncated": cut_off,
    }


def test_a_horizon_far_past_the_time_limit_with_a_falling_return_warns() -> None:
    # simple_spread's case: 25-step episodes, all cut off, gamma 0.99, the return falling.
    falling = [timed(-26.0 - i) for i in range(12)]
    detector = StuckDetector(StuckConfig(horizon_updates=10), budget=10_000, discount=0.99)
    signs = feed(detector, falling)
    assert signs[9] == ["horizon"] and not any(signs[:9]) and not any(signs[10:])
    quiet = {
        "short horizon": StuckDetector(StuckConfig(), budget=10_000, discount=0.9),
        "no discount known": StuckDetector(StuckConfig(), budget=10_000),
        "off": StuckDetector(StuckConfig(horizon_updates=0), budget=10_000, discount=0.99),
    }
    for name, other in quiet.items():
        assert not any(feed(other, falling)), name
    rising = [timed(-26.0 + i) for i in range(12)]
    ended_by_the_task = [timed(-26.0 - i, cut_off=0.5) for i in range(12)]
    long_episodes = [timed(-26.0 - i, length=200.0) for i in range(12)]
    for iterations in (rising, ended_by_the_task, long_episodes):
        detector = StuckDetector(StuckConfig(), budget=10_000, discount=0.99)
        assert not any(feed(detector, iterations))


def test_the_horizon_message_suggests_a_gamma_near_the_episode_length() -> None:
    detector = StuckDetector(StuckConfig(horizon_updates=2), budget=10_000, discount=0.99)
    messages = detector.check(100, timed(-26.0)) | detector.check(200, timed(-30.0))
    assert "after 25 steps" in messages["horizon"]
    assert "ppo.gamma=0.80" in messages["horizon"]
    assert "docs/troubleshooting.md" in messages["horizon"]


def test_messages_name_what_to_try_and_the_troubleshooting_page() -> None:
    detector = StuckDetector(
        StuckConfig(no_episode_updates=1, explained_variance_updates=1), budget=100
    )
    messages = detector.check(10, {"episodes": 0.0, "loss/explained_variance": 0.0})
    assert "rollout.steps" in messages["no_episode"]
    assert "rollout.steps" in messages["explained_variance"]
    assert all("docs/troubleshooting.md" in m for m in messages.values())


def test_settings_out_of_range_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"stuck\.no_episode_updates must be >= 0"):
        StuckConfig(no_episode_updates=-1)
    with pytest.raises(ValueError, match=r"stuck\.entropy_fraction must be between 0 and 1"):
        StuckConfig(entropy_fraction=2.0)


def test_a_run_whose_episodes_never_end_warns_in_python_and_in_its_log(tmp_path) -> None:
    overrides = [*QUIET, "env.kwargs={max_steps: 100000}", "rollout.num_envs=4",
                 "rollout.steps=8", "total_timesteps=160", "net.d_model=8", "net.n_layer=1",
                 "stuck.no_episode_updates=3", f"log.run_dir={tmp_path}"]  # fmt: skip
    with pytest.warns(StuckTrainingWarning, match="no episode has finished after 3 updates"):
        train("MoveToOrigin", overrides=overrides)
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    flagged = [r["step"] for r in records if r.get("warning/no_episode") == 1.0]
    assert flagged == [96]


def test_a_healthy_run_does_not_warn(tmp_path) -> None:
    overrides = [*QUIET, "total_timesteps=20000", f"log.run_dir={tmp_path}"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", StuckTrainingWarning)
        result = train("MultiArmedBandit", overrides=overrides)
    assert result.mean_return is not None and result.mean_return > 0.8


def test_low_explained_variance_with_rising_returns_does_not_warn() -> None:
    # A bandit's returns are chance: its value function explains nothing while it learns.
    detector = StuckDetector(StuckConfig(explained_variance_updates=2), budget=10_000)
    rising = [
        {"loss/explained_variance": 0.0, "episode/episode_return": r} for r in (0.1, 0.5, 0.9)
    ]
    assert feed(detector, rising) == [[], [], []]
    flat = StuckDetector(StuckConfig(explained_variance_updates=2), budget=10_000)
    same = [{"loss/explained_variance": 0.0, "episode/episode_return": 0.1}] * 3
    assert feed(flat, same) == [[], ["explained_variance"], []]


def test_a_negative_gaussian_entropy_does_not_count_as_collapsed() -> None:
    config = StuckConfig(entropy_fraction=0.1, entropy_within=0.25)
    detector = StuckDetector(config, budget=1000)
    # Differential entropy starts below 0; falling a little is no collapse towards 0.
    assert feed(detector, [entropy(-6.37), entropy(-6.38)]) == [[], []]
