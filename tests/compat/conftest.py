"""The environment-layer test helpers (tests/env/tiny_envs.py) serve these tests too."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "env"))
