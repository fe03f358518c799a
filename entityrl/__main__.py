"""``python -m entityrl``: the ``entityrl`` command (also what ``torchrun -m entityrl`` runs)."""

import sys

from entityrl.cli.main import main

sys.exit(main())
