"""Every run of the Eden studies (experiments/eden/run.py) is a valid training config whose
environment builds and steps: a typo in a study's overrides fails here, not hours into a run.
A study accumulates over sittings: finished runs are reused, interrupted ones continued."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import pytest

from entityrl.env import RandomPolicy
from entityrl.envs import make_vec
from entityrl.training import Callback, TrainConfig, Trainer, TrainResult, runner
from entityrl.training.checkpoint import load_checkpoint
from entityrl.training.config import load_config, to_yaml
from entityrl.training.run_log import read_metrics

ROOT = Path(__file__).resolve().parents[3]
spec = importlib.util.spec_from_file_location("eden_run", ROOT / "experiments/eden/run.py")
assert spec is not None and spec.loader is not None
eden = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = eden  # dataclasses look their module up
spec.loader.exec_module(eden)

RUNS = [(name, run) for name, study in eden.STUDIES.items() for run in study.runs]


def test_the_studies_have_the_documented_sizes() -> None:
    sizes = {name: len(study.runs) for name, study in eden.STUDIES.items()}
    assert sizes == {
        "fig8": 12,
        "fig10": 21,
        "fig11": 9,
        "fig12": 2,
        "fig13": 9,
        "full_meter": 4,
        "four_season": 4,
        "fig15": 4,
    }
    names = [f"{study}/{run.name}" for study, run in RUNS]
    assert len(names) == len(set(names))  # every run has a directory of its own


@pytest.mark.parametrize(("study", "run"), RUNS, ids=[f"{s}/{r.name}" for s, r in RUNS])
def test_every_run_is_a_valid_config_whose_world_steps(
    study: str, run: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)  # world files are named relative to the repository, as run.py does
    config = load_config(eden.BASE, [*run.overrides, f"log.run_dir={tmp_path}"])  # type: ignore[attr-defined]
    assert config.total_timesteps == 2_000_000
    env = make_vec(config.env.id, 2, seed=0, **dict(config.env.kwargs))
    obs = env.reset()
    policy = RandomPolicy(env.action_space, seed=0)
    for _ in range(3):
        obs = env.act(policy.act(obs))


# ---------------------------------------------------------------------------- sittings
# A run of one PPO iteration (64 environments x 32 steps) whose episodes end within 50 steps.
TINY = eden.Run("tiny", "tiny", ("env.kwargs.life_limit=50",))


def settings(steps: int = 2048, episodes: int = 4) -> argparse.Namespace:
    return argparse.Namespace(steps=steps, episodes=episodes, threads=1, seeds=[1])


class TrainerSpy:
    """The real Trainer, remembering where each one started; ``interrupt`` sends the run a
    Ctrl-C after its first iteration."""

    started: ClassVar[list[tuple[Path | None, int]]] = []
    interrupt = False

    def __init__(self, config: TrainConfig, env: object = None, resume: Path | None = None) -> None:
        callbacks = [CtrlC()] if TrainerSpy.interrupt else []
        self.trainer = Trainer(config, env, resume, callbacks=callbacks)
        TrainerSpy.started.append((resume, self.trainer.step))

    def run(self) -> TrainResult:
        return self.trainer.run()


class CtrlC(Callback):
    def on_iteration(self, trainer: Trainer, metrics: dict[str, float]) -> None:
        os.kill(os.getpid(), signal.SIGINT)  # the trainer's handler: stop after this iteration


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> type[TrainerSpy]:
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(runner, "Trainer", TrainerSpy)
    monkeypatch.setattr(TrainerSpy, "started", [])
    return TrainerSpy


def test_a_finished_run_is_reused_and_evaluated_again_for_other_episodes(
    spy: type[TrainerSpy], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = eden.run_one("s", TINY, 1, settings(), tmp_path)
    run_dir = tmp_path / "s" / "tiny_tiny_seed1"
    assert first == json.loads((run_dir / "result.json").read_text())
    assert (first["steps"], first["episodes"], first["resumed_from"]) == (2048, 4, 0)
    assert spy.started == [(None, 0)]
    trained_at = (run_dir / "checkpoint.pt").stat().st_mtime_ns

    assert eden.run_one("s", TINY, 1, settings(), tmp_path) == first
    assert "s/tiny_tiny_seed1: reused its result.json" in capsys.readouterr().out

    again = eden.run_one("s", TINY, 1, settings(episodes=6), tmp_path)
    assert again["episodes"] == 6 and again["curve"] == first["curve"]
    assert spy.started == [(None, 0)]  # neither sitting trained again
    assert (run_dir / "checkpoint.pt").stat().st_mtime_ns == trained_at


def test_an_interrupted_run_keeps_its_checkpoint_and_the_next_sitting_continues_it(
    spy: type[TrainerSpy], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(TrainerSpy, "interrupt", True)
    assert eden.run_one("s", TINY, 1, settings(steps=4096), tmp_path) is None
    run_dir = tmp_path / "s" / "tiny_tiny_seed1"
    assert not (run_dir / "result.json").exists()
    assert load_checkpoint(run_dir)["step"] == 2048

    monkeypatch.setattr(TrainerSpy, "interrupt", False)
    summary = eden.run_one("s", TINY, 1, settings(steps=4096), tmp_path)
    assert spy.started == [(None, 0), (run_dir, 2048)]
    assert summary is not None and summary["resumed_from"] == 2048
    assert load_checkpoint(run_dir)["step"] == 4096
    assert [r["step"] for r in read_metrics(run_dir)] == [2048, 4096]


def test_a_run_of_other_steps_is_trained_again_from_scratch(
    spy: type[TrainerSpy], tmp_path: Path
) -> None:
    eden.run_one("s", TINY, 1, settings(steps=2048), tmp_path)
    summary = eden.run_one("s", TINY, 1, settings(steps=4096), tmp_path)
    assert spy.started == [(None, 0), (None, 0)]
    assert summary is not None and summary["steps"] == 4096
    run_dir = tmp_path / "s" / "tiny_tiny_seed1"
    assert [r["step"] for r in read_metrics(run_dir)] == [2048, 4096]
    assert load_checkpoint(run_dir)["config"]["total_timesteps"] == 4096


def test_the_report_holds_every_finished_run_and_says_when_the_study_is_partial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    study = eden.STUDIES["fig12"]
    deceptive, very_sparse = study.runs

    def finish(run: eden.Run, seed: int, steps: int = 2048) -> dict:
        summary = {
            **{"panel": run.panel, "label": run.label, "seed": seed},
            **{"steps": steps, "episodes": 4, "return": 1.0, "died": 1.0},
            **{"lifetime": 100.0 + seed, "random_lifetime": 80.0},
        }
        run_dir = eden.run_dir_of(tmp_path, "fig12", run, seed)
        config = eden.load_config_of(run, seed, settings(steps), run_dir)
        eden.write_json(run_dir / "result.json", summary)
        (run_dir / "config.yaml").write_text(to_yaml(config))
        return summary

    # Two sittings' worth (seeds 2 and 1 of one run), and a run of another step count.
    found = [finish(deceptive, 2), finish(deceptive, 1)]
    finish(very_sparse, 1, steps=4096)
    results = eden.finished_results("fig12", tmp_path, settings())
    assert results == [found[1], found[0]]
    partial = eden.section("fig12", results, [1, 2, 3], 2048, 4)
    assert "**Partial: 2 of the study's 6 runs (2 runs × seeds 1, 2, 3) are finished" in partial
    assert "| life limit 300 | deceptive | 2 | 101.5 ± 0.5 | 80.0 |" in partial
    assert "| life limit 300 | very_sparse | 0 | none finished yet |" in partial

    complete = [*results, finish(very_sparse, 1), finish(very_sparse, 2)]
    text = eden.section("fig12", complete, [1, 2], 2048, 4)
    assert "All 4 runs of the study (2 runs × seeds 1, 2) are in." in text
    assert "Partial" not in text
    assert "`python experiments/eden/run.py fig12 --seeds 1 2 --steps 2048 --episodes 4`" in text


# ---------------------------------------------------------------------------- shared runs
# TINY again, written another way: the reward it gets by default, named.
TWIN = eden.Run("twin", "twin", ("env.kwargs.reward=dense", "env.kwargs.life_limit=50"))


def test_a_run_shared_by_two_studies_trains_once(
    spy: type[TrainerSpy], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = eden.run_one("a", TINY, 1, settings(), tmp_path)
    shared = eden.run_one("b", TWIN, 1, settings(), tmp_path)
    assert spy.started == [(None, 0)]
    assert "b/twin_twin_seed1 (shares a/tiny_tiny_seed1): reused its result.json" in (
        capsys.readouterr().out
    )
    assert first is not None and shared == {**first, "panel": "twin", "label": "twin"}
    assert not (tmp_path / "b").exists()
    assert eden.finished_run("b", TWIN, 1, tmp_path, settings()) == shared


def test_a_run_of_another_override_or_seed_is_not_shared(
    spy: type[TrainerSpy], tmp_path: Path
) -> None:
    other = eden.Run("other", "other", ("env.kwargs.life_limit=60",))
    eden.run_one("a", TINY, 1, settings(), tmp_path)
    eden.run_one("b", other, 1, settings(), tmp_path)
    eden.run_one("b", TWIN, 2, settings(), tmp_path)
    assert spy.started == [(None, 0)] * 3
    assert {d.name for d in (tmp_path / "b").iterdir()} == {"other_other_seed1", "twin_twin_seed2"}


def test_an_unfinished_shared_run_is_continued_where_it_is_kept(
    spy: type[TrainerSpy], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(TrainerSpy, "interrupt", True)
    assert eden.run_one("a", TINY, 1, settings(steps=4096), tmp_path) is None
    monkeypatch.setattr(TrainerSpy, "interrupt", False)
    summary = eden.run_one("b", TWIN, 1, settings(steps=4096), tmp_path)
    kept = tmp_path / "a" / "tiny_tiny_seed1"
    assert spy.started == [(None, 0), (kept, 2048)]
    assert summary is not None and summary["resumed_from"] == 2048
    assert json.loads((kept / "result.json").read_text())["steps"] == 4096
    assert not (tmp_path / "b").exists()


def test_a_run_another_process_is_training_is_not_shared_nor_trained_twice(
    spy: type[TrainerSpy], tmp_path: Path
) -> None:
    eden.run_one("a", TINY, 1, settings(), tmp_path)
    busy = tmp_path / "a" / "tiny_tiny_seed1"
    (busy / "result.json").unlink()
    (busy / eden.LOCK_FILE).write_text(str(os.getppid()))  # a live process, not this one
    eden.run_one("b", TWIN, 1, settings(), tmp_path)
    assert spy.started == [(None, 0), (None, 0)]  # b trained its own
    with pytest.raises(eden.RunBusyError, match=f"process {os.getppid()} is training this run"):
        eden.run_one("a", TINY, 1, settings(), tmp_path)


def test_the_listing_counts_the_runs_studies_share(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    lines = eden.listing(argparse.Namespace(steps=2_000_000, threads=1, seeds=[1, 2, 3], out=ROOT))
    counts = {line.split(":")[0]: line for line in lines.split("\n")}
    assert "12 runs per seed, 9 its own, 3 shared (with fig11, fig13)" in counts["fig8"]
    assert "9 runs per seed, 0 its own, 9 shared" in counts["fig11"]
    # sparse_when_full=true is the default: the same run as the sparse ones of fig10/11/13.
    assert (
        "4 runs per seed, 2 its own, 2 shared (with fig10, fig11, fig13, fig15)"
        in counts["full_meter"]
    )
    assert "4 runs per seed, 4 its own, 0 shared" in counts["four_season"]
    # fig15's plain-PPO runs are fig11's (and fig13's) at life limit 100; its RND runs its own.
    assert "4 runs per seed, 2 its own, 2 shared (with fig11, fig13, full_meter)" in counts["fig15"]
    assert counts["all studies"].endswith(
        "65 runs per seed, 48 of them different: at seeds 1 2 3, 144 runs to train (195 named)"
    )


def test_fig15_pits_ppo_against_ppo_with_rnd_under_the_sparse_rewards() -> None:
    runs = {run.name: run.overrides for run in eden.STUDIES["fig15"].runs}
    assert sorted(runs) == [
        "sparse_reward_ppo",
        "sparse_reward_ppo_rnd",
        "very_sparse_reward_ppo",
        "very_sparse_reward_ppo_rnd",
    ]
    for reward in ("sparse", "very_sparse"):
        plain = runs[f"{reward}_reward_ppo"]
        assert "env.kwargs.life_limit=100" in plain and f"env.kwargs.reward={reward}" in plain
        assert runs[f"{reward}_reward_ppo_rnd"] == (*plain, "rnd.coef=1.0")


def test_an_rnd_run_trains_with_its_bonus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    (run,) = (r for r in eden.STUDIES["fig15"].runs if r.name == "very_sparse_reward_ppo_rnd")
    summary = eden.run_one("fig15", run, 1, settings(), tmp_path)
    assert summary is not None and summary["lifetime"] > 0
    logged = read_metrics(eden.run_dir_of(tmp_path, "fig15", run, 1))
    assert any(row.get("loss/rnd_intrinsic", 0) > 0 for row in logged)


def test_report_only_trains_nothing(tmp_path: Path) -> None:
    script = str(ROOT / "experiments/eden/run.py")
    out = ["--out", str(tmp_path)]
    done = subprocess.run(
        [sys.executable, script, "fig12", "--report-only", *out], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "no run of fig12 is finished yet" in done.stdout
    assert list(tmp_path.iterdir()) == []

    both = [sys.executable, script, "fig12", "--report-only", "--no-report", *out]
    refused = subprocess.run(both, capture_output=True, text=True)
    assert refused.returncode == 2
    assert "--report-only and --no-report exclude each other" in refused.stderr


# ---------------------------------------------------------------------------- the bench
def bench_settings(**changes: object) -> argparse.Namespace:
    """The smoke budget on DayAndNight, every family, as ``run.py bench`` sets it up."""
    budget = eden.BUDGETS["smoke"]
    values = {
        "budget": "smoke",
        "steps": budget.steps,
        "episodes": budget.episodes,
        "demos": budget.demos,
        "seeds": list(budget.seeds),
        "threads": 1,
        "jobs": 1,
        "families": list(eden.FAMILIES),
        "worlds": ["DayAndNight"],
        "rewards": ["dense"],
        "observations": ["entities"],
        "life_limit": 100,
        "no_report": False,
    }
    return argparse.Namespace(**{**values, **changes})


def test_the_smoke_bench_trains_every_family_once_and_reports_every_row(
    spy: type[TrainerSpy], tmp_path: Path
) -> None:
    docs, results = tmp_path / "docs", tmp_path / "results"
    docs.mkdir()
    (docs / "survival.md").write_text("# The survival world\n\n## Rewards\n\ntext\n")
    out = tmp_path / "runs"
    assert eden.run_bench(bench_settings(), out, docs, results)
    built = [f for f, how in eden.FAMILIES.items() if how is not None]
    assert built == list(eden.FAMILIES)
    # Every family on DayAndNight, and meta-RL on river navigation too.
    assert len(spy.started) == len(built) + 1 == 9
    configs = [load_checkpoint(d)["config"] for d in (out / "bench_smoke").glob("*_seed1")]
    assert {c["algo"] for c in configs} == {"ppo", "dqn", "sac", "bc"}
    trials = {c["env"]["kwargs"]["env"]: c for c in configs if c["env"]["id"] == "Trials"}
    assert {env: c["env"]["kwargs"]["episodes"] for env, c in trials.items()} == {
        "DayAndNight": 3,
        "RiverNavigation": 4,
    }
    # The cell's world moves inside the trials; the policy has memory.
    world = trials["DayAndNight"]["env"]["kwargs"]["env_kwargs"]
    assert (world["life_limit"], world["actions"]) == (100, "simple")
    assert all(c["net"]["memory"] for c in trials.values())

    text = (docs / "survival.md").read_text()
    first = text
    section = text.split("### Results: Survival bench, smoke budget\n", 1)[1]
    main, meta_table = section.split("Meta-RL (RL^2", 1)
    rows = {line.split(" | ")[1]: line for line in main.splitlines() if line.startswith("| Day")}
    assert set(rows) == {"random", "scripted", *eden.FAMILIES}
    for family in built:
        assert "| 1 |" in rows[family] and "none finished" not in rows[family]
    assert "All 9 training runs are in." in section
    meta = {
        tuple(line.split(" | ")[:3]): line
        for line in meta_table.splitlines()
        if line.startswith("| ") and not line.startswith("| task family")
    }
    assert set(meta) == {
        (f"| {panel}", "1", policy)
        for panel in ("DayAndNight, dense, entities", "RiverNavigation")
        for policy in ("RL^2, held-out tasks", "RL^2, meta-training tasks",
                       "random play, held-out tasks")
    }  # fmt: skip
    navigation = meta["| RiverNavigation", "1", "RL^2, held-out tasks"].split(" | ")[3]
    assert len(navigation.split(" / ")) == 4  # a return per episode of a trial
    saved = json.loads((results / "bench_smoke.json").read_text())
    assert {r["label"] for r in saved} == {"random", "scripted", *built}
    assert (docs / "images" / "eden_bench_smoke.png").stat().st_size > 0

    # A second sitting trains nothing, and its section replaces the first one.
    assert eden.run_bench(bench_settings(), out, docs, results)
    assert len(spy.started) == 9
    text = (docs / "survival.md").read_text()
    assert text.count("### Results: Survival bench, smoke budget") == 1
    assert text.split("## Rewards")[0] == first.split("## Rewards")[0]


def test_the_scripted_survivor_outlives_random_play() -> None:
    from entityrl.envs.experts import SurvivalExpert
    from entityrl.training import evaluate

    env = make_vec("DayAndNight", 16, seed=3, life_limit=100, actions="simple")
    scripted = evaluate(SurvivalExpert(env.obs_space, env.action_space), env, 64)
    random = evaluate(RandomPolicy(env.action_space, seed=0), env, 64)
    assert scripted.mean("episode_length") > 1.3 * random.mean("episode_length")
    assert scripted.mean("task/eat_meat") > 1 and scripted.mean("task/drink_water") > 1

    full = make_vec("DayAndNight", 2, seed=0)
    with pytest.raises(ValueError, match="build the world with actions='simple'"):
        SurvivalExpert(full.obs_space, full.action_space)


def test_the_paper_bench_shares_its_ppo_run_with_the_studies(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(ROOT)
    paper = eden.BUDGETS["paper"]
    args = bench_settings(budget="paper", steps=paper.steps, families=["ppo", "dqn"])
    ppo, dqn = eden.bench_study(args, tmp_path).runs
    (fig11,) = (r for r in eden.STUDIES["fig11"].runs if r.name == "life_limit_100_dense")
    key = eden.identity(eden.load_config_of(fig11, 1, args, tmp_path / "a"))
    assert eden.identity(eden.load_config_of(ppo, 1, args, tmp_path / "b")) == key
    assert eden.identity(eden.load_config_of(dqn, 1, args, tmp_path / "c")) != key
    assert eden.load_config_of(dqn, 1, args, tmp_path / "c").eval.deterministic
