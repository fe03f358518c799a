"""The replay buffer of ragged entity observations."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from test_truncation import TimeLimited

from entityrl.algorithms.common.replay import ReplayBuffer, Transitions, next_observations
from entityrl.env import SerialVecEnv
from entityrl.env.random_policy import RandomPolicy
from entityrl.env.vec_obs import VecCategoricalMask, VecObs
from entityrl.envs import make_vec
from entityrl.ragged import RaggedArray


def _steps(env_id: str, steps: int, num_envs: int = 3) -> list[Transitions]:
    env = make_vec(env_id, num_envs, seed=0)
    policy = RandomPolicy(env.action_space, seed=0)
    obs, out = env.reset(), []
    for _ in range(steps):
        actions = policy.act(obs)
        after = env.act(actions)
        out.append(
            Transitions(
                obs, actions, after.reward, after.done, next_observations(after, env.choices)
            )
        )
        obs = after
    return out


def test_the_next_observation_of_a_truncated_episode_is_its_final_one() -> None:
    truncates = iter([True, False])
    env = SerialVecEnv(lambda: TimeLimited(next(truncates)), 2, seed=0)
    policy = RandomPolicy(env.action_space, seed=0)
    obs = env.reset()
    for _ in range(3):
        obs = env.act(policy.act(obs))
    assert obs.done.all()
    following = next_observations(obs, env.choices)
    clock = following.features["Clock"].data[:, 0]
    # The cut-off episode is followed by its final observation (t = 3); the one that ended by
    # the task keeps the next episode's first (t = 0), which no target bootstraps from.
    assert clock.tolist() == [3.0, 0.0]
    assert obs.features["Clock"].data[:, 0].tolist() == [0.0, 0.0]


def test_it_holds_the_last_capacity_transitions() -> None:
    steps = _steps("CherryPick", 5)
    buffer = ReplayBuffer(capacity=7, choices={})
    for step in steps:
        buffer.add(step)
    assert len(buffer) == 7 and buffer.added == 15
    batch = buffer.sample(256, np.random.default_rng(0))
    assert batch.num_rows == 256 and set(batch.index.tolist()) == set(range(8, 15))
    kept = np.concatenate([s.obs.global_features for s in steps])[8:]
    assert {tuple(r) for r in batch.obs.global_features} == {tuple(r) for r in kept}
    assert np.array_equal(batch.weights, np.ones(256)) and (batch.discount == 0.99).all()


# ----------------------------------------------------------------------- synthetic steps
ROWS = 2


def _obs(step: int, actors: list[int]) -> VecObs:
    """Row ``i`` of step ``step``: one entity whose feature is ``10 * step + i``, and
    ``actors[i]`` actors (that entity, repeated) with 3 choices, the last one illegal."""
    rows = len(actors)
    lengths = np.array(actors, np.int64)
    return VecObs(
        features={
            "E": RaggedArray(
                10.0 * step + np.arange(rows, dtype=np.float32)[:, None], np.ones(rows, np.int64)
            )
        },
        global_features=np.zeros((rows, 0), np.float32),
        action_masks={
            "a": VecCategoricalMask(
                RaggedArray(np.zeros((lengths.sum(), 1), np.int64), lengths),
                RaggedArray(np.tile([[True, True, False]], (lengths.sum(), 1)), lengths),
            )
        },
        reward=np.zeros(rows, np.float32),
        done=np.zeros(rows, np.bool_),
    )


def _synthetic(steps: int, terminal: set[tuple[int, int]], truncated: set[tuple[int, int]]):
    """Steps of ROWS environments whose rewards say where they are (``step + row / 10``), with
    the given (step, row) endings; a step's next observation is the following step's (for a
    truncated row, the final one: feature ``-(10 * step + row)``); actors per row vary."""
    out = []
    for t in range(steps):
        actors = [(t + i) % 3 for i in range(ROWS)]
        following = _obs(t + 1, [(t + 1 + i) % 3 for i in range(ROWS)])
        cut = np.array([(t, i) in truncated for i in range(ROWS)])
        following.features["E"].data[cut, 0] = -(10.0 * t + np.arange(ROWS)[cut])
        out.append(
            Transitions(
                _obs(t, actors),
                {"a": RaggedArray(np.full((sum(actors), 1), t % 2, np.int64), np.array(actors))},
                t + np.arange(ROWS, dtype=np.float32) / 10,
                np.array([(t, i) in terminal for i in range(ROWS)]),
                following,
                cut,
            )
        )
    return out


def _expected(steps, n: int, gamma: float, t: int, i: int) -> tuple[float, float, float]:
    """(return, discount, next feature) of step t, row i, step by step as a textbook would."""
    total, k = 0.0, 0
    while True:
        step = steps[t + k]
        total += gamma**k * float(step.rewards[i])
        k += 1
        ended = step.terminal[i] or step.truncated[i]
        if ended or k == n or t + k == len(steps):
            discount = 0.0 if step.terminal[i] else gamma**k
            return total, discount, float(step.next_obs.features["E"].data[i, 0])


@pytest.mark.parametrize("n", [1, 3])
def test_n_step_returns_follow_each_environment_to_its_episode_end(n: int) -> None:
    steps = _synthetic(7, terminal={(1, 0), (4, 1)}, truncated={(2, 1), (5, 0)})
    buffer = ReplayBuffer(capacity=100, choices={"a": 3}, n_step=n, gamma=0.5)
    for step in steps:
        buffer.add(step)
    batch = buffer.sample(400, np.random.default_rng(0))
    assert set(batch.index.tolist()) == set(range(14))
    for row, position in enumerate(batch.index):
        t, i = divmod(int(position), ROWS)
        total, discount, following = _expected(steps, n, 0.5, t, i)
        assert batch.rewards[row] == pytest.approx(total), (t, i)
        assert batch.discount[row] == pytest.approx(discount), (t, i)
        assert batch.next_obs.features["E"].data[row, 0] == following, (t, i)
        assert batch.obs.features["E"].data[row, 0] == 10 * t + i
        # Actors come and go between steps; each transition keeps its own.
        actors = (t + i) % 3
        assert batch.obs.action_masks["a"].actors.lengths[row] == actors
        assert batch.actions["a"].lengths[row] == actors
        assert (batch.actions["a"].data[batch.actions["a"].offsets[row] :][:actors] == t % 2).all()
    assert batch.next_obs.action_masks["a"].mask.data.shape[1] == 3


def test_n_step_returns_need_the_same_rows_at_every_step() -> None:
    buffer = ReplayBuffer(capacity=100, choices={"a": 3}, n_step=2)
    buffer.add(_synthetic(1, set(), set())[0])
    with pytest.raises(ValueError, match="every step must have 2 rows, got 1"):
        buffer.add(_synthetic(1, set(), set())[0].take(np.array([0])))


def test_prioritized_sampling_follows_the_priorities_and_corrects_for_them() -> None:
    buffer = ReplayBuffer(capacity=100, choices={"a": 3}, prioritized=True, alpha=1.0)
    buffer.add(_synthetic(1, set(), set())[0])
    first = buffer.sample(2, np.random.default_rng(0))
    assert (first.weights == 1).all()  # new transitions share the highest priority
    buffer.update_priorities(np.array([0, 1]), np.array([1.0, -3.0]))
    batch = buffer.sample(4000, np.random.default_rng(1), beta=0.5)
    share = (batch.index == 1).mean()
    assert share == pytest.approx(0.75, abs=0.01)  # 3 / (1 + 3)
    weights = dict(zip(batch.index.tolist(), batch.weights.tolist(), strict=False))
    assert weights[0] == 1 and weights[1] == pytest.approx((1 / 3) ** 0.5)
    # A new transition comes in at the highest priority seen (3).
    buffer.add(_synthetic(2, set(), set())[1])
    batch = buffer.sample(7000, np.random.default_rng(2))
    assert (batch.index >= 2).mean() == pytest.approx(6 / 10, abs=0.02)


@pytest.mark.parametrize(
    ("env_id", "n", "prioritized"),
    [("CherryPick", 1, False), ("MineSweeper", 3, True), ("Minefield", 2, True)],
)
def test_it_survives_a_checkpoint_and_samples_the_same(
    env_id: str, n: int, prioritized: bool
) -> None:
    # Capacity 40 merges steps into blocks of 2 rows and drops the first 8 transitions.
    made = {"n_step": n, "prioritized": prioritized}
    buffer = ReplayBuffer(capacity=40, choices=make_vec(env_id, 1, seed=0).choices, **made)
    for step in _steps(env_id, 16):
        buffer.add(step)
    buffer.update_priorities(np.arange(8, 48), np.linspace(0, 2, 40))
    file = io.BytesIO()
    torch.save(buffer.state_dict(), file)
    file.seek(0)
    restored = ReplayBuffer(capacity=40, choices=buffer.choices, **made)
    restored.load_state_dict(torch.load(file, weights_only=True))
    assert len(restored) == len(buffer) == 40
    assert restored.nbytes_per_transition() == buffer.nbytes_per_transition() > 0
    a, b = (x.sample(20, np.random.default_rng(1), beta=0.5) for x in (buffer, restored))
    for field in ("index", "weights", "discount", "truncated"):
        assert np.array_equal(getattr(a, field), getattr(b, field))
    for name in a.obs.features:
        assert np.array_equal(a.obs.features[name].data, b.obs.features[name].data)
        assert np.array_equal(a.next_obs.features[name].lengths, b.next_obs.features[name].lengths)
    for name in a.actions:
        assert np.array_equal(a.actions[name].data, b.actions[name].data)
        assert np.array_equal(
            a.obs.action_masks[name].actors.data, b.obs.action_masks[name].actors.data
        )
    assert np.array_equal(a.rewards, b.rewards) and np.array_equal(a.terminal, b.terminal)
