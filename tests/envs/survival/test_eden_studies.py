"""Every run of the Eden studies (experiments/eden/run.py) is a valid training config whose
environment builds and steps: a typo in a study's overrides fails here, not hours into a run."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from entityrl.env import RandomPolicy
from entityrl.envs import make_vec
from entityrl.training.config import load_config

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
