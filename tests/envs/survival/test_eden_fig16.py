"""experiments/eden/fig16.py: RL^2's return per episode of a trial over meta-training, on
held-out and meta-training tasks, recorded during training and reused by a later sitting."""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
spec = importlib.util.spec_from_file_location("eden_fig16", ROOT / "experiments/eden/fig16.py")
assert spec is not None and spec.loader is not None
fig16 = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = fig16
spec.loader.exec_module(fig16)


def _args(out: Path) -> argparse.Namespace:
    return argparse.Namespace(steps=6144, every=4096, trials=2, out=out)


def test_a_seed_records_a_point_every_interval_and_at_the_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    result = fig16.train_seed(1, _args(tmp_path))
    # meta_rl.yaml's rollout is 64 x 32 = 2,048 steps: the first iteration, the one that
    # crosses 4,096 and the last.
    assert [p["step"] for p in result["points"]] == [2048, 4096, 6144]
    for point in result["points"]:
        for split in ("train", "test"):
            assert len(point[split]) == 4  # the trial's four river-navigation episodes
            assert all(-2000 < r < 2000 for r in point[split])
    saved = json.loads((tmp_path / "seed1.json").read_text())
    assert saved["points"] == result["points"]


def test_a_finished_seed_is_reused_and_other_settings_train_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    fake = {"seed": 1, "steps": 6144, "every": 4096, "trials": 2, "seconds": 1.0, "points": []}
    (tmp_path / "seed1.json").write_text(json.dumps(fake))
    assert fig16.train_seed(1, _args(tmp_path)) == fake
    other = argparse.Namespace(steps=2048, every=2048, trials=2, out=tmp_path)
    assert fig16.train_seed(1, other)["points"][0]["step"] == 2048


def test_the_report_writes_the_curves_the_figure_and_the_section(tmp_path: Path) -> None:
    def curve(seed: int) -> list[dict]:
        held_out = [1.0, 1.5, 2.0, 2.5 + seed]  # last - first: 1.5 + seed
        return [{"step": s, "train": [1.0, 2.0, 3.0, 4.0], "test": held_out} for s in (2048, 4096)]

    results = [
        {"seed": seed, "steps": 4096, "every": 2048, "trials": 2, "seconds": 60.0,
         "points": curve(seed)}
        for seed in (1, 2)
    ]  # fmt: skip
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "survival.md").write_text("# Survival\n")
    fig16.report(results, docs=tmp_path / "docs", results_dir=tmp_path / "results")
    assert json.loads((tmp_path / "results" / "fig16.json").read_text()) == results
    assert (tmp_path / "docs" / "images" / "eden_fig16.png").stat().st_size > 1000
    text = (tmp_path / "docs" / "survival.md").read_text()
    assert f"### {fig16.TITLE}" in text
    # held-out: last - first per seed is 2.5 and 3.5 (mean 3.0)
    assert "| 4,096 | held-out tasks | 1 / 2 / 2 / 4 | +3.0 (+2.5, +3.5) |" in text


def test_report_only_without_finished_seeds_says_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        fig16.main(["--report-only", "--out", str(tmp_path), "--seeds", "7"])
