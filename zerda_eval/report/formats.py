"""The report's formats and the file each writes (kept apart so the CLI lists them without importing matplotlib)."""

from __future__ import annotations

FORMATS = {"markdown": "report.md", "html": "report.html", "latex": "report.tex"}
DEFAULT_FORMATS = ("markdown", "html")
PLOT_DIR = "plots"  # the report folder's plots (PNG + SVG), which report.md and report.html link to
EXPLORER_FILE = "explorer-data.js"  # report.html's per-query explorer data, loaded by a <script src> (file:// too)
EXPLORER_DIR = "explorer"  # its paged files (values per measure, rankings per chunk of queries), loaded on demand
