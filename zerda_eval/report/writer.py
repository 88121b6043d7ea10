"""Write the report of a run directory in the asked formats (``zerda_eval.report.write_report`` calls it).

A report whose inputs did not change since it was written is left as it is (``report.cache``).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from zerda_eval.analysis.compare import compare_to_baseline
from zerda_eval.errors import ConfigError, unknown_value_message
from zerda_eval.report import cache
from zerda_eval.report.document import build_document
from zerda_eval.report.explorer import Explorer, write_explorer
from zerda_eval.report.formats import DEFAULT_FORMATS, FORMATS, PLOT_DIR
from zerda_eval.report.html import render_html
from zerda_eval.report.latex import render_latex
from zerda_eval.report.markdown import render_markdown
from zerda_eval.report.tables import load_run_dir, metric_table
from zerda_eval.store.files import atomic_write_bytes, atomic_write_text
from zerda_eval.store.run_dir import parquet_bytes


def check_formats(formats: Iterable[str]) -> tuple[str, ...]:
    """``formats`` in the order of ``FORMATS``, each known (a one-line ``ConfigError`` otherwise)."""
    formats = tuple(formats)
    for name in formats:
        if name not in FORMATS:
            raise ConfigError(unknown_value_message("report format", name, FORMATS))
    if not formats:
        raise ConfigError(f"give at least one report format: {', '.join(FORMATS)}")
    return tuple(name for name in FORMATS if name in formats)


def write_report(run_dir: Path, report_dir: Path, formats: Iterable[str] = DEFAULT_FORMATS) -> Path:
    """Read ``run_dir`` and write the report in ``formats`` into ``report_dir`` (created if needed).

    Every file is written atomically (``store.files``): a failure leaves no truncated file. Plots no longer
    produced are removed from ``plots/``, explorer files from ``explorer/``. report.html links its plots
    (``plots/*.png``) and loads the explorer's data from ``EXPLORER_FILE`` and, paged, ``explorer/*.js``, so it
    stays small at any grid size: the report folder is what to keep or share. Returns the path of the first
    format's file.
    """
    formats = check_formats(formats)
    data = load_run_dir(Path(run_dir))
    report_dir = Path(report_dir)
    outputs = [report_dir / FORMATS[name] for name in formats]
    key = cache.report_key(data, formats)
    if cache.is_current(report_dir, key):
        return outputs[0]
    report_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(report_dir / "results.csv", data.results.to_csv(index=False))
    atomic_write_bytes(report_dir / "results.parquet", parquet_bytes(data.results))
    if "markdown" in formats or "html" in formats:
        blocks = build_document(data, report_dir / PLOT_DIR)
        _remove_stale_plots(report_dir / PLOT_DIR, {b.name for b in blocks if hasattr(b, "svg")})
        if "html" in formats:
            atomic_write_text(report_dir / FORMATS["html"], render_html(blocks, f"zerda-eval report: {data.name}"))
            explorer = next((b for b in blocks if isinstance(b, Explorer)), None)
            write_explorer(report_dir, explorer)
        if "markdown" in formats:
            atomic_write_text(report_dir / FORMATS["markdown"], render_markdown(blocks, report_dir))
    if "latex" in formats:
        comparisons = compare_to_baseline(data.results, data.per_query, data.spec)
        tables = [(dataset, metric_table(data, dataset, comparisons)) for dataset in data.datasets]
        atomic_write_text(report_dir / FORMATS["latex"], render_latex(data, tables))
    cache.record(report_dir, key)
    return outputs[0]


def _remove_stale_plots(plot_dir: Path, names: set[str]) -> None:
    """Delete PNG/SVG files of plots this report no longer draws (a renamed or dropped plot)."""
    for path in [*plot_dir.glob("*.png"), *plot_dir.glob("*.svg")]:
        if path.stem not in names:
            path.unlink(missing_ok=True)
