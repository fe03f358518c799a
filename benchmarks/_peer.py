"""Running the reference stack side by side: it lives in its own virtual environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

PEER_PYTHON = Path(
    os.environ.get("ENTITYRL_PEER_PYTHON", Path.home() / ".cache/peers/enn-trainer/bin/python")
)
PEER_SCRIPTS = Path(__file__).parent / "peer"


def peer_available() -> bool:
    return PEER_PYTHON.exists()


def require_peer() -> None:
    if not peer_available():
        sys.exit(
            f"reference stack not found at {PEER_PYTHON}; install it with "
            "../shared/peers/setup-enn-trainer.sh DIR and set ENTITYRL_PEER_PYTHON=DIR/bin/python"
        )


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
