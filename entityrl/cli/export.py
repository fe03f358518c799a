"""``entityrl export CHECKPOINT_OR_RUN_DIR``: write a trained agent's policy as an ONNX model
for the light runtime (:mod:`entityrl.inference`), onnxruntime in any language, or the browser
page (web/)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from entityrl.cli.arguments import USAGE_ERROR


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "export",
        help="write a trained agent's policy as an ONNX model",
        description=(
            "Load the agent of a checkpoint (a checkpoint.pt file or the run directory holding "
            "it) and write its policy (input normalization, transformer, action and value heads) "
            "as one ONNX model that decides for one observation (with net.memory, it also "
            "takes the recurrent state and returns the next one). Run it with "
            "entityrl.inference (numpy + onnxruntime), or in the browser page of web/. "
            "Needs the 'export' extra: pip install 'entityrl[export]'."
        ),
    )
    parser.add_argument("checkpoint", metavar="CHECKPOINT_OR_RUN_DIR")
    parser.add_argument(
        "--format",
        choices=["onnx"],
        default="onnx",
        help="model format (default: onnx, the only one so far)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        metavar="FILE",
        help="where to write the model (default: agent.onnx in the run directory)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        import onnx  # noqa: F401  (checked here to name the extra that provides it)
    except ImportError:
        print(
            "entityrl export: error: exporting needs the onnx package; install the 'export' "
            "extra: pip install 'entityrl[export]'",
            file=sys.stderr,
        )
        return USAGE_ERROR
    from entityrl.export import ExportError, export_onnx
    from entityrl.training.agent import load_agent
    from entityrl.training.checkpoint import CheckpointError, resolve

    try:
        agent = load_agent(args.checkpoint)
        out = args.out or resolve(args.checkpoint).parent / "agent.onnx"
        if out.is_dir():
            raise ExportError(
                f"--out {out} is a directory; expected a file name such as agent.onnx"
            )
        written = export_onnx(agent, out)
    except (CheckpointError, ExportError) as err:
        print(f"entityrl export: error: {err}", file=sys.stderr)
        return USAGE_ERROR
    size = written.stat().st_size
    print(f"{agent.config.env.id} agent trained {agent.step:,} steps -> {written} ({size:,} bytes)")
    return 0
