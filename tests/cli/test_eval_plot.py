"""``entityrl eval``, ``entityrl plot`` and ``entityrl play --agent`` on a freshly trained run."""

from __future__ import annotations

import io
import json
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from entityrl.cli.eval import GREEDY, SAMPLED, format_table
from entityrl.cli.main import main
from entityrl.cli.plot import load_records
from entityrl.training import Evaluation, evaluate, load_agent, make_eval_env, train

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MAX_STEPS = 5


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Eight PPO iterations on MoveToOrigin episodes of five steps: a second or so."""
    directory = tmp_path_factory.mktemp("run")
    overrides = {
        "env.kwargs": f"{{max_steps: {MAX_STEPS}}}",
        "rollout.num_envs": 8,
        "rollout.steps": 10,
        "total_timesteps": 640,
        "net.d_model": 8,
        "net.n_head": 1,
        "net.n_layer": 1,
        "ppo.update_epochs": 1,
        "log.run_dir": directory,
        "log.tensorboard": "false",
        "log.progress": "false",
        "torch_threads": 1,
    }
    train("MoveToOrigin", overrides=[f"{key}={value}" for key, value in overrides.items()])
    return directory


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Entity descriptions stay on one line each, so the play tests can match them."""
    monkeypatch.setenv("COLUMNS", "200")


