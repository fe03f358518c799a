"""Data-parallel training with two processes (gloo on localhost)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from entityrl.training import checkpoint as ckpt
from entityrl.training.config import ConfigError, load_config
from entityrl.training.distributed import _free_port
from entityrl.training.runner import train

SMALL = [
    "world_size=2",
    "rollout.num_envs=8",
    "rollout.steps=8",
    "optim.bs=32",
    "net.d_model=16",
    "total_timesteps=128",
    "log.tensorboard=false",
    "log.progress=false",
    "log.checkpoint_interval=64",
]


@pytest.mark.parametrize("extra", [[], ["net.memory=true", "ppo.seq_len=4"]], ids=["", "memory"])
def test_two_processes_train_in_step_and_resume(tmp_path: Path, extra: list[str]) -> None:
    config = load_config("CherryPick", [*SMALL, f"log.run_dir={tmp_path}", *extra])
    result = train(config=config)  # raises if the processes' parameters diverged
    assert result.steps == 128 and result.mean_return is not None
    steps = [
        json.loads(line)["step"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()
    ]
    assert steps == [64, 128]
    saved = ckpt.load_checkpoint(tmp_path)
    assert len(saved["rng"]) == 2  # each process's random state
    longer = load_config(tmp_path / "config.yaml", ["total_timesteps=192"])
    assert train(config=longer, resume=tmp_path).steps == 192


def test_world_size_must_divide_the_batch() -> None:
    with pytest.raises(ConfigError, match=r"rollout\.num_envs \(9\) must be a multiple"):
        load_config("CherryPick", ["world_size=2", "rollout.num_envs=9"])


def test_config_world_size_must_match_the_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    from entityrl.training.distributed import rank_config

    config = load_config("CherryPick", ["world_size=4", "rollout.num_envs=8"])
    with pytest.raises(
        ConfigError, match=r"world_size=4 in the config, but the launcher started 2"
    ):
        rank_config(config, world_size=2, local_rank=0)
    with pytest.raises(ConfigError, match=r"rollout\.num_envs \(9\) must be a multiple"):
        rank_config(load_config("CherryPick", ["rollout.num_envs=9"]), world_size=2, local_rank=0)
    assert rank_config(load_config("CherryPick"), world_size=2, local_rank=1).world_size == 2


# Rank 1 dies (as on a lost machine) or stops answering (SIGSTOP: then it ignores every
# signal but SIGKILL) after its environments took a few steps.
DYING_ENV = """
import os
import signal

import torch.distributed as dist

from entityrl.envs import CherryPick


class LostCherryPick(CherryPick):
    steps = 0

    def act(self, actions):
        LostCherryPick.steps += 1
        if dist.is_initialized() and dist.get_rank() == 1 and LostCherryPick.steps > 40:
            self.lose()
        return super().act(actions)


class DyingCherryPick(LostCherryPick):
    def lose(self):
        os._exit(3)


class StoppedCherryPick(LostCherryPick):
    def lose(self):
        os.kill(os.getpid(), signal.SIGSTOP)
"""


def _torchrun(node_rank: int, port: int, args: list[str], cwd: Path) -> subprocess.Popen[str]:
    """One of two torchrun "nodes" on this machine, one process each."""
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=1",
               f"--node-rank={node_rank}", "--master-addr=127.0.0.1", f"--master-port={port}",
               "-m", "entityrl", "train", *args]  # fmt: skip
    return subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip


def _two_nodes(args: list[str], cwd: Path, timeout: float = 240) -> list[tuple[int, str]]:
    port = _free_port()
    nodes = [_torchrun(rank, port, args, cwd) for rank in (0, 1)]
    results = []
    for node in nodes:
        try:
            _, err = node.communicate(timeout=timeout)
        finally:
            node.kill()
        results.append((node.returncode, err))
    return results


def test_two_torchrun_nodes_train_like_the_world_size_shortcut(tmp_path: Path) -> None:
    # Same seeds, same split of the environments over two ranks, same gradient sums: the
    # launcher's run and world_size=2 on one machine end with identical parameters.
    common = [*SMALL[1:], "torch_threads=1", "log.checkpoint_interval=128"]
    launched = tmp_path / "launched"
    results = _two_nodes(["CherryPick", *common, f"log.run_dir={launched}"], cwd=tmp_path)
    assert [code for code, _ in results] == [0, 0], results
    shortcut = tmp_path / "shortcut"
    train(config=load_config("CherryPick", [*SMALL, *common, f"log.run_dir={shortcut}"]))
    ours, theirs = (ckpt.load_checkpoint(d)["model"] for d in (launched, shortcut))
    assert ours.keys() == theirs.keys()
    for name in ours:
        torch.testing.assert_close(ours[name], theirs[name], rtol=0, atol=0, msg=name)
    assert load_config(launched / "config.yaml").world_size == 2  # resumable with 2 ranks


def test_a_dead_torchrun_node_stops_the_other_with_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "dying_env.py").write_text(DYING_ENV)
    args = ["dying_env:DyingCherryPick", *SMALL[1:], "total_timesteps=100000",
            "distributed_timeout=30", f"log.run_dir={tmp_path / 'run'}"]  # fmt: skip
    started = time.monotonic()
    (code0, err0), (code1, _) = _two_nodes(args, cwd=tmp_path)
    assert time.monotonic() - started < 90
    assert code0 != 0 and code1 != 0
    assert "entityrl train: error: training process 0 of 2 lost the others" in err0


def _session(leader: int) -> list[str]:
    """The processes of the session ``leader`` started, as "pid command"."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            pid_comm, _, rest = stat.read_text().rpartition(")")
        except OSError:  # it ended meanwhile
            continue
        if int(rest.split()[3]) == leader:
            members.append(pid_comm.replace(" (", " ", 1))
    return members


@pytest.mark.parametrize(
    ("env", "timeout", "culprit"),
    [
        ("DyingCherryPick", 30, r"exited with code 3"),
        # Rank 0 times out; rank 1 ignores SIGTERM while stopped, so SIGKILL ends it.
        ("StoppedCherryPick", 10, r"stopped answering .*: stopped or stuck, .* was killed"),
    ],
    ids=["dying", "stopped"],
)
def test_a_lost_rank_stops_the_world_size_shortcut_with_a_clear_error(
    tmp_path: Path, env: str, timeout: int, culprit: str
) -> None:
    (tmp_path / "dying_env.py").write_text(DYING_ENV)
    command = [sys.executable, "-m", "entityrl", "train", f"dying_env:{env}", *SMALL,
               "total_timesteps=100000", f"distributed_timeout={timeout}",
               f"log.run_dir={tmp_path / 'run'}"]  # fmt: skip
    # No kernel compiler running in the background to tell from a process left behind.
    quiet = {**os.environ, "ENTITYRL_NO_KERNELS": "1"}
    started = time.monotonic()
    # A session of its own: every process the run starts can be found, and killed if left.
    run = subprocess.Popen(command, cwd=tmp_path, env=quiet, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    try:
        _, err = run.communicate(timeout=120)
        elapsed = time.monotonic() - started
        # The launcher's resource tracker ends when it reads the launcher's pipe close.
        deadline = time.monotonic() + 10
        while _session(run.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = _session(run.pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGKILL)
    assert elapsed < timeout + 30, err  # never a hang (the test's limit: 120 s)
    assert run.returncode == 1, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("entityrl train: error: training process 0 of 2 lost the others")
    assert re.search(rf"; training process 1 \(pid \d+\) {culprit}$", last), last
    assert left == [], left
