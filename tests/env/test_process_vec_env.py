"""ProcessVecEnv: same episodes as SerialVecEnv, clear errors from failing or dying workers,
and no worker left behind."""

from __future__ import annotations

import contextlib
import functools
import multiprocessing as mp
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from tiny_envs import (
    Explodes,
    Growing,
    Sleepy,
    choose_first_legal,
    refuse_to_build,
)
from vec_env_checks import assert_replays, assert_vec_obs_equal, play_past_a_saved_state

from entityrl.env import Entity, EnvWorkerError, ObsSpace, ProcessVecEnv, RandomPolicy, SerialVecEnv

HANG_LIMIT_SECONDS = 30


@contextlib.contextmanager
def no_hang(seconds: int = HANG_LIMIT_SECONDS) -> Iterator[None]:
    """Fail (instead of hanging the test run) if the block takes longer than ``seconds``."""

    def on_alarm(signum: int, frame: object) -> None:
        raise TimeoutError(f"still waiting after {seconds} s: the call hangs")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def assert_gone(pids: list[int]) -> None:
    """The processes have exited and been reaped."""
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def _read_nothing(envs: object, context: dict, payload: bytes) -> int:
    return len(payload)


@pytest.mark.parametrize("request_", ["step", "large message"])
def test_a_worker_that_stops_answering_is_killed_and_named(request_: str) -> None:
    # Started with time to spare (a loaded machine can take seconds to start a worker), then
    # the short timeout under test.
    env = ProcessVecEnv(Growing, 4, num_workers=2, answer_timeout=60.0)
    pids = env.pids
    obs = env.reset()
    env.answer_timeout = 1.0
    os.kill(pids[1], signal.SIGSTOP)
    started = time.monotonic()
    with no_hang(), pytest.raises(EnvWorkerError) as error:
        if request_ == "step":
            env.act(choose_first_legal(obs))
        else:  # more than a pipe holds: sending it waits for the worker to read
            env.call(_read_nothing, [(b"",), (bytes(1 << 20),)])
    assert time.monotonic() - started < 10
    assert re.match(
        r"environment worker 1 \(environments 2\.\.3\) did not (answer|read)", str(error.value)
    )
    assert "within 1 s" in str(error.value) and "it was killed" in str(error.value)
    assert_gone(pids)


