"""entityrl tune: search spaces, a study that writes its best config and resumes."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("optuna", reason="entityrl tune needs the tune extra (optuna)")
import optuna

from entityrl.cli.main import main
from entityrl.training.config import load_config
from entityrl.training.tune import TuneError, Tuner, check_space, parse_space

TINY = ["total_timesteps=1024", "rollout.num_envs=8", "rollout.steps=16", "net.d_model=16",
        "log.tensorboard=false"]  # fmt: skip


@pytest.mark.parametrize(
    ("space", "message"),
    [
        ([1, 2], r"must map config keys to distributions"),
        ({"optim.lr": {"type": "gaussian"}}, r"optim.lr needs a mapping with type float, int or"),
        ({"optim.lr": {"type": "float", "low": 1, "high": 2, "step": 1}}, r"does not take step"),
        ({"optim.lr": {"type": "float", "low": 2, "high": 1}}, r"numbers low < high; got low=2"),
        ({"optim.lr": {"type": "float", "low": 0, "high": 1, "log": True}}, r"needs low > 0"),
        ({"net.d_model": {"type": "categorical", "choices": []}}, r"non-empty list of choices"),
    ],
)
def test_malformed_spaces_are_named(space: object, message: str) -> None:
    with pytest.raises(TuneError, match=message):
        parse_space(space)  # type: ignore[arg-type]


def test_space_values_must_be_valid_settings() -> None:
    with pytest.raises(TuneError, match=r"ppo.no_such_key=1.0 is not a valid setting"):
        check_space(
            "CherryPick",
            [],
            parse_space({"ppo.no_such_key": {"type": "float", "low": 1.0, "high": 2.0}}),
        )
    with pytest.raises(TuneError, match=r"optim.lr=-1.0 is not a valid setting"):
        check_space(
            "CherryPick", [], parse_space({"optim.lr": {"type": "float", "low": -1.0, "high": 1.0}})
        )


def trials(study: Path) -> list[optuna.trial.FrozenTrial]:
    return optuna.load_study(
        study_name="entityrl", storage=f"sqlite:///{study / 'study.db'}"
    ).trials


def test_a_study_writes_its_best_config_and_resumes(tmp_path: Path) -> None:
    study = tmp_path / "study"
    args = ["tune", "CherryPick", *TINY, "--study", str(study), "--episodes", "4"]
    assert main([*args, "--trials", "2"]) == 0
    first = trials(study)
    assert len(first) == 2 and (study / "trial-0001" / "checkpoint.pt").exists()
    best = max(first, key=lambda t: t.value)
    config = load_config(study / "best.yaml")
    assert config.optim.lr == pytest.approx(best.params["optim.lr"])
    assert config.net.d_model == best.params["net.d_model"] and config.total_timesteps == 1024
    assert main([*args, "--trials", "3"]) == 0  # resumes: one more trial, with new values
    resumed = trials(study)
    assert len(resumed) == 3
    assert resumed[2].params not in [t.params for t in first]


def test_best_config_comes_from_an_evaluated_trial(tmp_path: Path) -> None:
    space = {"optim.lr": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True}}
    tuner = Tuner(tmp_path, "CherryPick", TINY, parse_space(space), episodes=4)
    study = optuna.create_study(direction="maximize")
    lr = optuna.distributions.FloatDistribution(1e-4, 1e-2, log=True)
    for value, state in [(0.5, "COMPLETE"), (0.9, "PRUNED")]:
        study.enqueue_trial({"optim.lr": 0.001 if state == "COMPLETE" else 0.002})
        trial = study.ask({"optim.lr": lr})
        trial.report(value, 512)
        if state == "COMPLETE":
            study.tell(trial, value)
        else:
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
    assert study.trials[1].value == 0.9  # Optuna keeps a pruned trial's last running return
    best = tuner.write_best(study)
    assert best is not None and load_config(best).optim.lr == pytest.approx(0.001)
    assert "Best of 1 trial(s)" in best.read_text()


def test_an_interrupted_study_resumes(tmp_path: Path) -> None:
    study = tmp_path / "study"
    command = [sys.executable, "-m", "entityrl", "tune", "CherryPick", *TINY,
               "total_timesteps=4096", "--study", str(study), "--episodes", "4", "--trials", "3"]  # fmt: skip
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith("trial 0: mean return")
    proc.send_signal(signal.SIGINT)  # during trial 1
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "Resume with the same command" in err
    states = [t.state for t in trials(study)]
    assert states[0] == optuna.trial.TrialState.COMPLETE
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    finished = [t for t in trials(study) if t.state == optuna.trial.TrialState.COMPLETE]
    done_states = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    resumed = trials(study)
    assert len([t for t in resumed if t.state in done_states]) == 3
    assert (resumed[0].params, resumed[0].value) == (finished[0].params, finished[0].value)
    assert "resuming the study" in done.stdout


def test_ctrl_c_before_the_trainer_listens_stops_the_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import entityrl.training.runner as runner

    real_train, results = runner.train, []

    def train_after_ctrl_c(**kwargs: object) -> runner.TrainResult:
        if results:  # the second trial: Ctrl-C while it sets up
            signal.raise_signal(signal.SIGINT)
        results.append(real_train(**kwargs))  # type: ignore[arg-type]
        return results[-1]

    monkeypatch.setattr(runner, "train", train_after_ctrl_c)
    space = {"optim.lr": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True}}
    tuner = Tuner(tmp_path, "CherryPick", TINY, parse_space(space), episodes=4)
    with pytest.raises(KeyboardInterrupt):
        tuner.run(3)
    assert [t.state.name for t in trials(tmp_path)] == ["COMPLETE", "FAIL"]
    assert [r.steps for r in results] == [1024, 128]  # stopped after its first iteration


def test_missing_or_bad_input_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    space = tmp_path / "space.yaml"
    space.write_text("optim.lr: {type: float, low: 2, high: 1}\n")
    assert main(["tune", "CherryPick", "--space", str(space), "--study", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"entityrl tune: error: {space}: optim.lr needs numbers low < high")
    assert main(["tune", "CherryPick", "--trials", "0"]) == 2
    assert "--trials and --episodes must be >= 1" in capsys.readouterr().err
