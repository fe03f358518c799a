"""Runs that fail: a kill while a checkpoint is written, a NaN from the network, a directory
that holds another run. None leaves an inconsistent or non-finite checkpoint behind."""

from __future__ import annotations

import datetime
import pickle
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import torch
from test_runner import config, interrupt_after, learning_metrics, parameters

from entityrl.algorithms.ppo import algorithm as ppo_algorithm
from entityrl.env import Observation
from entityrl.envs.minesweeper import MineSweeper
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


@pytest.mark.parametrize("where", ["in the checkpoint", "beside it"])
def test_an_earlier_versions_pickled_environment_state_is_not_unpickled(
    tmp_path: Path, where: str
) -> None:
    run = tmp_path / "run"
    Trainer(config(run)).run()
    saved = torch.load(run / "checkpoint.pt", weights_only=True)
    pickled = pickle.dumps(["a state as earlier versions pickled it"])
    if where == "in the checkpoint":
        saved[ckpt.ENV_STATE_KEY] = torch.frombuffer(bytearray(pickled), dtype=torch.uint8)
    else:
        del saved[ckpt.ENV_STATE_KEY]
        (run / ckpt.ENV_STATE_FILE).write_bytes(pickled)
    torch.save(saved, run / "checkpoint.pt")
    with pytest.warns(ckpt.EnvStateWarning, match=r"earlier version.*start new episodes"):
        resumed = Trainer(config(run, "total_timesteps=256"), resume=run)
    assert resumed.step == 192  # the model, optimizer and step are restored
    assert resumed.run().steps == 256


class Dated(MineSweeper):
    """MineSweeper that keeps a value of a compiled class (not plain data, but picklable)."""

    def reset(self) -> Observation:
        self.started = datetime.date(2026, 1, 1) + datetime.timedelta(
            days=int(self.rng.integers(9))
        )
        return super().reset()


def test_state_that_is_not_plain_data_is_pickled_only_when_asked(tmp_path: Path) -> None:
    def interrupted_then_resumed(run: Path, *extra: str) -> None:
        Trainer(config(run, *extra), env=Dated, on_iteration=interrupt_after(2)).run()
        Trainer(config(run, *extra), env=Dated, resume=run).run()

    whole = tmp_path / "whole"
    with pytest.warns(ckpt.EnvStateWarning):
        Trainer(config(whole), env=Dated).run()

    # By default the run says why the environments are not saved, and resumes with new ones.
    run = tmp_path / "run"
    with pytest.warns(ckpt.EnvStateWarning, match=r"\.started: a datetime:date is not plain"):
        interrupted_then_resumed(run)
    assert not all(torch.equal(a, b) for a, b in zip(_values(whole), _values(run), strict=True))

    # Asked to, it pickles them (signed) and resumes exactly.
    pickled = tmp_path / "pickled"
    with warnings.catch_warnings():
        warnings.simplefilter("error", ckpt.EnvStateWarning)
        interrupted_then_resumed(pickled, "env.pickle_state=true")
    assert all(torch.equal(a, b) for a, b in zip(_values(whole), _values(pickled), strict=True))

    # Without the setting, a resume does not unpickle what was pickled.
    with pytest.warns(ckpt.EnvStateWarning, match=r"pickled part.*not allowed"):
        Trainer(config(pickled, "total_timesteps=256"), env=Dated, resume=pickled)


def _values(run: Path) -> list[torch.Tensor]:
    return list(parameters(run).values())


def test_a_crafted_environment_state_never_runs(tmp_path: Path) -> None:
    """Unpickling runs code: a run directory from elsewhere must not get to run any, not even
    with env.pickle_state=true."""
    run = tmp_path / "run"
    Trainer(config(run)).run()
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (marker.write_text, ("pwned",))

    crafted = pickle.dumps(Payload()).decode("latin-1")
    saved = torch.load(run / "checkpoint.pt", weights_only=True)
    # A pickled part with a signature made without this user's key.
    saved[ckpt.ENV_STATE_KEY] = [{"t": "pickle", "id": 0, "data": crafted, "mac": "0" * 64}]
    torch.save(saved, run / "checkpoint.pt")
    for setting in ("env.pickle_state=false", "env.pickle_state=true"):
        with pytest.warns(ckpt.EnvStateWarning, match="pickled part"):
            Trainer(config(run, setting, "total_timesteps=256"), resume=run)
    assert not marker.exists()

    # Nor can a state build objects of classes the environments do not use.
    attrs = {"envs": {"t": "object", "id": 1, "class": "subprocess:Popen", "attrs": {}}}
    saved[ckpt.ENV_STATE_KEY] = [{"t": "object", "id": 0, "class": "os:PathLike", "attrs": attrs}]
    torch.save(saved, run / "checkpoint.pt")
    with pytest.raises(ckpt.CheckpointError, match=r"cannot restore the environments.*do not use"):
        Trainer(config(run, "total_timesteps=256"), resume=run)


def test_a_run_written_before_a_setting_existed_resumes_at_its_default(tmp_path: Path) -> None:
    run = tmp_path / "run"
    Trainer(config(run)).run()
    saved = torch.load(run / "checkpoint.pt", weights_only=True)
    del saved["config"]["net"]["max_entities"]  # as a version without the setting wrote it
    torch.save(saved, run / "checkpoint.pt")
    assert Trainer(config(run, "total_timesteps=256"), resume=run).run().steps == 256
    with pytest.raises(ckpt.CheckpointError, match=r"differing keys: net\.max_entities"):
        Trainer(config(run, "total_timesteps=320", "net.max_entities=9"), resume=run)


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
