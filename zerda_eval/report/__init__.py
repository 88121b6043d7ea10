"""Reports of a run directory: report.md, a self-contained report.html, results as CSV/Parquet, plots.

``write_report(run_dir, report_dir)`` is what ``zerda-eval run`` calls at the end and what
``zerda-eval report RUN_DIR`` calls; it returns the path of ``report.md``.
"""

from __future__ import annotations

from pathlib import Path

from zerda_eval.report.document import build_document
from zerda_eval.report.html import render_html
from zerda_eval.report.markdown import render_markdown
from zerda_eval.report.tables import load_run_dir
from zerda_eval.store.files import atomic_write_bytes, atomic_write_text
from zerda_eval.store.run_dir import parquet_bytes

__all__ = ["write_report"]


def write_report(run_dir: Path, report_dir: Path) -> Path:
    """Read ``run_dir`` and write the report into ``report_dir`` (created if needed).

    Every file is written atomically (``store.files``): a failure leaves no truncated file.
    """
    data = load_run_dir(Path(run_dir))
    report_dir = Path(report_dir)
    report_dir.mkdir(parents=True, exist_ok=True)
    blocks = build_document(data, report_dir / "plots")
    atomic_write_text(report_dir / "results.csv", data.results.to_csv(index=False))
    atomic_write_bytes(report_dir / "results.parquet", parquet_bytes(data.results))
    atomic_write_text(report_dir / "report.html", render_html(blocks, f"zerda-eval report: {data.name}"))
    markdown_path = report_dir / "report.md"
    atomic_write_text(markdown_path, render_markdown(blocks, report_dir))
    return markdown_path
