"""Multi-player games in worker processes (rollout.processes > 1) and in data-parallel runs
(world_size > 1): the same games as in one process, errors naming the worker, training."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from env.player_envs import Bigger, Dropout
from stop_after import StopAfter

from entityrl.env.multiplayer_vec import MultiPlayerSettingError, MultiPlayerVecEnv, PlayerVecEnv
from entityrl.env.multiplayer_workers import ProcessPlayerVecEnv
from entityrl.env.process_vec_env import EnvWorkerError, ProcessVecEnv
from entityrl.env.random_policy import RandomPolicy
from entityrl.env.vec_obs import VecObs
from entityrl.envs import make_vec, vectorize
from entityrl.training import Trainer, load_config
from entityrl.training.checkpoint import load_checkpoint
from entityrl.training.runner import train

QUIET = ["log.tensorboard=false", "log.progress=false", "torch_threads=1"]


def play(env: MultiPlayerVecEnv, steps: int) -> list[VecObs]:
    policy = RandomPolicy(env.action_space, seed=0)
    batches = [env.reset()]
    for _ in range(steps):
        batches.append(env.act(policy.act(batches[-1])))
    return batches


def assert_same_batches(ours: list[VecObs], theirs: list[VecObs]) -> None:
    for step, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        where = f"step {step}"
        assert a.features.keys() == b.features.keys(), where
        for name in a.features:
            np.testing.assert_array_equal(a.features[name].data, b.features[name].data, where)
            np.testing.assert_array_equal(a.features[name].lengths, b.features[name].lengths, where)
        np.testing.assert_array_equal(a.global_features, b.global_features, where)
        for name in ("reward", "done", "active", "game_over", "group_reward", "truncated"):
            x, y = getattr(a, name), getattr(b, name)
            assert (x is None) == (y is None), f"{where}: {name}"
            if x is not None:
                np.testing.assert_array_equal(x, y, f"{where}: {name}")
        assert a.metrics.keys() == b.metrics.keys(), where
        for key in a.metrics:
            np.testing.assert_array_equal(a.metrics[key], b.metrics[key], f"{where}: {key}")
        assert (a.final is None) == (b.final is None), where
        if a.final is not None and b.final is not None:
            assert_same_batches([a.final], [b.final])


@pytest.mark.parametrize("game", ["CoinDuel", "GuardedExit", "MatrixGame"])
def test_worker_processes_play_the_games_of_one_process(game: str) -> None:
    with make_vec(game, 5, seed=7) as one, make_vec(game, 5, seed=7, processes=2) as two:
        assert isinstance(one, PlayerVecEnv) and isinstance(two, ProcessPlayerVecEnv)
        assert isinstance(two, MultiPlayerVecEnv) and isinstance(two, ProcessVecEnv)
        for name in ("num_envs", "num_games", "players", "group_names", "groups", "name"):
            assert getattr(two, name) == getattr(one, name), name
        assert two.num_workers == 2
        # Worker 0 steps games 0..2, worker 1 games 3..4: rows laid out as in one process.
        assert two.bounds == [0, 3 * len(one.players), 5 * len(one.players)]
        assert_same_batches(play(one, 60), play(two, 60))
        theirs = two.observations
        assert len(theirs) == len(one.observations) == one.num_envs
        for a, b in zip(one.observations, theirs, strict=True):
            assert a.actions.keys() == b.actions.keys() and a.done == b.done
        assert two.render(7) == one.render(7)


def test_players_leaving_and_games_cut_off_batch_alike() -> None:
    # Dropout: players leave at different times and games are truncated (final observations).
    one = vectorize(Dropout, 6, seed=1)
    three = vectorize(Dropout, 6, seed=1, processes=3)
    try:
        batches = play(three, 20)
        assert any(b.truncated is not None for b in batches)
        assert any(b.active is not None and not b.active.all() for b in batches)
        assert_same_batches(play(one, 20), batches)
    finally:
        one.close()
        three.close()


def test_more_workers_than_games_is_refused() -> None:
    with pytest.raises(
        MultiPlayerSettingError,
        match=re.escape("rollout.processes=3: CoinDuel is a multi-player game, split over"),
    ):
        make_vec("CoinDuel", 2, seed=0, processes=3)


class Exploding(Bigger):
    """Bigger, whose games seeded 2 or more raise on their first step."""

    def __init__(self) -> None:
        self.seeded = 0

    def seed(self, seed: int) -> None:
        self.seeded = seed

    def act(self, actions: Any) -> Any:
        if self.seeded >= 2:
            raise RuntimeError("boom")
        return super().act(actions)


def test_a_worker_that_raises_is_named_in_one_line_and_all_workers_end() -> None:
    env = vectorize(Exploding, 4, seed=0, processes=2)
    procs = list(env._procs)
    obs = env.reset()
    with pytest.raises(EnvWorkerError) as caught:
        env.act(RandomPolicy(env.action_space, seed=0).act(obs))
    first = str(caught.value).splitlines()[0]
    assert first == (
        "game worker 1 (games 2..3) raised an exception while stepping: RuntimeError: boom"
    )
    assert not any(p.is_alive() for p in procs)  # a failure closes the batch


def test_close_leaves_no_worker_processes() -> None:
    env = make_vec("GuardedExit", 4, seed=0, processes=2)
    procs = list(env._procs)
    assert all(p.is_alive() for p in procs)
    play(env, 3)
    env.close()
    assert not any(p.is_alive() for p in procs)
    assert all(p.exitcode is not None for p in procs)


# ---------------------------------------------------------------------- training


def trained(run_dir: Path, *overrides: str) -> dict[str, Any]:
    config = load_config(None, [*QUIET, f"log.run_dir={run_dir}", *overrides], check_env=False)
    Trainer(config).run()
    return load_checkpoint(run_dir)


def assert_same_model(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=0, msg=name)


SELFPLAY = [
    "algo=selfplay", "env.id=CoinDuel", "rollout.num_envs=4", "rollout.steps=16",
    "optim.bs=32", "net.d_model=16", "total_timesteps=256", "selfplay.snapshot_every=64",
    "selfplay.swap_every=64",
]  # fmt: skip
POCA = [
    "algo=poca", "env.id=GuardedExit", "rollout.num_envs=4", "rollout.steps=16", "optim.bs=32",
    "net.d_model=16", "poca.d_model=16", "total_timesteps=384",
]  # fmt: skip


@pytest.mark.parametrize(
    "overrides",
    [
        SELFPLAY,
        [*SELFPLAY, "selfplay.opponent=entityrl.envs.players:coin_duel_heuristic"],
        POCA,
        [*SELFPLAY, "algo=ppo"],
        [*SELFPLAY, "algo=ppo", "env.id=Lanes", "env.decisions.period=2"],
        [*SELFPLAY, "env.stack=3"],
        [*POCA, "env.stack=2"],
    ],
    ids=[
        "selfplay",
        "selfplay-scripted",
        "poca",
        "ppo",
        "ppo-decisions",
        "selfplay-stacked",
        "poca-stacked",
    ],
)
def test_training_with_worker_processes_is_training_in_one(
    tmp_path: Path, overrides: list[str]
) -> None:
    one = trained(tmp_path / "one", *overrides)
    two = trained(tmp_path / "two", *overrides, "rollout.processes=2")
    assert two["step"] == one["step"] > 0
    assert_same_model(one["model"], two["model"])


@pytest.mark.parametrize("extra", [[], ["env.stack=2"]], ids=["plain", "stacked"])
def test_a_resumed_run_with_worker_processes_continues_exactly(
    tmp_path: Path, extra: list[str]
) -> None:
    # The games' state (and their stacks) is saved per worker and restored in the workers.
    overrides = [*QUIET, *SELFPLAY, "rollout.processes=2", "total_timesteps=512", *extra]
    whole = load_config(None, [*overrides, f"log.run_dir={tmp_path / 'whole'}"], check_env=False)
    Trainer(whole).run()
    parts = load_config(None, [*overrides, f"log.run_dir={tmp_path / 'parts'}"], check_env=False)
    Trainer(parts, callbacks=[StopAfter(2)]).run()
    assert load_checkpoint(tmp_path / "parts")["step"] < 512
    Trainer(parts, resume=tmp_path / "parts").run()
    a, b = load_checkpoint(tmp_path / "whole"), load_checkpoint(tmp_path / "parts")
    assert a["step"] == b["step"] == 512
    assert a["selfplay"][0]["pool"]["ratings"] == b["selfplay"][0]["pool"]["ratings"]
    for name, value in a["model"].items():
        assert value.allclose(b["model"][name], atol=1e-6), name


def test_self_play_in_two_training_processes_keeps_one_pool(tmp_path: Path) -> None:
    config = load_config(
        None,
        [
            *SELFPLAY,
            *QUIET,
            "world_size=2",
            "rollout.num_envs=8",
            "total_timesteps=768",
            "rollout.processes=2",
            "selfplay.play_latest=0.3",
            "distributed_timeout=60",
            f"log.run_dir={tmp_path}",
        ],
        check_env=False,
    )
    assert train(config=config).steps == 768  # raises if the networks diverged
    ours, theirs = (part["pool"] for part in load_checkpoint(tmp_path)["selfplay"])
    assert len(ours["snapshots"]) > 2
    assert ours["ratings"] == theirs["ratings"] and ours["current"] == theirs["current"]
    assert ours["learner_elo"] == theirs["learner_elo"] != 1200.0
    for a, b in zip(ours["snapshots"], theirs["snapshots"], strict=True):
        assert_same_model(a, b)


@pytest.mark.parametrize("algo", ["poca", "ppo"])
def test_a_cooperative_game_in_two_training_processes(tmp_path: Path, algo: str) -> None:
    # GuardedExit's explorers leave at different times in different games: the processes have
    # different numbers of rows to learn from and must still take the same steps.
    config = load_config(
        None,
        [
            *POCA,
            *QUIET,
            f"algo={algo}",
            "world_size=2",
            "rollout.num_envs=8",
            "total_timesteps=768",
            "distributed_timeout=60",
            f"log.run_dir={tmp_path}",
        ],
        check_env=False,
    )
    assert train(config=config).steps >= 768  # raises if the networks diverged
    if algo == "poca":
        ours, theirs = (part["critic"] for part in load_checkpoint(tmp_path)["poca"])
        assert_same_model(ours, theirs)
