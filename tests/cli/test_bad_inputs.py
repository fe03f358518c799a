"""The command line's bad-input corpus: every case ends in one line, ``entityrl CMD: error:
...``, naming what was wrong; where the user's own code failed, that line is followed by the
user's frames only, never entityrl's."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
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


class ActRaises(Boxes):
    def act(self, actions):
        if self.index == 1:
            raise RuntimeError("my simulator lost its map")
        return super().act(actions)


def no_arguments():
    """A scripted player that forgot its observation."""
    return {}


class Dies(Boxes):
    """The process of the environment seeded 5 is killed as it makes its 22nd observation (in the
    second rollout)."""

    def act(self, actions):
        if self.index == 5 and self.steps == 21:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().act(actions)
'''


# Survival world files of the current directory (by name).
WORLDS = {
    "outside.yaml": "name: W\ninclude: [/etc/hostname]\n",
    "up.yaml": "name: W\ninclude: [../secrets.yaml]\n",
    "quotes.yaml": "name: W\ninclude: [notes.yaml]\n",
    # A line of a file that is no world: its content must not be echoed.
    "notes.yaml": "root:x:0:0:root:/root:/bin/bash daemon:x:1:1:daemon:/usr/sbin:/bin/sh: 1\n",
    "unclosed.yaml": "name: W\nmap: [1, 2\n",
}


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A current directory with the user's module ``user_envs.py`` and world files."""
    (tmp_path / "user_envs.py").write_text(textwrap.dedent(USER_ENVS))
    (tmp_path / "syntax_error.py").write_text("def broken(:\n    pass\n")
    for name, text in WORLDS.items():
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(FUZZ))
    return tmp_path


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str]]:
    code = main(list(argv))
    return code, capsys.readouterr().err.splitlines()


def trained_run(workdir: Path, capsys: pytest.CaptureFixture[str], env: str = "Count") -> Path:
    """A run of ``env`` in ``runs/<env in lower case>``."""
    run = workdir / "runs" / env.lower()
    assert main(["train", env, *SMALL, f"log.run_dir={run}"]) == 0
    capsys.readouterr()
    return run


def malformed_metrics(run: Path) -> None:
    with (run / "metrics.jsonl").open("a") as f:
        f.write("not json\n")


