"""The report's formats and the file each writes (kept apart so the CLI lists them without importing matplotlib)."""

from __future__ import annotations

FORMATS = {"markdown": "report.md", "html": "report.html", "latex": "report.tex"}
DEFAULT_FORMATS = ("markdown", "html")