def run_cli(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def table_row(out: str, metric: str) -> list[float]:
    """mean, std, min, max and episode count of one metric of ``entityrl eval``'s table."""
    line = next(line for line in out.splitlines() if line.split()[:1] == [metric])
    return [float(cell) for cell in line.split()[1:]]


# ---------------------------------------------------------------------------- eval
@pytest.mark.parametrize("deterministic", [False, True])
def test_eval_reports_what_evaluating_with_the_same_seed_gives(run_dir, capsys, deterministic):
    flags = ["--deterministic"] if deterministic else []
    code, out, err = run_cli(
        capsys, "eval", run_dir, "--episodes", "6", "--seed", "3", "--num-envs", "4", *flags
    )
    assert code == 0, err
    agent = load_agent(run_dir, deterministic=deterministic, seed=3)
    with make_eval_env(agent, 4, seed=3) as env:
        expected = evaluate(agent, env, 6)
    mean, std, low, high, count = table_row(out, "episode_return")
    assert mean == pytest.approx(expected.mean(), rel=1e-3)
    assert std == pytest.approx(expected.std(), rel=1e-3, abs=1e-6)
    assert (low, high) == pytest.approx((expected.returns.min(), expected.returns.max()), rel=1e-3)
    assert count == 6
    assert table_row(out, "episode_length") == [MAX_STEPS, 0, MAX_STEPS, MAX_STEPS, 6]
    mode = GREEDY if deterministic else SAMPLED
    assert (
        f"MoveToOrigin agent trained 640 steps ({run_dir / 'checkpoint.pt'}): 6 episodes, {mode}, seed 3"
        in out
    )


def test_eval_reports_sampled_then_greedy_actions_each_labelled(run_dir, capsys):
    code, out, err = run_cli(capsys, "eval", run_dir, "--episodes", "6", "--seed", "3")
    assert code == 0, err
    sampled, greedy = out.split(f"episodes, {GREEDY}, seed 3")
    assert f"6 episodes, {SAMPLED}, seed 3" in sampled
    agent = load_agent(run_dir, deterministic=True, seed=3)
    with make_eval_env(agent, 6, seed=3) as env:
        expected = evaluate(agent, env, 6)
    assert table_row(greedy, "episode_return")[0] == pytest.approx(expected.mean(), rel=1e-3)
    assert "Stable-Baselines3" in GREEDY


def test_the_table_lists_return_and_length_first_then_the_environments_metrics():
    result = Evaluation(
        4,
        {
            "zeta": np.array([1.0, 3.0]),
            "episode_length": np.array([5.0, 5.0, 5.0, 5.0]),
            "alpha": np.array([0.5, 0.5, 1.0, 1.0]),
            "episode_return": np.array([-1.0, 0.0, 1.0, 2.0]),
        },
    )
    lines = format_table(result).splitlines()
    assert [line.split()[0] for line in lines] == [
        "metric",
        "episode_return",
        "episode_length",
        "alpha",
        "zeta",
    ]
    assert lines[0].split()[1:] == ["mean", "std", "min", "max", "episodes"]
    assert table_row("\n".join(lines), "episode_return") == [
        0.5,
        pytest.approx(1.118, 1e-3),
        -1,
        2,
        4,
    ]
    assert table_row("\n".join(lines), "zeta") == [2, 1, 1, 3, 2]


def test_eval_of_an_unreadable_checkpoint_is_a_one_line_error(run_dir, tmp_path, capsys):
    data = (run_dir / "checkpoint.pt").read_bytes()
    (tmp_path / "checkpoint.pt").write_bytes(data[:1000])
    code, out, err = run_cli(capsys, "eval", tmp_path)
    assert code == 2 and out == ""
    assert err.startswith("entityrl eval: error: ") and "not a readable checkpoint" in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_eval_of_a_directory_without_checkpoint_names_it(tmp_path, capsys):
    code, _, err = run_cli(capsys, "eval", tmp_path)
    assert code == 2
    assert f"no checkpoint at '{tmp_path}'" in err


def test_eval_of_a_run_on_an_unregistered_environment_says_how_to_evaluate_it(
    run_dir, tmp_path, capsys
):
    saved = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    saved["config"]["env"]["id"] = "MyOwnWorld"
    torch.save(saved, tmp_path / "custom.pt")
    code, _, err = run_cli(capsys, "eval", tmp_path / "custom.pt")
    assert code == 2
    assert "'MyOwnWorld', which is not a registered environment" in err
    assert "entityrl.envs.register('MyOwnWorld', MyOwnWorld)" in err


def test_eval_rejects_zero_episodes(run_dir, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["eval", str(run_dir), "--episodes", "0"])
    assert exit_info.value.code == 2
    assert "expected a whole number >= 1, got '0'" in capsys.readouterr().err


def test_eval_of_episodes_longer_than_max_steps_is_a_one_line_error(run_dir, capsys):
    code, _, err = run_cli(capsys, "eval", run_dir, "--max-steps", MAX_STEPS - 1)
    assert code == 2
    assert err.startswith("entityrl eval: error: the episode of environment 0 has not ended")
    assert len(err.strip().splitlines()) == 1


# ---------------------------------------------------------------------------- plot
def test_plot_writes_a_png_beside_the_run_and_nothing_else(run_dir, tmp_path, capsys):
    copy = shutil.copytree(run_dir, tmp_path / "run")
    before = set(copy.iterdir())
    code, out, err = run_cli(capsys, "plot", copy)
    assert code == 0, err
    png = copy / "learning_curves.png"
    assert out.strip() == f"wrote {png}"
    assert png.read_bytes().startswith(PNG_SIGNATURE) and png.stat().st_size > 10_000
    assert set(copy.iterdir()) == before | {png}  # no temporary file left behind


def test_plot_overlays_runs_and_chooses_metrics_by_short_name(run_dir, tmp_path, capsys):
    out_file = tmp_path / "two.png"
    code, _, err = run_cli(
        capsys, "plot", run_dir, run_dir, "--out", out_file, "--metrics", "entropy,episode_return"
    )
    assert code == 0, err
    assert out_file.read_bytes().startswith(PNG_SIGNATURE)


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "has no metrics.jsonl (is it a training run directory?)"),
        ("", "metrics.jsonl holds no complete record: the run has not logged yet"),
        ('{"step": 1, "a": ', "metrics.jsonl holds no complete record: the run has not logged yet"),
        ('{"step": 1}\n{"step": 2,\n{"step": 3}\n', "metrics.jsonl: line 2 is not JSON"),
    ],
    ids=["no metrics file", "empty", "first line half-written", "not JSON"],
)
def test_plot_explains_a_directory_without_metrics(tmp_path, capsys, content, message):
    if content is not None:
        (tmp_path / "metrics.jsonl").write_text(content)
    code, _, err = run_cli(capsys, "plot", tmp_path)
    assert code == 2
    assert message in err
    assert not list(tmp_path.glob("*.png"))


