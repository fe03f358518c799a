"""Meta-RL trials (entityrl.envs.meta.Trials) and the task families they draw from
(entityrl.env.tasks): the accounting of rewards, episode ends and the features of the step
before, one task per trial, and the disjoint meta-training and held-out tasks."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from entityrl.env.spaces import ContinuousActionSpace
from entityrl.env.tasks import NO_TASK, TASK_RANGE, draw_tasks, split_of
from entityrl.envs import make_vec
from entityrl.envs.hidden_arm import HiddenArm
from entityrl.envs.meta import Trials
from entityrl.envs.survival import RiverNavigation, SurvivalWorld
from entityrl.ragged import RaggedArray

ARMS, PULLS, EPISODES, COPIES = 3, 2, 3, 4
TRIAL = PULLS * EPISODES


def pulls(arms: np.ndarray) -> dict[str, RaggedArray]:
    """One global ``pull`` per copy."""
    arms = np.asarray(arms, dtype=np.int64)
    return {"pull": RaggedArray(arms[:, None], np.ones(arms.shape[0], dtype=np.int64))}


def trials(split: str = "train", tasks: int | None = None) -> Trials:
    return Trials(
        COPIES,
        seed=5,
        env="HiddenArm",
        env_kwargs={"arms": ARMS, "pulls": PULLS},
        episodes=EPISODES,
        split=split,
        tasks=tasks,
        validate=True,
    )


def paying_arm(task: int) -> int:
    """What HiddenArm draws for ``task``: the arm that pays in its every episode."""
    return int(np.random.default_rng(task).integers(0, ARMS, size=1)[0])


def test_a_trial_is_episodes_of_one_task_with_the_step_before_in_its_features() -> None:
    env = trials()
    names = list(env.obs_space.global_features)
    assert names == [
        "pulled",
        "prev_reward",
        "prev_done",
        "prev_pull=A",
        "prev_pull=B",
        "prev_pull=C",
    ]
    column = {name: i for i, name in enumerate(names)}
    obs = env.reset()
    assert not obs.global_features[:, 1:].any()  # nothing before a trial's first step
    inner = env.inner
    assert isinstance(inner, HiddenArm)
    rng = np.random.default_rng(0)
    seen_tasks: list[np.ndarray] = []
    for _ in range(3):  # three trials in a row
        task = env.task.copy()
        seen_tasks.append(task)
        np.testing.assert_array_equal(inner.tasks, task)
        paying = np.array([paying_arm(t) for t in task])
        np.testing.assert_array_equal(inner.paying, paying)
        returns = np.zeros((COPIES, EPISODES))
        for t in range(1, TRIAL + 1):
            arms = rng.integers(0, ARMS, size=COPIES)
            arms[0] = paying[0]  # copy 0 always pays: its rewards are all 1
            obs = env.act(pulls(arms))
            reward = (arms == paying).astype(np.float32)
            np.testing.assert_array_equal(obs.reward, reward)
            returns[:, (t - 1) // PULLS] += reward
            if t < TRIAL:
                # The task stays for the whole trial, and the trial goes on.
                assert not obs.done.any()
                np.testing.assert_array_equal(env.task, task)
                np.testing.assert_array_equal(inner.paying, paying)
                g = obs.global_features
                np.testing.assert_array_equal(g[:, column["prev_reward"]], reward)
                ended = t % PULLS == 0  # an inner episode ended: this observation starts one
                np.testing.assert_array_equal(g[:, column["prev_done"]], float(ended))
                np.testing.assert_array_equal(g[:, column["pulled"]], 0.0 if ended else 0.5)
                np.testing.assert_array_equal(g[:, column["prev_pull=A"] :], np.eye(ARMS)[arms])
                assert not obs.metrics
        # The trial ends with its last inner episode, and a new one starts from zeros.
        assert obs.done.all()
        assert not obs.global_features[:, 1:].any()
        m = obs.metrics
        np.testing.assert_array_equal(m["episode_length"], TRIAL)
        np.testing.assert_allclose(m["episode_return"], returns.sum(axis=1))
        for i in range(EPISODES):
            np.testing.assert_allclose(m[f"episode{i + 1}/return"], returns[:, i])
            np.testing.assert_array_equal(m[f"episode{i + 1}/length"], PULLS)
        assert m["episode1/return"][0] == PULLS
    # A task per trial, drawn anew for the next.
    assert all((a != b).all() for a, b in itertools.pairwise(seen_tasks))


def test_copies_end_their_trials_at_their_own_times() -> None:
    env = Trials(2, seed=0, env="RiverNavigation", env_kwargs={"horizon": 3}, episodes=2)
    obs = env.reset()
    task = env.task.copy()
    # Copy 0 reaches its target in one step; copy 1 stays and ends its episodes at the horizon.
    inner = env.inner
    assert isinstance(inner, RiverNavigation)
    inner.position[0] = inner.target[0] + [1, 0]
    stay = RaggedArray(np.full((2, 1), 2, dtype=np.int64), np.ones(2, dtype=np.int64))
    left = RaggedArray(np.array([[1], [2]], dtype=np.int64), np.ones(2, dtype=np.int64))
    obs = env.act({"move_x": left, "move_y": stay})
    assert not obs.done.any()  # copy 0's first episode ended; its trial goes on
    assert list(env.obs_space.global_features[:2]) == ["prev_reward", "prev_done"]
    assert obs.global_features[:, 0].tolist() == [1.0, 0.0]  # prev_reward
    assert obs.global_features[:, 1].tolist() == [1.0, 0.0]  # prev_done
    assert env.finished.tolist() == [1, 0]
    np.testing.assert_array_equal(env.task, task)
    # Copy 0's second episode starts at the centre of the same map.
    assert inner.position[0].tolist() == [20, 20]
    ends = []
    for _ in range(5):
        obs = env.act({"move_x": stay, "move_y": stay})
        ends.append(obs.done.tolist())
    # Copy 0: its second episode lasts the 3 steps of the horizon; copy 1: 2 x 3 steps.
    assert ends == [[False, False], [False, False], [True, False], [False, False], [False, True]]


def test_a_task_fixes_every_draw_of_an_episode_start() -> None:
    nav = RiverNavigation(4, seed=0)
    nav.set_tasks(np.array([0, 1, 2]), np.array([7, 7, 8]))
    nav.reset()
    alone = RiverNavigation(1, seed=123, task=7)
    alone.reset()
    for copy in (0, 1):
        np.testing.assert_array_equal(nav.water[copy], alone.water[0])
        np.testing.assert_array_equal(nav.target[copy], alone.target[0])
    assert not np.array_equal(nav.water[2], nav.water[0])
    assert nav.tasks[3] == NO_TASK  # copy 3 draws a new map every episode
    first = nav.water[3].copy()
    nav.reset_envs(np.array([0, 3]))
    np.testing.assert_array_equal(nav.water[0], alone.water[0])
    assert not np.array_equal(nav.water[3], first)

    world = SurvivalWorld(3, seed=0, life_limit=100, actions="simple")
    world.set_tasks(np.array([0, 1, 2]), np.array([5, 5, 6]))
    world.reset()
    s = world.state
    np.testing.assert_array_equal(s.terrain[0], s.terrain[1])
    assert (s.x[0], s.y[0]) == (s.x[1], s.y[1])
    assert not np.array_equal(s.terrain[0], s.terrain[2])


def test_meta_training_and_held_out_tasks_are_disjoint() -> None:
    rng = np.random.default_rng(0)
    train, test = draw_tasks(rng, 1000, "train"), draw_tasks(rng, 1000, "test")
    assert train.max() < TASK_RANGE <= test.min() and test.max() < 2 * TASK_RANGE
    assert {split_of(int(t)) for t in train} == {"train"}
    assert {split_of(int(t)) for t in test} == {"test"}
    assert set(draw_tasks(rng, 1000, "train", pool=5)) == {0, 1, 2, 3, 4}
    assert set(draw_tasks(rng, 1000, "test", pool=2)) == {TASK_RANGE, TASK_RANGE + 1}

    drawn = {}
    for split in ("train", "test"):
        env = trials(split, tasks=3)
        env.reset()
        tasks = set(env.task.tolist())
        for _ in range(4 * TRIAL):
            env.act(pulls(np.zeros(COPIES)))
            tasks |= set(env.task.tolist())
        drawn[split] = tasks
    assert drawn["train"] <= {0, 1, 2} and drawn["test"] <= {TASK_RANGE + i for i in range(3)}


def test_a_seed_fixes_the_trials_and_reseeding_restarts_them() -> None:
    a, b = trials(), trials()
    first = a.reset().global_features
    np.testing.assert_array_equal(first, b.reset().global_features)
    np.testing.assert_array_equal(a.task, b.task)
    tasks = a.task.copy()
    a.reseed(5)
    a.reset()
    np.testing.assert_array_equal(a.task, tasks)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"env": "Recall"}, TypeError, "env 'Recall' must be a natively batched task family"),
        ({"env_kwargs": {"task": 3}}, ValueError, "was given a fixed task"),
        ({"episodes": 0}, ValueError, r"episodes \(per trial\) must be >= 1, got 0"),
        ({"split": "valid"}, ValueError, "split must be one of train, test, got 'valid'"),
        ({"tasks": 0}, ValueError, "a task pool holds 1 to 2147483648 tasks, got 0"),
    ],
)
def test_trials_refuse_what_they_cannot_draw(kwargs: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        make_vec("Trials", 2, seed=0, **kwargs)


def test_refusals_name_what_was_wrong() -> None:
    with pytest.raises(TypeError, match="action 'steer' is a ContinuousActionSpace"):
        Trials._choices({"steer": ContinuousActionSpace(["angle"])})
    with pytest.raises(ValueError, match="expected one task per copy, got 1 tasks for 2 copies"):
        HiddenArm(3).set_tasks(np.array([0, 1]), np.array([4]))
    with pytest.raises(ValueError, match="task ids are >= 0"):
        HiddenArm(3).set_tasks(np.array([0]), np.array([-2]))
    with pytest.raises(ValueError, match="unknown task split 'dev'"):
        draw_tasks(np.random.default_rng(0), 1, "dev")
