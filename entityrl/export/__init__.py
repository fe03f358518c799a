"""Export a trained agent's policy for use outside the trainer (ONNX; see docs/deploy.md)."""

from entityrl.export.one_observation import ExportError
from entityrl.export.onnx import export_bytes, export_onnx

__all__ = ["ExportError", "export_bytes", "export_onnx"]
