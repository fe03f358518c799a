"""Runs that fail: a kill while a checkpoint is written, a NaN from the network, a directory
that holds another run. None leaves an inconsistent or non-finite checkpoint behind."""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from test_runner import config, learning_metrics, parameters

from entityrl.algorithms.ppo import algorithm as ppo_algorithm
from entityrl.training import checkpoint as ckpt
from entityrl.training.finite import NonFiniteError
from entityrl.training.run_dir import RunDirError
from entityrl.training.runner import Trainer

# Runs the small MineSweeper config of test_runner in a fresh interpreter and kills it
# (os._exit, as SIGKILL would: no cleanup) halfway through writing its second checkpoint.
KILLED_WHILE_SAVING = """
import os, sys
import torch
sys.path.insert(0, {tests!r})
from test_runner import config
from entityrl.training.runner import Trainer

saves = []
real_save = torch.save

def save_then_die(obj, f, *args, **kwargs):
    if isinstance(obj, dict) and obj.get("format") == "entityrl-checkpoint":
        saves.append(obj["step"])
    if len(saves) == 2:
        f.write(b"PK\\x03\\x04 half a checkpoint")
        f.flush()
        os._exit(137)
    real_save(obj, f, *args, **kwargs)

torch.save = save_then_die
Trainer(config({run!r}, "rollout.processes={processes}")).run()
"""


@pytest.mark.parametrize("processes", [1, 2], ids=["in_process", "worker_processes"])
def test_a_kill_while_a_checkpoint_is_written_leaves_the_previous_one_whole(
    tmp_path: Path, processes: int
) -> None:
    run = tmp_path / "killed"
    script = KILLED_WHILE_SAVING.format(
        tests=str(Path(__file__).parent), run=str(run), processes=processes
    )
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], timeout=300)
    assert done.returncode == 137
    saved = ckpt.load_checkpoint(run)
    assert saved["step"] == 64  # the first checkpoint, model and environments together
    assert ckpt.load_env_states(run, saved) is not None

    # Resumed from it, the run is exactly the run that was never interrupted.
    workers = f"rollout.processes={processes}"
    Trainer(config(tmp_path / "whole", workers)).run()
    Trainer(config(run, workers), resume=run).run()
    whole, resumed = parameters(tmp_path / "whole"), parameters(run)
    assert all(torch.equal(whole[k], resumed[k]) for k in whole)
    assert learning_metrics(tmp_path / "whole") == learning_metrics(run)


def test_a_checkpoint_holds_the_environments_state_of_its_own_step(tmp_path: Path) -> None:
    run = tmp_path / "run"
    Trainer(config(run)).run()
    assert sorted(p.name for p in run.iterdir()) == [
        "checkpoint.pt",
        "config.yaml",
        "metrics.jsonl",
    ]
    saved = ckpt.load_checkpoint(run)
    states = ckpt.load_env_states(run, saved)
    assert states is not None and len(states) == 1  # one per training process


