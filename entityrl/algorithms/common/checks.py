"""Checks every algorithm's settings share."""

from __future__ import annotations


def require_positive(section: str, **values: float) -> None:
    """Reject non-positive settings, naming them as ``section.name``."""
    for name, value in values.items():
        if value <= 0:
            key = f"{section}.{name}" if section else name
            raise ValueError(f"{key} must be > 0, got {value}")
