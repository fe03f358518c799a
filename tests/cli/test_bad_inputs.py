"""The command line's bad-input corpus: every case ends in one line, ``entityrl CMD: error:
...``, naming what was wrong; where the user's own code failed, that line is followed by the
user's frames only, never entityrl's."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from entityrl.cli.main import main

FUZZ = Path(__file__).resolve().parent.parent / "fuzz"
SMALL = [
    "rollout.num_envs=8",
    "rollout.steps=8",
    "optim.bs=32",
    "net.d_model=16",
    "total_timesteps=192",
    "log.tensorboard=false",
    "log.progress=false",
    "log.checkpoint_interval=64",
]

USER_ENVS = '''
import os
import signal

import numpy as np

from entityrl.env import CategoricalActionSpace, Entity, Environment, ObsSpace
from broken_envs import Boxes


class DictSpace(Boxes):
    def obs_space(self):
        return {"Box": Entity(["weight", "x"])}


class Abstract(Environment):
    def obs_space(self):
        return ObsSpace({"Box": Entity(["x"])})


class InitRaises(Boxes):
    def __init__(self):
        raise RuntimeError("my simulator failed to load its map")


class Dies(Boxes):
    """The process of the environment seeded 5 is killed as it makes its 22nd observation (in the
    second rollout)."""

    def act(self, actions):
        if self.index == 5 and self.steps == 21:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().act(actions)
'''


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A current directory with the user's module ``user_envs.py``."""
    (tmp_path / "user_envs.py").write_text(textwrap.dedent(USER_ENVS))
    (tmp_path / "syntax_error.py").write_text("def broken(:\n    pass\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(FUZZ))
    return tmp_path


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str]]:
    code = main(list(argv))
    return code, capsys.readouterr().err.splitlines()