@pytest.mark.parametrize("where", ["in the checkpoint", "beside it (earlier versions)"])
def test_a_changed_environment_state_is_not_unpickled_and_the_run_goes_on(
    tmp_path: Path, where: str
) -> None:
    run = tmp_path / "run"
    Trainer(config(run)).run()
    saved = torch.load(run / "checkpoint.pt", weights_only=True)
    state = saved.pop(ckpt.ENV_STATE_KEY)
    truncated = state[: len(state) // 2]
    if where == "in the checkpoint":
        saved[ckpt.ENV_STATE_KEY] = truncated
    else:  # an earlier version's file: never signed
        del saved[ckpt.ENV_STATE_MAC_KEY]
        (run / ckpt.ENV_STATE_FILE).write_bytes(state.numpy().tobytes())
    torch.save(saved, run / "checkpoint.pt")
    with pytest.warns(ckpt.UnverifiedStateWarning, match="start new episodes"):
        resumed = Trainer(config(run, "total_timesteps=256"), resume=run)
    assert resumed.step == 192  # the model, optimizer and step are restored
    assert resumed.run().steps == 256


def test_without_a_key_the_run_trains_and_resumes_with_new_episodes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("")
    monkeypatch.setenv(ckpt.KEY_FILE_VARIABLE, str(not_a_directory / "key"))  # cannot be made
    run = tmp_path / "run"
    with pytest.warns(ckpt.UnverifiedStateWarning, match="cannot make the key"):
        Trainer(config(run)).run()
    with pytest.warns(ckpt.UnverifiedStateWarning, match="start new episodes"):
        resumed = Trainer(config(run, "total_timesteps=256"), resume=run)
    assert resumed.step == 192


def test_a_crafted_environment_state_never_runs(tmp_path: Path) -> None:
    """Unpickling runs code: a run directory from elsewhere must not get to run any."""
    run = tmp_path / "run"
    Trainer(config(run)).run()
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (marker.write_text, ("pwned",))

    saved = torch.load(run / "checkpoint.pt", weights_only=True)
    crafted = pickle.dumps([Payload()])
    saved[ckpt.ENV_STATE_KEY] = torch.frombuffer(bytearray(crafted), dtype=torch.uint8)
    saved[ckpt.ENV_STATE_MAC_KEY] = "0" * 64  # a signature made without this user's key
    torch.save(saved, run / "checkpoint.pt")
    with pytest.warns(ckpt.UnverifiedStateWarning):
        Trainer(config(run, "total_timesteps=256"), resume=run).run()
    assert not marker.exists()
    # The same bytes signed with this user's key are trusted (and would run): the key is
    # what keeps other people's pickles out.
    assert ckpt.sign(crafted) != "0" * 64


def poison_after(iterations: int, poison):
    """A ppo_update that runs the real one, then calls ``poison(net, stats)`` from the
    ``iterations``-th call on."""
    calls = []
    real = ppo_algorithm.ppo_update

    def update(net, *args, **kwargs):
        stats = real(net, *args, **kwargs)
        calls.append(1)
        if len(calls) >= iterations:
            poison(net, stats)
        return stats

    return update


def nan_value_loss(net, stats) -> None:
    stats["value_loss"] = float("nan")
    with torch.no_grad():
        next(net.parameters()).fill_(float("nan"))


def nan_parameter(net, stats) -> None:
    with torch.no_grad():
        dict(net.named_parameters())["value_head.proj.weight"][0, 0] = float("inf")


@pytest.mark.parametrize(
    ("poison", "message"),
    [
        (nan_value_loss, r"training stopped at step 64: the loss term value_loss is nan"),
        (nan_parameter, r"parameter value_head\.proj\.weight holds non-finite numbers"),
    ],
    ids=["loss", "parameter"],
)
def test_a_non_finite_update_stops_training_and_keeps_the_last_good_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, poison, message: str
) -> None:
    monkeypatch.setattr(ppo_algorithm, "ppo_update", poison_after(2, poison))
    run = tmp_path / "run"
    with pytest.raises(NonFiniteError, match=message):
        Trainer(config(run)).run()
    saved = ckpt.load_checkpoint(run)
    assert saved["step"] == 64
    assert ckpt.first_non_finite(saved["model"]) is None


def test_a_non_finite_checkpoint_is_never_written(tmp_path: Path) -> None:
    model = {"w": torch.tensor([1.0, float("nan")])}
    with pytest.raises(
        ckpt.CheckpointError, match=r"model state holds non-finite numbers \(model\.w\)"
    ):
        ckpt.save_checkpoint(tmp_path, {"model": model, "optimizer": {}}, None)
    assert not (tmp_path / "checkpoint.pt").exists()


def test_training_into_a_directory_holding_a_run_is_refused(tmp_path: Path) -> None:
    run = tmp_path / "run"
    Trainer(config(run)).run()
    before = (run / "checkpoint.pt").read_bytes(), (run / "metrics.jsonl").read_text()
    with pytest.raises(RunDirError, match=rf"{run} already holds a run .*entityrl train --resume"):
        Trainer(config(run, env="CherryPick"))
    assert ((run / "checkpoint.pt").read_bytes(), (run / "metrics.jsonl").read_text()) == before
    (tmp_path / "empty").mkdir()
    assert Trainer(config(tmp_path / "empty")).run().steps == 192  # an empty one is fine


def test_a_checkpoint_with_a_non_finite_parameter_is_refused_when_loaded(tmp_path: Path) -> None:
    run = tmp_path / "run"
    Trainer(config(run)).run()
    saved = torch.load(run / "checkpoint.pt", weights_only=True)
    saved["model"]["value_head.proj.bias"][0] = float("nan")
    torch.save(saved, run / "checkpoint.pt")
    with pytest.raises(
        ckpt.CheckpointError, match=r"diverged model: parameter value_head\.proj\.bias"
    ):
        ckpt.load_checkpoint(run)
