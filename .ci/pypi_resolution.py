"""What the README's first command installs from PyPI alone, checked against what the README
says of it: how many nvidia-* packages come with torch and how large the download is.

pip resolves the first command's own arguments without installing anything (``pip install
--dry-run --report``), with PyPI as the only index and none of this machine's pip settings (a
local wheel directory or a second index would change the answer). Its fast-deps feature reads
each wheel's metadata by HTTP range requests: without it, pip downloads every wheel (2.8 GB)
when the index does not serve the metadata on its own. fast-deps needs a recent pip (26.3
resolves without downloading; 23.2 downloads all). Run with that pip's Python (.ci/run):

    python .ci/pypi_resolution.py
"""

from __future__ import annotations

import json
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PYPI = "https://pypi.org/simple"
# What the README says the first command brings on Linux x86-64.
CLAIM = re.compile(r"CUDA build, with (\d+) nvidia-\* packages a ([\d.]+) GB download")


def first_command(readme: str) -> str:
    """The first command of the README's first bash block."""
    block = re.search(r"```bash\n(.*?)```", readme, re.S)
    if block is None:
        raise ValueError("the README has no bash block")
    return next(line for line in block.group(1).splitlines() if line and line[0] != "#")


def pip_arguments(command: str) -> list[str]:
    """The arguments of the ``pip install`` in ``command`` (a chain of ``&&``)."""
    for part in command.split("&&"):
        words = shlex.split(part)
        if len(words) > 1 and words[0].endswith("pip") and words[1] == "install":
            return words[2:]
    raise ValueError(f"no pip install in {command!r}")


def claim(readme: str) -> tuple[int, float]:
    """The README's count of nvidia-* packages and download size (GB) for the first command."""
    found = CLAIM.search(" ".join(line.lstrip("# ") for line in readme.splitlines()))
    if found is None:
        raise ValueError(f"the README does not say /{CLAIM.pattern}/")
    return int(found.group(1)), float(found.group(2))


def resolve(arguments: list[str]) -> list[dict[str, Any]]:
    """What ``pip install ARGUMENTS`` would install from PyPI into an empty environment."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        command = [sys.executable, "-m", "pip", "--isolated", "install", "--dry-run",
                   "--ignore-installed", "--use-feature=fast-deps", "--index-url", PYPI,
                   "--report", str(report), *arguments]  # fmt: skip
        # --isolated ignores PIP_* variables and the user's file; this skips the others.
        env = {**os.environ, "PIP_CONFIG_FILE": os.devnull}
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{shlex.join(command)} failed:\n{done.stderr}")
        installs: list[dict[str, Any]] = json.loads(report.read_text())["install"]
        return installs


def download_bytes(url: str) -> int:
    """The size of the file at ``url``, from its headers only."""
    with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=60) as r:
        return int(r.headers["Content-Length"])


def main() -> int:
    if sys.platform != "linux" or platform.machine() != "x86_64":
        print(f"pypi_resolution: skipped: the README's figures are for Linux x86-64, not "
              f"{sys.platform} {platform.machine()}")  # fmt: skip
        return 0
    readme = (ROOT / "README.md").read_text()
    arguments = pip_arguments(first_command(readme))
    installs = resolve(arguments)
    names = {item["metadata"]["name"].lower(): item for item in installs}
    torch = names["torch"]["metadata"]["version"]
    nvidia = sorted(name for name in names if name.startswith("nvidia-"))
    total = sum(
        download_bytes(item["download_info"]["url"])
        for item in installs
        if not item.get("is_direct")  # the project itself, from this directory
    )
    said_nvidia, said_gb = claim(readme)
    found = (
        f"pip install {shlex.join(arguments)} from {PYPI} resolves to torch {torch} with "
        f"{len(installs)} packages, {len(nvidia)} of them nvidia-*, a {total / 1e9:.2f} GB download"
    )
    print(f"pypi_resolution: {found}")
    if (len(nvidia), round(total / 1e9, 1)) != (said_nvidia, said_gb):
        print(f"pypi_resolution: error: the README says {said_nvidia} nvidia-* packages and "
              f"{said_gb:g} GB; correct it", file=sys.stderr)  # fmt: skip
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