def trained_run(workdir: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    assert main(["train", "Count", *SMALL, "log.run_dir=runs/count"]) == 0
    capsys.readouterr()
    return workdir / "runs" / "count"


def malformed_metrics(run: Path) -> None:
    with (run / "metrics.jsonl").open("a") as f:
        f.write("not json\n")


# (arguments, exit code, what the one line says after "entityrl CMD: error: ")
ONE_LINE_CASES = {
    "train: worker processes for a multi-player game": (
        ["train", "PackHunt", "rollout.processes=2", *SMALL],
        2,
        r"rollout.processes: PackHunt is a multi-player game, whose games step in the training "
        r"process \(got processes=2; use processes=1\)",
    ),
    "train: self-play in a one-player environment": (
        ["train", "CherryPick", "algo=selfplay", *SMALL],
        2,
        r"algo=selfplay needs a multi-player environment; CherryPick has one player",
    ),
    "eval of a file that is not a checkpoint": (
        ["eval", "user_envs.py"],
        2,
        r"user_envs.py is not a checkpoint: expected a checkpoint.pt written by entityrl train",
    ),
    "train: obs_space() returns a dict": (
        ["train", "user_envs:DictSpace", *SMALL],
        1,
        r"DictSpace: obs_space\(\): expected an ObsSpace, got dict",
    ),
    "play: obs_space() returns a dict": (
        ["play", "user_envs:DictSpace", "--random-agent", "--steps", "1"],
        2,
        r"DictSpace: obs_space\(\): expected an ObsSpace, got dict",
    ),
    "train: an abstract environment class": (
        ["train", "user_envs:Abstract"],
        2,
        r"'user_envs:Abstract' is an abstract class: it does not implement act\(\), "
        r"action_space\(\), reset\(\)",
    ),
    "train: validation failure with env.validate=true": (
        ["train", "broken_envs:Boxes", *SMALL, "env.validate=true", "env.kwargs.kind=nan reward"],
        1,
        r"Boxes: Observation\.reward: expected a finite number, got nan",
    ),
    "train: NaN reward after the fully validated steps, default checks": (
        ["train", "broken_envs:Boxes", *SMALL, "env.kwargs.kind=nan reward", "env.kwargs.at=20"],
        1,
        r"Boxes \(environment \d\): Observation\.reward: expected a finite number, got nan; "
        r"the last checkpoint, of step 64, is kept: continue with `entityrl train --resume ",
    ),
    "train --resume of a directory that is not a run": (
        ["train", "--resume", "/nonexistent"],
        2,
        r"--resume /nonexistent: not a run directory \(expected a directory holding "
        r"checkpoint.pt and config.yaml",
    ),
    "train: total_timesteps not a whole number": (
        ["train", "Count", "total_timesteps=1500.5"],
        2,
        r"config key 'total_timesteps': Value '1500.5' of type 'float' could not be converted",
    ),
    "plot --out in a directory that does not exist": (
        ["plot", "runs/count", "--out", "/nonexistent/d/x.png"],
        2,
        r"--out /nonexistent/d/x.png: directory /nonexistent/d does not exist",
    ),
    "plot --out that is not a PNG": (
        ["plot", "runs/count", "--out", "x.txt"],
        2,
        r"--out x.txt: expected a .png file name, got .txt suffix",
    ),
    "plot of a run with a malformed metrics line": (
        ["plot", "runs/count"],
        2,
        r"runs/count/metrics.jsonl: line 4 is not JSON",
    ),
    "train into a directory holding another run": (
        ["train", "CherryPick", "log.run_dir=runs/count"],
        2,
        r"runs/count already holds a run \(checkpoint.pt, config.yaml, metrics.jsonl\); "
        r"continue it with `entityrl train --resume runs/count`",
    ),
    "train: a killed environment worker": (
        ["train", "user_envs:Dies", *SMALL, "rollout.processes=2", "log.run_dir=runs/dies"],
        1,
        r"environment worker 1 \(environments 4..7\) died unexpectedly while running "
        r"'_worker_rollout' \(killed by signal SIGKILL\); the last checkpoint, of step 64, is "
        r"kept: continue with `entityrl train --resume runs/dies`",
    ),
}
NEEDS_RUN = {
    "plot --out in a directory that does not exist": None,
    "plot --out that is not a PNG": None,
    "plot of a run with a malformed metrics line": malformed_metrics,
    "train into a directory holding another run": None,
}


@pytest.mark.parametrize("case", list(ONE_LINE_CASES))
def test_a_bad_input_gives_one_line(
    case: str, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv, expected_code, message = ONE_LINE_CASES[case]
    if case in NEEDS_RUN:
        run = trained_run(workdir, capsys)
        prepare = NEEDS_RUN[case]
        if prepare is not None:
            prepare(run)
    code, lines = run_cli(capsys, *argv)
    assert code == expected_code
    assert len(lines) == 1, lines
    assert re.match(rf"entityrl {argv[0]}: error: {message}", lines[0]), lines[0]


def test_a_whole_number_written_as_a_float_is_accepted(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["train", "Count", "total_timesteps=1e5", "--show-config"]) == 0
    assert "total_timesteps: 100000" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "first_line", "frames"),
    [
        (
            ["train", "user_envs:InitRaises", *SMALL],
            r"RuntimeError: my simulator failed to load its map \(raised by your code:\)",
            ["user_envs.py", 'raise RuntimeError("my simulator failed to load its map")'],
        ),
        (
            ["play", "syntax_error:Env", "--random-agent"],
            r".*syntax_error.py, line 1: SyntaxError",
            ["syntax_error.py", "def broken(:", "SyntaxError"],
        ),
    ],
    ids=["__init__ raises", "syntax error"],
)
def test_the_users_failing_code_is_shown_without_entityrls_frames(
    argv: list[str],
    first_line: str,
    frames: list[str],
    workdir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, lines = run_cli(capsys, *argv)
    assert code == 1
    assert re.match(rf"entityrl {argv[0]}: error: {first_line}", lines[0]), lines[0]
    shown = "\n".join(lines[1:])
    assert all(part in shown for part in frames), shown
    assert "entityrl/" not in shown and "site-packages" not in shown
