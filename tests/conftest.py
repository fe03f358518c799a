"""Settings for the whole test suite."""

import os
import sys
from pathlib import Path

# Tests run in parallel processes (pytest -n 2) on small machines; several torch threads per
# process would fight over the cores and make tiny networks many times slower. Set before torch
# is imported; the trainer's automatic thread count respects it.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch

torch.set_num_threads(1)

# Shared test helpers (tests/vec_env_checks.py, ...) are importable by name from any test module.
sys.path.insert(0, str(Path(__file__).parent))
