"""``entityrl plot RUN_DIR [RUN_DIR ...]``: learning curves of training runs as a PNG.

Reads each run's ``metrics.jsonl`` (one record per training iteration) and draws one panel
per metric against environment steps; several runs are overlaid in each panel.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from entityrl.cli.arguments import USAGE_ERROR
from entityrl.training.checkpoint import atomic_write
from entityrl.training.run_log import METRICS_FILE, read_metrics

if TYPE_CHECKING:
    from matplotlib.figure import Figure

DEFAULT_METRICS = (
    "episode/episode_return",
    "episode/episode_length",
    "loss/policy_loss",
    "loss/value_loss",
    "loss/entropy",
    "loss/approx_kl",
    "loss/explained_variance",
    "perf/sps",
)
# Fields of every record that are not curves: the x axis and the wall-clock time of logging.
NOT_METRICS = frozenset({"step", "time"})
DEFAULT_FILE = "learning_curves.png"
COLUMNS = 2
PANEL_SIZE = (5.0, 3.0)  # inches


class PlotError(ValueError):
    """The runs or metrics asked for cannot be plotted."""


Records = list[dict[str, float]]


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "plot",
        help="draw learning curves of training runs (PNG)",
        description=(
            "Draw the learning curves of one or more training runs from their metrics.jsonl: "
            "one panel per metric against environment steps, runs overlaid. Default metrics: "
            + ", ".join(DEFAULT_METRICS)
            + " (those a run logged)."
        ),
    )
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    parser.add_argument(
        "--out",
        metavar="FILE",
        help=f"PNG file to write, its missing directories created (default: "
        f"RUN_DIR/{DEFAULT_FILE} for one run, ./{DEFAULT_FILE} for several)",
    )
    parser.add_argument(
        "--metrics",
        metavar="A,B,...",
        help="metrics to draw, by full name (loss/entropy) or last part (entropy)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    run_dirs = [Path(d) for d in args.run_dirs]
    default_out = run_dirs[0] / DEFAULT_FILE if len(run_dirs) == 1 else Path(DEFAULT_FILE)
    out = Path(args.out) if args.out else default_out
    requested = [m.strip() for m in args.metrics.split(",") if m.strip()] if args.metrics else None
    try:
        plot_runs(run_dirs, out, requested)
    except PlotError as err:
        print(f"entityrl plot: error: {err}", file=sys.stderr)
        return USAGE_ERROR
    print(f"wrote {out}")
    return 0


def plot_runs(run_dirs: Sequence[Path], out: Path, metrics: Sequence[str] | None = None) -> Path:
    """Draw the curves of ``metrics`` (default: :data:`DEFAULT_METRICS` that were logged) of
    every run into the PNG file ``out``, written atomically."""
    if not run_dirs:
        raise PlotError("give at least one run directory")
    runs = {str(d): load_records(d) for d in run_dirs}
    check_out(out)
    logged = sorted({key for records in runs.values() for r in records for key in r} - NOT_METRICS)
    names = (
        [m for m in DEFAULT_METRICS if m in logged]
        if metrics is None
        else [resolve_metric(m, logged) for m in metrics]
    )
    if not names:
        raise PlotError(
            f"none of the default metrics were logged; choose some with --metrics from: "
            f"{', '.join(logged)}"
        )
    figure = _draw(runs, names)
    try:  # creating missing directories, as export --out and --record do
        atomic_write(out, lambda f: figure.savefig(f, format="png"))
    except OSError as err:
        in_the_way = isinstance(err, FileExistsError | NotADirectoryError)
        reason = "a file stands where a directory of it would be" if in_the_way else err.strerror
        raise PlotError(f"--out {out}: cannot write it: {reason}") from None
    return out


def check_out(out: Path) -> None:
    """The figure is a PNG file (a typo in --out should not write PNG bytes into a .txt
    file)."""
    if out.suffix.lower() != ".png":
        raise PlotError(f"--out {out}: expected a .png file name, got {out.suffix or 'no'} suffix")


def load_records(run_dir: Path) -> Records:
    """The records of a run's metrics.jsonl (but a last line still being written); a
    PlotError saying what is missing or malformed otherwise."""
    if not run_dir.is_dir():
        raise PlotError(f"{run_dir} is not a directory (expected a training run directory)")
    try:
        records = read_metrics(run_dir)
    except FileNotFoundError:
        raise PlotError(
            f"{run_dir} has no {METRICS_FILE} (is it a training run directory?)"
        ) from None
    except json.JSONDecodeError as err:
        raise PlotError(f"{run_dir / METRICS_FILE}: line {err.lineno} is not JSON") from None
    if not records:
        raise PlotError(
            f"{run_dir / METRICS_FILE} holds no complete record: the run has not logged yet"
        )
    return records


def resolve_metric(name: str, logged: Sequence[str]) -> str:
    """The logged metric called ``name``, or whose last part (after ``/``) is ``name``."""
    if name in logged:
        return name
    matches = [key for key in logged if key.rsplit("/", 1)[-1] == name]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise PlotError(f"metric {name!r} is ambiguous: {', '.join(matches)}; give the full name")
    raise PlotError(f"no run logged a metric {name!r}; logged metrics: {', '.join(logged)}")


def _draw(runs: dict[str, Records], names: Sequence[str]) -> Figure:
    # The object-oriented API renders with Agg and leaves pyplot's global state alone.
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise PlotError(
            "drawing needs matplotlib, which is not installed: pip install 'entityrl[plot]'"
        ) from None

    rows = -(-len(names) // COLUMNS)
    columns = min(COLUMNS, len(names))
    figure = Figure(figsize=(PANEL_SIZE[0] * columns, PANEL_SIZE[1] * rows), layout="constrained")
    axes = figure.subplots(rows, columns, squeeze=False).ravel()
    for ax, name in zip(axes, names, strict=False):
        for label, records in runs.items():
            # null: a value that was not a finite number (see RunLog.log).
            points = [(r["step"], r[name]) for r in records if r.get(name) is not None]
            if points:
                steps, values = zip(*points, strict=True)
                ax.plot(steps, values, label=label)
        ax.set_title(name)
        ax.set_xlabel("environment steps")
        ax.grid(alpha=0.3)
    for ax in axes[len(names) :]:
        ax.set_visible(False)
    if len(runs) > 1:
        axes[0].legend(fontsize="small")
    return figure