def worker_children() -> list[str]:
    return [p.name for p in mp.active_children() if p.name.startswith("entityrl-env-worker")]


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_plays_the_same_episodes_as_serial(start_method: str) -> None:
    make = functools.partial(Growing, length=3)
    steps = 7 if start_method == "fork" else 3  # spawn starts slowly; a few steps suffice
    serial = SerialVecEnv(make, 5, seed=11, validate=True)
    with (
        no_hang(),
        ProcessVecEnv(
            make, 5, seed=11, num_workers=2, validate=True, start_method=start_method
        ) as parallel,
    ):
        assert parallel.bounds == [0, 3, 5]
        assert parallel.obs_space == serial.obs_space
        assert parallel.action_space == serial.action_space
        policy = RandomPolicy(serial.action_space, seed=4)
        expected, got = serial.reset(), parallel.reset()
        assert_vec_obs_equal(expected, got)
        ended = 0
        for _ in range(steps):
            actions = policy.act(expected)
            expected, got = serial.act(actions), parallel.act(actions)
            assert_vec_obs_equal(expected, got)
            ended += got.done.sum()
        assert ended == 5 * (steps // 3)


def test_exception_in_an_environment_carries_the_worker_traceback() -> None:
    env = ProcessVecEnv(functools.partial(Explodes, fail_at=2), 4, num_workers=2)
    pids = env.pids
    with no_hang():
        obs = env.act(choose_first_legal(env.reset()))
        with pytest.raises(EnvWorkerError) as error:
            env.act(choose_first_legal(obs))
    message = str(error.value)
    assert "environment worker 0 (environments 0..1) raised an exception while stepping" in message
    assert "explode_on_purpose" in message  # the environment's own frames
    assert "process_vec_env.py" not in message  # not the worker's
    assert "ValueError: the thing exploded on step 2" in message
    assert_gone(pids)  # a failed env closes all its workers
    with pytest.raises(EnvWorkerError, match="closed"):
        env.reset()


def test_killed_worker_is_reported_not_waited_for() -> None:
    env = ProcessVecEnv(functools.partial(Sleepy, seconds=0.5), 4, num_workers=2)
    pids = env.pids
    with no_hang():
        obs = env.reset()
        # Kill worker 1 while its environments sleep inside act().
        killer = threading.Timer(0.2, os.kill, (pids[1], signal.SIGKILL))
        killer.start()
        with pytest.raises(EnvWorkerError) as error:
            env.act(choose_first_legal(obs))
        killer.join()
    message = str(error.value)
    assert "environment worker 1 (environments 2..3) died unexpectedly while stepping" in message
    assert "killed by signal SIGKILL" in message
    assert_gone(pids)


def test_worker_killed_between_steps_is_reported() -> None:
    env = ProcessVecEnv(Explodes, 2, num_workers=2)
    pids = env.pids
    with no_hang():
        obs = env.reset()
        os.kill(pids[0], signal.SIGKILL)
        with pytest.raises(EnvWorkerError, match="environment worker 0"):
            env.act(choose_first_legal(obs))
    assert_gone(pids)


def test_close_ends_every_worker_and_is_idempotent() -> None:
    env = ProcessVecEnv(Explodes, 3, num_workers=2)
    pids = env.pids
    assert len(pids) == 2
    env.reset()
    env.close()
    assert_gone(pids)
    env.close()
    assert worker_children() == []


def test_context_manager_closes() -> None:
    with ProcessVecEnv(Explodes, 2, num_workers=2) as env:
        pids = env.pids
        env.reset()
    assert_gone(pids)


def test_use_after_close_is_a_clear_error() -> None:
    env = ProcessVecEnv(Explodes, 2, num_workers=1)
    obs = env.reset()
    env.close()
    with pytest.raises(EnvWorkerError, match="this ProcessVecEnv is closed"):
        env.reset()
    with pytest.raises(EnvWorkerError, match="this ProcessVecEnv is closed"):
        env.act(choose_first_legal(obs))


def test_factory_failure_in_the_worker_surfaces_and_leaves_no_worker() -> None:
    with no_hang(), pytest.raises(EnvWorkerError) as error:
        ProcessVecEnv(refuse_to_build, 4, num_workers=2)
    message = str(error.value)
    assert "raised an exception while building its environments" in message
    assert "refuse_to_build" in message
    assert "RuntimeError: factory refused to build in process" in message
    assert worker_children() == []


def test_actions_are_checked_before_they_reach_the_workers() -> None:
    with ProcessVecEnv(Explodes, 2, num_workers=2) as env:
        env.reset()
        with pytest.raises(ValueError, match="action 'Poke': expected one value per actor"):
            env.act({})
    with (
        ProcessVecEnv(Explodes, 1, num_workers=1) as fresh,
        pytest.raises(RuntimeError, match="reset"),
    ):
        fresh.act({})


def test_more_workers_than_environments_uses_one_per_environment() -> None:
    with ProcessVecEnv(Explodes, 2, num_workers=8) as env:
        assert len(env.pids) == 2
        obs = env.reset()
        np.testing.assert_array_equal(obs.features["Thing"].lengths, [1, 1])


class UnpicklableSpace(Explodes):
    """Declares a feature name that cannot be pickled, so its first answer cannot be sent."""

    def obs_space(self) -> ObsSpace:
        return ObsSpace(entities={"Thing": Entity([lambda: "x"])})  # type: ignore[list-item]


def test_answer_that_cannot_be_sent_surfaces_as_an_error() -> None:
    with no_hang(), pytest.raises(EnvWorkerError) as error:
        ProcessVecEnv(UnpicklableSpace, 2, num_workers=2, start_method="fork")
    assert "while building its environments" in str(error.value)
    assert "pickle" in str(error.value).lower()
    assert worker_children() == []


def test_restored_state_continues_exactly() -> None:
    make = functools.partial(Growing, length=3)
    with no_hang(), ProcessVecEnv(make, 4, seed=5, num_workers=2) as env:
        obs, saved, actions, expected = play_past_a_saved_state(env, warmup=4, steps=4)
    with no_hang(), ProcessVecEnv(make, 4, num_workers=2) as fresh:
        assert_vec_obs_equal(fresh.set_state(saved), obs)
        assert_replays(fresh, actions, expected)
    with (
        ProcessVecEnv(make, 4, num_workers=1) as other,
        pytest.raises(ValueError, match="2 worker parts"),
    ):
        other.set_state(saved)


def test_render_asks_the_worker_that_holds_the_environment() -> None:
    with no_hang(), ProcessVecEnv(functools.partial(Growing, length=5), 3, num_workers=2) as env:
        obs = env.reset()
        env.act(choose_first_legal(obs))
        assert [env.render(i) for i in range(3)] == ["step 1"] * 3
        with pytest.raises(IndexError, match="environment 3 out of range for 3"):
            env.render(3)


def test_render_failure_leaves_the_workers_running() -> None:
    with no_hang(), ProcessVecEnv(Explodes, 2, num_workers=2) as env:
        obs = env.reset()
        with pytest.raises(
            EnvWorkerError, match="NotImplementedError: Explodes does not implement render"
        ):
            env.render(1)
        env.act(choose_first_legal(obs))  # still usable


def test_unpicklable_factory_with_spawn_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match="'spawn' needs a picklable make_env") as error:
        ProcessVecEnv(lambda: Explodes(), 2, num_workers=2, start_method="spawn")
    assert "<lambda>" in str(error.value)
    assert worker_children() == []


