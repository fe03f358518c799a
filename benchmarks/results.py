"""Writing one section of benchmarks/RESULTS.md without touching the others."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

RESULTS = Path(__file__).parent / "RESULTS.md"
HEADER = (
    "# Benchmark results\n\nEach section is written by the script it names; rerun it to refresh.\n"
)


def replace_section(title: str, body: str) -> None:
    """Replace (or append) the ``## title`` section of RESULTS.md, atomically."""
    text = RESULTS.read_text() if RESULTS.exists() else HEADER
    section = f"## {title}\n\n{body.strip()}\n"
    pattern = re.compile(rf"^## {re.escape(title)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: section + "\n", text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    fd, tmp = tempfile.mkstemp(dir=RESULTS.parent, prefix=".RESULTS.", suffix=".md")
    with os.fdopen(fd, "w") as f:
        f.write(text.rstrip("\n") + "\n")
    os.replace(tmp, RESULTS)