def test_plot_of_a_run_that_is_writing_leaves_out_its_half_written_last_line(tmp_path, capsys):
    records = [{"step": 8, "a/loss": 1.0}, {"step": 16, "a/loss": 0.5}]
    complete = "".join(json.dumps(r) + "\n" for r in records)
    (tmp_path / "metrics.jsonl").write_text(complete + '{"step": 24, "a/lo')
    assert load_records(tmp_path) == records
    code, _, err = run_cli(capsys, "plot", tmp_path, "--metrics", "loss")
    assert code == 0, err
    assert (tmp_path / "learning_curves.png").read_bytes().startswith(PNG_SIGNATURE)


def test_plot_of_a_missing_directory_says_so(tmp_path, capsys):
    code, _, err = run_cli(capsys, "plot", tmp_path / "missing")
    assert code == 2
    assert f"{tmp_path / 'missing'} is not a directory" in err


def test_plot_names_the_metrics_it_knows_when_asked_for_another(run_dir, tmp_path, capsys):
    code, _, err = run_cli(capsys, "plot", run_dir, "--out", tmp_path / "x.png", "--metrics", "foo")
    assert code == 2
    assert "no run logged a metric 'foo'; logged metrics: episode/episode_length" in err
    assert "loss/entropy" in err and ", time" not in err


def test_plot_asks_for_the_full_name_of_an_ambiguous_metric(tmp_path, capsys):
    records = [{"step": 1, "a/loss": 1.0, "b/loss": 2.0}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    code, _, err = run_cli(capsys, "plot", tmp_path, "--metrics", "loss")
    assert code == 2
    assert "metric 'loss' is ambiguous: a/loss, b/loss; give the full name" in err


# ---------------------------------------------------------------------------- play --agent
def test_the_agent_plays_the_environment_of_its_run(run_dir, capsys):
    steps = MAX_STEPS + 1
    code, out, err = run_cli(
        capsys, "play", "MoveToOrigin", "--agent", run_dir, "--steps", steps, "--delay", "0"
    )
    assert code == 0, err
    for thruster in ("horizontal_thruster", "vertical_thruster"):
        assert len(re.findall(rf"^{thruster}: Spaceship #0 .* -> ", out, re.MULTILINE)) == steps
    assert "choice (" not in out  # nobody was asked
    # The run's own max_steps applies: one episode ended.
    assert f"{steps} steps, 1 episode ended, mean return " in out


def test_a_person_takes_the_actions_the_agent_does_not(run_dir, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.StringIO("0\n4\nq\n"))  # 100% up, 100% down, quit
    code, out, err = run_cli(
        capsys,
        "play",
        "MoveToOrigin",
        "--agent",
        run_dir,
        "--agent-actions",
        "horizontal_thruster",
        "--delay",
        "0",
    )
    assert code == 0, err
    asked = re.findall(r"^(\w+): Spaceship #0 \([^)]*\)$", out, re.MULTILINE)
    assert asked == ["vertical_thruster"] * 3  # two steps, and the prompt answered with q
    taken = re.findall(r"^vertical_thruster: Spaceship #0 .* -> (.+)$", out, re.MULTILINE)
    assert taken == ["100% up", "100% down"]
    assert len(re.findall(r"^horizontal_thruster: Spaceship #0 .* -> ", out, re.MULTILINE)) == 2
    assert "2 steps, 0 episodes ended" in out


@pytest.mark.parametrize(
    "args, message",
    [
        (["Count"], "the environment does not match the agent trained on MoveToOrigin"),
        (["MoveToOrigin", "--agent-actions", "fly"], "--agent-actions: expected names of"),
        (["MoveToOrigin", "--random-agent"], "choose one of --agent and --random-agent"),
    ],
)
def test_play_with_an_agent_refuses_what_does_not_fit(run_dir, capsys, args, message):
    code, _, err = run_cli(capsys, "play", *args, "--agent", run_dir, "--steps", "1")
    assert code == 2
    assert message in err and "Traceback" not in err


def test_agent_actions_need_an_agent(capsys):
    code, _, err = run_cli(capsys, "play", "MoveToOrigin", "--agent-actions", "vertical_thruster")
    assert code == 2
    assert "--agent-actions needs --agent" in err