def count_calls(envs: SerialVecEnv, context: dict, offset: int) -> tuple[int, int]:
    """A call run in the workers: how many environments this worker holds, and how many
    times it was called (kept in its context), plus ``offset``."""
    context["calls"] = context.get("calls", 0) + 1
    return envs.num_envs, context["calls"] + offset


def step_with_first_legal(envs: SerialVecEnv, context: dict) -> object:
    return envs.act(choose_first_legal(envs.observation))


def fail_in_a_call(envs: SerialVecEnv, context: dict) -> None:
    raise RuntimeError("this call fails on purpose")


def test_call_runs_in_every_worker_with_a_context_kept_between_calls() -> None:
    with no_hang(), ProcessVecEnv(Growing, 5, seed=0, num_workers=2) as env:
        env.reset()
        assert env.call(count_calls, [(0,), (10,)]) == [(3, 1), (2, 11)]
        assert env.call(count_calls, [(0,), (0,)]) == [(3, 2), (2, 2)]
        with pytest.raises(ValueError, match="one argument tuple per worker"):
            env.call(count_calls, [(0,)])


def test_stepping_in_a_call_then_assembling_continues_the_same_episodes() -> None:
    serial = SerialVecEnv(Growing, 5, seed=0)
    with no_hang(), ProcessVecEnv(Growing, 5, seed=0, num_workers=2) as env:
        env.reset()
        expected = serial.act(choose_first_legal(serial.reset()))
        parts = env.call(step_with_first_legal, [(), ()])
        with pytest.raises(RuntimeError, match="reset"):  # stale until assembled
            env.act(choose_first_legal(expected))
        assert_vec_obs_equal(env.assemble(parts), expected)
        assert_vec_obs_equal(
            env.act(choose_first_legal(expected)), serial.act(choose_first_legal(expected))
        )


def test_a_failing_call_carries_the_worker_traceback() -> None:
    env = ProcessVecEnv(Growing, 4, seed=0, num_workers=2)
    pids = env.pids
    with no_hang(), pytest.raises(EnvWorkerError) as error:
        env.call(fail_in_a_call, [(), ()])
    assert "raised an exception while running 'fail_in_a_call'" in str(error.value)
    assert "RuntimeError: this call fails on purpose" in str(error.value)
    assert_gone(pids)


def refuse_to_unpickle() -> None:
    raise RuntimeError("this object cannot be rebuilt")


class FailsToUnpickle:
    def __reduce__(self) -> tuple:
        return refuse_to_unpickle, ()


def test_a_message_the_worker_cannot_unpickle_is_an_error_not_a_dead_worker() -> None:
    env = ProcessVecEnv(Growing, 4, seed=0, num_workers=2)
    with no_hang(), pytest.raises(EnvWorkerError) as error:
        env.call(count_calls, [(FailsToUnpickle(),), (0,)])
    assert "RuntimeError: this object cannot be rebuilt" in str(error.value)
    assert "died" not in str(error.value)
    env.close()


KILLED_PARENT = """
import os, sys
sys.path.insert(0, {tests!r})
from tiny_envs import Growing
from entityrl.env import ProcessVecEnv

envs = ProcessVecEnv(Growing, 4, seed=0, num_workers=2, start_method={method!r})
envs.reset()
with open({pids!r}, "w") as pids:
    pids.write(" ".join(str(p.pid) for p in envs._procs))
os._exit(137)  # as a kill: no close(), no exit handlers
"""


def running(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie waiting to be reaped does not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc (Linux)")
@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_workers_end_when_their_parent_is_killed(start_method: str, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = KILLED_PARENT.format(
        tests=str(Path(__file__).parent), method=start_method, pids=str(pids)
    )
    # Output to a file, not a pipe: workers left behind would hold a pipe open.
    with open(tmp_path / "log", "w") as log:
        done = subprocess.run([sys.executable, "-c", script], stdout=log, stderr=log, timeout=120)
    assert done.returncode == 137, (tmp_path / "log").read_text()
    workers = [int(pid) for pid in pids.read_text().split()]
    assert len(workers) == 2
    try:
        deadline = time.monotonic() + 20
        while any(running(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(running(pid) for pid in workers), "a worker outlived its killed parent"
    finally:
        for pid in filter(running, workers):
            os.kill(pid, signal.SIGKILL)