# (arguments, exit code, what the one line says after "entityrl CMD: error: ")
ONE_LINE_CASES = {
    "train: an argument the environment's constructor refuses": (
        ["train", "MoveToOrigin", "env.kwargs.max_steps=0", *SMALL],
        2,
        r"env\.kwargs: MoveToOrigin: max_steps must be >= 1, got 0",
    ),
    "train: more worker processes than games of a multi-player game": (
        ["train", "PackHunt", *SMALL, "rollout.num_envs=2", "optim.bs=16", "rollout.processes=3"],
        2,
        r"rollout.processes=3: PackHunt is a multi-player game, split over the worker processes "
        r"a whole game at a time, and there are only 2 games",
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
    "plot --out under a file": (
        ["plot", "runs/count", "--out", "user_envs.py/d/x.png"],
        2,
        r"--out user_envs.py/d/x.png: cannot write it: a file stands where a directory of it "
        r"would be",
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
    "train: a survival world's config= that is a list": (
        ["train", "DayAndNight", "env.kwargs.config=[1,2]", *SMALL],
        2,
        r"env.kwargs: config: expected a preset name \(DayAndNight, FourSeason\), a YAML file "
        r"or a mapping of sections, got a list",
    ),
    "train: a survival world's config= that is no preset": (
        ["train", "DayAndNight", "env.kwargs.config=Atlantis", *SMALL],
        2,
        r"env.kwargs: no world config 'Atlantis': expected a YAML file or a preset name",
    ),
    "train: an environment module given as a path": (
        ["train", "../../x:Y"],
        2,
        r"environment '../../x:Y': expected module:Class with a module importable by name "
        r"\(from the current directory or PYTHONPATH\), got the path '../../x'; run from the "
        r"folder of x.py with x:Y",
    ),
    "train: an environment module given as a path in env.id": (
        ["train", "CherryPick", "env.id=./x:Y"],
        2,
        r"environment './x:Y': expected module:Class",
    ),
    "train: a bad override after an option": (
        ["train", "CherryPick", "--show-config", "ppo.gama=0.9"],
        2,
        r"unknown config key 'ppo.gama'. Did you mean 'gamma'\?",
    ),
    "eval --opponent: a scripted player of the wrong signature": (
        ["eval", "runs/rockpaperscissorsduel", "--opponent", "user_envs:no_arguments"],
        2,
        r"--opponent user_envs:no_arguments: expected a function of one argument \(the "
        r"player's Observation\), got no_arguments\(\)",
    ),
    "survival check: an include by absolute path": (
        ["survival", "check", "outside.yaml"],
        2,
        r"outside.yaml: field include: '/etc/hostname' leads outside /\S+; expected a file in "
        r"that folder or below it \(a relative path without '..'\), a preset \(DayAndNight, "
        r"FourSeason\) or a preset module \(modules/...\)$",
    ),
    "survival check: an include out of the folder": (
        ["survival", "check", "up.yaml"],
        2,
        r"up.yaml: field include: '../secrets.yaml' leads outside /\S+; expected a file in "
        r"that folder",
    ),
    "survival check: an include of a file that is no world": (
        ["survival", "check", "quotes.yaml"],
        2,
        r"notes.yaml: field root:x:0:0:root:/root:/bin/bash daemon:x:1:1:daemon:/usr/...: "
        r"unknown field; expected one of: name, horizon, map, terrain, agent,",
    ),
    "survival check: a file that is not YAML": (
        ["survival", "check", "unclosed.yaml"],
        2,
        r"unclosed.yaml: not valid YAML at line 3: did not find expected ',' or ']'$",
    ),
    "survival check: no such world": (
        ["survival", "check", "Atlantis"],
        2,
        r"no world config 'Atlantis': expected a YAML file or a preset name \(DayAndNight, "
        r"FourSeason\)",
    ),
    "survival metrics: an unknown task": (
        ["survival", "metrics", "DayAndNight", "--episodes", "2", "--task", "fly"],
        2,
        r"DayAndNight: unknown task 'fly'; expected one of: drink water, ",
    ),
}
# Cases that need a trained run: of which environment, and how to damage it.
NEEDS_RUN: dict[str, tuple[str, Callable[[Path], None] | None]] = {
    "plot --out under a file": ("Count", None),
    "plot --out that is not a PNG": ("Count", None),
    "plot of a run with a malformed metrics line": ("Count", malformed_metrics),
    "train into a directory holding another run": ("Count", None),
    "eval --opponent: a scripted player of the wrong signature": ("RockPaperScissorsDuel", None),
}


@pytest.mark.parametrize("case", list(ONE_LINE_CASES))
def test_a_bad_input_gives_one_line(
    case: str, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv, expected_code, message = ONE_LINE_CASES[case]
    if case in NEEDS_RUN:
        env, prepare = NEEDS_RUN[case]
        run = trained_run(workdir, capsys, env)
        if prepare is not None:
            prepare(run)
    code, lines = run_cli(capsys, *argv)
    assert code == expected_code
    assert len(lines) == 1, lines
    assert re.match(rf"entityrl {argv[0]}: error: {message}", lines[0]), lines[0]


def test_an_option_that_does_not_exist_is_named_by_its_command(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:  # argparse exits
        main(["train", "CherryPick", "--steps", "100", "seed=1"])
    assert stopped.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines[-1] == (
        "entityrl train: error: unrecognized argument '--steps' (options: entityrl train "
        "--help; overrides are key=value, without dashes)"
    )
    assert lines[0].startswith("usage: entityrl train")  # argparse's usage, as for every option


def test_a_whole_number_written_as_a_float_is_accepted(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["train", "Count", "total_timesteps=1e5", "--show-config"]) == 0
    assert "total_timesteps: 100000" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "first_line", "frames", "calls_into_it"),
    [
        (
            ["train", "user_envs:InitRaises", *SMALL],
            r"RuntimeError: my simulator failed to load its map \(raised by your code:\)",
            ["user_envs.py", 'raise RuntimeError("my simulator failed to load its map")'],
            0,
        ),
        (
            ["play", "syntax_error:Env", "--random-agent"],
            r".*syntax_error.py, line 1: SyntaxError",
            ["syntax_error.py", "def broken(:", "SyntaxError"],
            0,
        ),
        (
            ["train", "user_envs:ActRaises", *SMALL, "rollout.processes=2", "log.run_dir=runs/r"],
            r"environment worker 0 \(environments 0..3\) raised an exception while running "
            r"'_worker_rollout': RuntimeError: my simulator lost its map; no checkpoint was "
            r"written to runs/r$",
            ["user_envs.py", 'raise RuntimeError("my simulator lost its map")'],
            1,  # the frame of entityrl's that called the environment
        ),
    ],
    ids=["__init__ raises", "syntax error", "act() raises in a worker process"],
)
def test_the_users_failing_code_is_shown_without_entityrls_frames(
    argv: list[str],
    first_line: str,
    frames: list[str],
    calls_into_it: int,
    workdir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, lines = run_cli(capsys, *argv)
    assert code == 1
    assert re.match(rf"entityrl {argv[0]}: error: {first_line}", lines[0]), lines[0]
    shown = "\n".join(lines[1:])
    assert all(part in shown for part in frames), shown
    entityrls = [line for line in lines[1:] if re.match(r'\s*File ".*/entityrl/', line)]
    assert len(entityrls) == calls_into_it, shown
    assert "Traceback" not in shown and "site-packages" not in shown


def test_overrides_may_follow_options(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "CherryPick", "--show-config", "seed=7", "rollout.num_envs=4"]) == 0
    out = capsys.readouterr().out
    assert "\nseed: 7\n" in out and "  num_envs: 4\n" in out


def test_plot_creates_the_missing_directories_of_its_out(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = trained_run(workdir, capsys)
    assert main(["plot", str(run), "--out", "plots/new/curves.png"]) == 0
    assert (workdir / "plots" / "new" / "curves.png").stat().st_size > 0
