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

__all__ = ["write_report"]


def write_report(run_dir: Path, report_dir: Path) -> Path:
    """Read ``run_dir`` and write the report into ``report_dir`` (created if needed)."""
    data = load_run_dir(Path(run_dir))
    report_dir = Path(report_dir)
    report_dir.mkdir(parents=True, exist_ok=True)
    blocks = build_document(data, report_dir / "plots")
    data.results.to_csv(report_dir / "results.csv", index=False)
    data.results.to_parquet(report_dir / "results.parquet", index=False)
    (report_dir / "report.html").write_text(render_html(blocks, f"zerda-eval report: {data.name}"), encoding="utf-8")
    markdown_path = report_dir / "report.md"
    markdown_path.write_text(render_markdown(blocks, report_dir), encoding="utf-8")
    return markdown_path
