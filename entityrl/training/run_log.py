"""Where a run's numbers go: metrics.jsonl always, TensorBoard and W&B when asked."""

from __future__ import annotations

import importlib.util
import json
import math
import time
from pathlib import Path
from typing import Any

from entityrl.training.checkpoint import atomic_write
from entityrl.training.config import ConfigError

METRICS_FILE = "metrics.jsonl"


class RunLog:
    """Appends one JSON line of metrics per training iteration (and mirrors it elsewhere)."""

    def __init__(
        self,
        run_dir: Path,
        tensorboard: bool | None = None,
        wandb_project: str | None = None,
        config: dict[str, Any] | None = None,
        resume_step: int | None = None,
    ) -> None:
        self.path = run_dir / METRICS_FILE
        run_dir.mkdir(parents=True, exist_ok=True)
        if resume_step is not None:
            self._truncate_after(resume_step)
        self._file = self.path.open("a")
        self._writer = None
        if use_tensorboard(tensorboard):
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(str(run_dir), purge_step=resume_step)
        self._wandb = None
        if wandb_project:
            try:
                import wandb
            except ImportError:
                raise RuntimeError(
                    "log.wandb_project is set but wandb is not installed: pip install wandb"
                ) from None
            self._wandb = wandb.init(
                project=wandb_project, config=config, dir=str(run_dir), resume="allow"
            )

    def _truncate_after(self, step: int) -> None:
        """Drop records logged after the checkpoint we resume from (they will be redone), and
        a last line the interrupted run left half-written."""
        if not self.path.exists():
            return
        kept = [r for r in read_metrics(self.path.parent) if r.get("step", 0) <= step]
        text = "".join(json.dumps(r) + "\n" for r in kept)
        atomic_write(self.path, lambda f: f.write(text), mode="w")

    def log(self, step: int, metrics: dict[str, float | None]) -> None:
        """One record; a missing or non-finite value is written as null (JSON has no NaN),
        so every field logged shows in every record."""
        clean = {k: float(v) for k, v in metrics.items() if v is not None and math.isfinite(v)}
        record = {"step": step, "time": time.time(), **{k: clean.get(k) for k in metrics}}
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()
        if self._writer is not None:
            for key, value in clean.items():
                self._writer.add_scalar(key, value, step)
        if self._wandb is not None:
            self._wandb.log(clean, step=step)

    def close(self) -> None:
        self._file.close()
        if self._writer is not None:
            self._writer.close()
        if self._wandb is not None:
            self._wandb.finish()


def use_tensorboard(setting: bool | None) -> bool:
    """Whether to write TensorBoard files: as set, or (None) when tensorboard is installed."""
    installed = importlib.util.find_spec("tensorboard") is not None
    if setting and not installed:
        raise ConfigError(
            "log.tensorboard=true but the tensorboard package is not installed: "
            "pip install 'entityrl[tensorboard]' (or set log.tensorboard=false)"
        )
    return installed if setting is None else setting


def read_metrics(run_dir: str | Path) -> list[dict[str, float]]:
    """All complete records of a run's metrics.jsonl.

    A run that is still logging may be caught halfway through writing its last line: a last
    line without a line break that is not JSON is left out. Any other line that is not JSON
    (a complete line is never half-written) raises :class:`json.JSONDecodeError`, whose
    ``lineno`` is that line's number in the file.
    """
    path = Path(run_dir) / METRICS_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist (is {run_dir} a run directory?)")
    text = path.read_text()
    lines = text.splitlines(keepends=True)
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    records = []
    start = 0  # offset of the current line in ``text``
    for i, line in enumerate(lines):
        if line.strip():
            try:
                # Without its line break, so that an error at the end stays on this line.
                records.append(json.loads(line.rstrip("\r\n")))
            except json.JSONDecodeError as err:
                if i == last and not line.endswith("\n"):
                    break
                # Located in the whole file, so that the error names the file's line.
                raise json.JSONDecodeError(err.msg, text, start + err.pos) from None
        start += len(line)
    return records
