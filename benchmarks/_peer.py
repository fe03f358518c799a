"""Running the reference stack side by side: it lives in its own virtual environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

# The setup script's default directory (../shared/peers/setup-enn-trainer.sh).
DEFAULT_PEER_DIR = Path.home() / ".cache/peers/enn-trainer"
PEER_PYTHON = Path(os.environ.get("ENTITYRL_PEER_PYTHON", DEFAULT_PEER_DIR / "bin/python"))
PEER_SCRIPTS = Path(__file__).parent / "peer"
FAST_REGIME = ("rollout.num_envs=128", "rollout.steps=16", "optim.bs=1024", "optim.lr=0.005",
               "ppo.update_epochs=3")  # fmt: skip
"""The rollout and step sizes the shipped entity configs pin, and the benchmarks measured with
before PPO's defaults became smaller (docs/troubleshooting.md, section 6)."""


def peer_available() -> bool:
    return PEER_PYTHON.exists()


def missing_peer_message() -> str:
    """Where the reference interpreter was looked for, how to install it and how to point the
    benchmarks at it."""
    source = (
        "set by ENTITYRL_PEER_PYTHON"
        if "ENTITYRL_PEER_PYTHON" in os.environ
        else "the default; ENTITYRL_PEER_PYTHON is not set"
    )
    return (
        f"reference stack not found at {PEER_PYTHON} ({source}). Install it with "
        f"../shared/peers/setup-enn-trainer.sh [DIR] (run from the repository root; default DIR: "
        f"{DEFAULT_PEER_DIR}), then, for another DIR, export ENTITYRL_PEER_PYTHON=DIR/bin/python"
    )


def require_peer() -> None:
    if not peer_available():
        sys.exit(missing_peer_message())


def note_if_peer_missing() -> None:
    """For benchmarks whose peer columns are optional: say on stderr why they stay empty."""
    if not peer_available():
        print(f"note: {missing_peer_message()}; the peer's figures are left out", file=sys.stderr)


def run_peer(script: str, *args: object, timeout: float = 3600) -> dict:
    """Run ``benchmarks/peer/<script>`` with the reference interpreter; parse its JSON output."""
    result = subprocess.run(
        [str(PEER_PYTHON), str(PEER_SCRIPTS / script), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if result.returncode != 0:
        raise RuntimeError(f"peer script {script} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def machine() -> str:
    import numpy
    import torch

    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{cpu}, {os.cpu_count()} cores, Python {sys.version.split()[0]}, "
        f"torch {torch.__version__}, numpy {numpy.__version__}"
    )
