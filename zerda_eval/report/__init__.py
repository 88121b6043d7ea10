"""Reports of a run directory: report.md, a self-contained report.html, report.tex, results tables, plots.

``write_report(run_dir, report_dir, formats)`` is what ``zerda-eval run`` calls at the end and what
``zerda-eval report RUN_DIR [--format FORMAT ...]`` calls; it returns the path of the first format's
file. Importing this package is cheap: the plotting code loads on the first report.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from zerda_eval.report.formats import DEFAULT_FORMATS, FORMATS

__all__ = ["DEFAULT_FORMATS", "FORMATS", "write_report"]


def write_report(run_dir: Path, report_dir: Path, formats: Iterable[str] = DEFAULT_FORMATS) -> Path:
    """Read ``run_dir`` and write its report in ``formats`` (``FORMATS``) into ``report_dir``; a report whose
    inputs did not change is left as it is. Returns the path of the first format's file."""
    from zerda_eval.report.writer import write_report as write

    return write(Path(run_dir), Path(report_dir), formats)
