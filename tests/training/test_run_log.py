"""metrics.jsonl: reading it while a run writes, and resuming after a crash mid-line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from entityrl.training.run_log import METRICS_FILE, RunLog, read_metrics

RECORDS = [{"step": 8, "loss": 1.0}, {"step": 16, "loss": 0.5}, {"step": 24, "loss": 0.25}]
COMPLETE = "".join(json.dumps(r) + "\n" for r in RECORDS)


def test_a_half_written_last_line_is_left_out(tmp_path: Path) -> None:
    (tmp_path / METRICS_FILE).write_text(COMPLETE + '{"step": 32, "lo')
    assert read_metrics(tmp_path) == RECORDS


def test_a_malformed_line_before_the_last_is_reported_with_its_line_number(
    tmp_path: Path,
) -> None:
    lines = COMPLETE.splitlines(keepends=True)
    (tmp_path / METRICS_FILE).write_text(lines[0] + '{"step": 12,\n' + "".join(lines[1:]))
    with pytest.raises(json.JSONDecodeError) as error:
        read_metrics(tmp_path)
    assert error.value.lineno == 2


def test_resuming_drops_later_records_and_a_half_written_line(tmp_path: Path) -> None:
    (tmp_path / METRICS_FILE).write_text(COMPLETE + '{"step": 32, "lo')
    log = RunLog(tmp_path, tensorboard=False, resume_step=16)
    log.log(24, {"loss": 0.125})
    log.close()
    records = read_metrics(tmp_path)
    assert [(r["step"], r["loss"]) for r in records] == [(8, 1.0), (16, 0.5), (24, 0.125)]
    assert list(tmp_path.iterdir()) == [tmp_path / METRICS_FILE]  # no temporary file left


def test_a_complete_last_line_that_is_not_json_is_reported(tmp_path: Path) -> None:
    (tmp_path / METRICS_FILE).write_text(COMPLETE + "garbage\n")
    with pytest.raises(json.JSONDecodeError) as error:
        read_metrics(tmp_path)
    assert error.value.lineno == 4


def test_a_value_that_is_not_a_finite_number_is_logged_as_null(tmp_path: Path) -> None:
    log = RunLog(tmp_path, tensorboard=False)
    log.log(8, {"loss": float("nan"), "return": float("inf"), "entropy": 0.5})
    log.close()
    (record,) = read_metrics(tmp_path)
    assert record["loss"] is None and record["return"] is None and record["entropy"] == 0.5
