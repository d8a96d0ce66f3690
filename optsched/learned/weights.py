"""Where the shipped policy weights live (no torch import: ``solve``'s ``auto`` asks before loading it)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["DEFAULT_WEIGHTS"]

#: the shipped small model and its model card (``learned/maifs-small.md``), at the repository's top level
DEFAULT_WEIGHTS = Path(__file__).resolve().parents[2] / "learned" / "maifs-small.pt"
