"""``entityrl train``: the commands it prints at the end work as printed."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

import pytest

from entityrl.cli.main import main

ENV_MODULE = '''
from entityrl.envs.move_to_origin import MoveToOrigin


class ShortWalk(MoveToOrigin):
    """MoveToOrigin under another name, outside entityrl. Optimal return: as MoveToOrigin's."""
'''
# Eight PPO iterations of a tiny network on five-step episodes: a second or so.
TINY = [
    "env.kwargs={max_steps: 5}",
    "rollout.num_envs=8",
    "rollout.steps=10",
    "total_timesteps=640",
    "net.d_model=8",
    "net.n_head=1",
    "net.n_layer=1",
    "ppo.update_epochs=1",
    "log.tensorboard=false",
    "log.progress=false",
    "torch_threads=1",
]


def printed_commands(out: str) -> dict[str, list[str]]:
    """The "evaluate", "watch" and "continue" commands, split as a shell would."""
    commands = {}
    for line in out.splitlines():
        label, _, command = line.strip().partition(": ")
        if label in ("evaluate", "watch", "continue"):
            commands[label] = shlex.split(command)
    return commands


def test_the_printed_commands_work_for_an_environment_given_by_import_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the command adds the current directory
    monkeypatch.setenv("COLUMNS", "200")
    (tmp_path / "walk_module.py").write_text(ENV_MODULE)
    run_dir = tmp_path / "my runs" / "walk"  # a space, which the commands must quote

    assert main(["train", "walk_module:ShortWalk", *TINY, f"log.run_dir={run_dir}"]) == 0
    commands = printed_commands(capsys.readouterr().out)

    assert commands["evaluate"] == ["entityrl", "eval", str(run_dir)]
    assert main([*commands["evaluate"][1:], "--episodes", "2"]) == 0
    assert "2 episodes" in capsys.readouterr().out

    assert commands["watch"] == [
        "entityrl",
        "play",
        "walk_module:ShortWalk",
        "--agent",
        str(run_dir),
    ]
    assert main([*commands["watch"][1:], "--steps", "6", "--delay", "0"]) == 0
    # The agent acted, and the run's own max_steps applies: one episode ended.
    assert "6 steps, 1 episode ended, mean return " in capsys.readouterr().out

    assert commands["continue"] == [
        "entityrl", "train", "--resume", str(run_dir), "total_timesteps=1280"
    ]  # fmt: skip
    assert main(commands["continue"][1:]) == 0
    assert "finished after 1,280 steps" in capsys.readouterr().out


def test_the_run_directory_of_an_environment_given_by_import_path_is_a_plain_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    (tmp_path / "walk_module.py").write_text(ENV_MODULE)
    assert main(["train", "walk_module:ShortWalk", *TINY]) == 0
    (run_dir,) = (tmp_path / "runs").iterdir()
    # No colon: a name Windows accepts and a shell takes as is.
    assert run_dir.name.startswith("walk_module.ShortWalk-")
    assert f"run directory: runs/{run_dir.name}" in capsys.readouterr().out


def test_a_training_command_says_at_once_that_it_starts_to_a_terminal_only(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from entityrl.cli.main import announce_start

    announce_start(["train", "CherryPick"])  # captured: not a terminal
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    announce_start(["train", "CherryPick", "--show-config"])
    announce_start(["eval", "runs/x"])
    assert capsys.readouterr().err == ""
    announce_start(["train", "CherryPick", "seed=2"])
    assert capsys.readouterr().err.startswith("entityrl train: starting")


def test_the_summary_reports_the_last_evaluation_when_one_ran(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tiny = [*TINY, "env.id=MoveToOrigin"]
    assert main(["train", "MoveToOrigin", *tiny, f"log.run_dir={tmp_path / 'plain'}"]) == 0
    plain = capsys.readouterr().out
    assert "mean return of the last training episodes: " in plain
    assert "evaluation" not in plain.split("run directory")[0]

    evaluated = [*tiny, "eval.interval=320", "eval.episodes=4", "eval.deterministic=true"]
    assert main(["train", "MoveToOrigin", *evaluated, f"log.run_dir={tmp_path / 'eval'}"]) == 0
    out = capsys.readouterr().out
    summary = re.search(
        r"mean return of the last evaluation \(4 episodes, most probable actions\): (\S+) "
        r"\(of the last training episodes: (\S+)\)",
        out,
    )
    assert summary is not None, out
    records = [json.loads(line) for line in (tmp_path / "eval" / "metrics.jsonl").open()]
    last_eval = [r["eval/episode_return"] for r in records if "eval/episode_return" in r][-1]
    assert float(summary.group(1)) == pytest.approx(last_eval, abs=1e-3)
