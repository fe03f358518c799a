"""entity-gym's own example environments through the wrapper, in the reference stack's venv.

SKIPPED unless an interpreter with entity-gym 0.1.x exists: ``ENTITYRL_PEER_PYTHON`` (default
``~/.cache/peers/enn-trainer/bin/python``, as the benchmarks use; install it with
``../shared/peers/setup-enn-trainer.sh DIR``). entityrl never imports entity-gym, so this check
runs real_entity_gym_check.py with that interpreter in a subprocess, entityrl on its path.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PEER_PYTHON = Path(
    os.environ.get("ENTITYRL_PEER_PYTHON", Path.home() / ".cache/peers/enn-trainer/bin/python")
)
EXAMPLES = {
    "MoveToOrigin",
    "CherryPick",
    "PickMatchingBalls",
    "Minefield",
    "MultiSnake",
    "MultiArmedBandit",
    "NotHotdog",
    "Xor",
    "Count",
    "FloorIsLava",
    "MineSweeper",
    "RockPaperScissors",
    "TreasureHunt",
}


@pytest.mark.skipif(
    not PEER_PYTHON.exists(),
    reason=f"reference venv with entity-gym not found at {PEER_PYTHON} (set ENTITYRL_PEER_PYTHON)",
)
def test_real_entity_gym_examples_validate_vectorize_and_match_entity_gym() -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    result = subprocess.run(
        [str(PEER_PYTHON), str(Path(__file__).with_name("real_entity_gym_check.py")), "8", "60"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert set(report) == EXAMPLES
    assert all(r["lockstep_steps"] == 60 for r in report.values())
    # entity_gym:<module>:<Class> builds the same environments as from_entity_gym(Class).
    assert all(r["by_name_episodes"] == r["validated_episodes"] for r in report.values())
    # Episodes ended (and were restarted) in lockstep in the short-episode examples.
    assert all(report[name]["lockstep_episodes"] > 0 for name in ("CherryPick", "MultiSnake"))
