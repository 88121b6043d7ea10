"""Read a run directory and turn results and comparisons into display tables.

A ``Table`` is what both renderers (markdown, html) print: a header, rows of strings, and which
cells are bold. Numbers are formatted here once, so the markdown and html reports agree.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from zerda_eval.compare import CompareSpec, cells_of, measure_columns, parse_compare
from zerda_eval.errors import DataFormatError
from zerda_eval.measures import ANSWERABLE_PREFIX

EFFICIENCY = (
    "index_time_s",
    "index_build_s",  # the index's from-scratch cost (recorded with its cache entry), beside this run's time
    "index_time_parallel_s",
    "latency_mean_ms",
    "latency_parallel_mean_ms",
    "latency_p50_ms",
    "latency_p95_ms",
    "qps",
    "peak_rss_mb",
)
UNITS = {
    "index_time_s": "s",
    "index_build_s": "s",
    "index_time_parallel_s": "s",
    "qps": "queries/s",
    "peak_rss_mb": "MB",
}
LATENCY_COLUMNS = ("latency_mean_ms", "latency_parallel_mean_ms")
MARKERS = {"t-test": "*", "fisher": "†"}
DIGITS = 4


@dataclass
class RunData:
    """Everything a report needs from one run directory."""

    run_dir: Path
    name: str
    config: dict[str, Any]
    config_hash: str | None
    results: pd.DataFrame
    per_query: pd.DataFrame
    spec: CompareSpec
    measures: list[str]
    cell_results: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class Table:
    """A display table: header, rows of formatted strings, bold cells as (row, column) pairs."""

    header: list[str]
    rows: list[list[str]]
    bold: set[tuple[int, int]] = field(default_factory=set)


def _read_results(run_dir: Path) -> pd.DataFrame:
    parquet, csv = run_dir / "results.parquet", run_dir / "results.csv"
    if parquet.exists():
        return pd.read_parquet(parquet)
    if csv.exists():
        return pd.read_csv(csv)
    raise DataFormatError(f"{run_dir}: no results.parquet or results.csv; run 'zerda-eval run CONFIG' first")


def _read_per_query(run_dir: Path, results: pd.DataFrame) -> pd.DataFrame:
    """``per_query.parquet``, or the cells' ``per_query.csv`` files joined with the results rows."""
    path = run_dir / "per_query.parquet"
    if path.exists():
        frame = pd.read_parquet(path)
    else:
        from zerda_eval.runner import read_per_query_csv  # the runner owns the run-file formats

        parts = []
        for _, row in results.iterrows():
            cell = read_per_query_csv(run_dir / "cells" / str(row["cell_id"]) / "per_query.csv")
            parts.append(cell.assign(cell_id=row["cell_id"], dataset=row["dataset"], system=row["system"]))
        frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    if frame.empty:
        raise DataFormatError(f"{run_dir}: no per-query values (per_query.parquet or cells/*/per_query.csv)")
    return frame.astype({"query_id": str, "cell_id": str})


def load_run_dir(run_dir: Path) -> RunData:
    """Read results, per-query values, the resolved config and each cell's ``result.json``."""
    run_dir = Path(run_dir)
    experiment = run_dir / "experiment.json"
    if not experiment.exists():
        raise DataFormatError(f"{experiment}: missing; is {run_dir} a run directory written by 'zerda-eval run'?")
    document = json.loads(experiment.read_text(encoding="utf-8"))
    config = document.get("config") or document.get("resolved") or document
    results = _read_results(run_dir).astype({"cell_id": str})
    per_query = _read_per_query(run_dir, results)
    spec = parse_compare(config, str(experiment))
    cell_results = {}
    for cell_id in results["cell_id"]:
        path = run_dir / "cells" / cell_id / "result.json"
        if path.exists():
            cell_results[cell_id] = json.loads(path.read_text(encoding="utf-8"))
    return RunData(
        run_dir=run_dir,
        name=str(config.get("experiment", {}).get("name", run_dir.name)),
        config=config,
        config_hash=document.get("hash") or document.get("config_hash"),
        results=results,
        per_query=per_query,
        spec=spec,
        measures=measure_columns(results, per_query, spec),
        cell_results=cell_results,
    )


def fmt(value: Any, digits: int = DIGITS) -> str:
    """A number with ``digits`` decimals ("-" for missing); anything else as text."""
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "-"
    if isinstance(value, float | int) and not isinstance(value, bool):
        return f"{value:.{digits}f}"
    return str(value)


def fmt_p(value: float) -> str:
    """A p-value: three significant digits, "<1e-4" below that."""
    if pd.isna(value):
        return "-"
    return "<1e-4" if value < 1e-4 else f"{value:.3g}"


def official_columns(data: RunData, dataset: str, rows: pd.DataFrame) -> list[str]:
    """A dataset's official measures (its ``official_measures`` option, Qur'an QA: MAP@10, MRR@10), each
    followed by its answerable-only figure, as far as the results hold them."""
    official: list[str] = []
    for entry in data.config.get("datasets", []):
        if isinstance(entry, dict) and entry.get("label", entry.get("id")) == dataset:
            official = list((entry.get("options") or {}).get("official_measures", []))
    columns = [column for m in official for column in (m, ANSWERABLE_PREFIX + m)]
    return [c for c in columns if c in rows.columns and rows[c].notna().any()]


def metric_table(data: RunData, dataset: str, comparisons: pd.DataFrame) -> Table:
    """One dataset: a row per system, its official measures first, then every measure plus latency; best bold.

    Measures the dataset was not evaluated on are left out. Latency is a fusion's total with its inputs',
    and the "parallel" one beside it. The baseline row is marked "(baseline)"; a measure value carries
    a marker per test that found it significantly different from the baseline after the correction.
    """
    rows = data.results[data.results["dataset"] == dataset].reset_index(drop=True)
    official = official_columns(data, dataset, rows)
    columns = [*official, *[m for m in data.measures if m not in official], *LATENCY_COLUMNS]
    columns = [c for c in columns if c in rows.columns and rows[c].notna().any()]
    table = Table(header=["system", *[_column_title(c) for c in columns]], rows=[])
    for _, row in rows.iterrows():
        name = str(row["system"])
        if data.spec.baseline is not None and _is_baseline(rows, name, data.spec.baseline):
            name += " (baseline)"
        cells = [name]
        for column in columns:
            text = fmt(row[column])
            if column in data.measures:
                text += _markers(comparisons, row["cell_id"], column, data.spec)
            cells.append(text)
        table.rows.append(cells)
    for j, column in enumerate(columns, start=1):
        values = rows[column]
        if values.notna().any():
            best = values.min() if column.startswith("latency") else values.max()
            table.bold |= {(i, j) for i in range(len(rows)) if values.iloc[i] == best}
    return table


def _column_title(column: str) -> str:
    return f"{column} (ms)" if column.endswith("_ms") else column


def _is_baseline(rows: pd.DataFrame, label: str, baseline: str) -> bool:
    return label in set(cells_of(rows, baseline)["system"])


def _markers(comparisons: pd.DataFrame, cell_id: str, measure: str, spec: CompareSpec) -> str:
    if comparisons.empty:
        return ""
    match = comparisons[(comparisons["cell_id"] == cell_id) & (comparisons["measure"] == measure)]
    if match.empty:
        return ""
    return "".join(MARKERS[t] for t in spec.tests if bool(match[f"significant_{t}"].iloc[0]))


def comparison_table(comparisons: pd.DataFrame, spec: CompareSpec) -> Table:
    """Every comparison with the baseline: delta, 95% bootstrap CI, Cohen's d, raw and corrected p."""
    header = ["dataset", "system", "measure", "delta", "95% CI", "Cohen's d", "queries", "missing"]
    for test in spec.tests:
        header += [f"p ({test})", f"p ({test}, {spec.correction})"]
    table = Table(header=header, rows=[])
    for _, row in comparisons.iterrows():
        cells = [row["dataset"], row["system"], row["measure"], f"{row['delta']:+.{DIGITS}f}"]
        cells += [f"[{row['ci_low']:+.{DIGITS}f}, {row['ci_high']:+.{DIGITS}f}]", fmt(row["cohens_d"], 2)]
        cells += [str(row["n_queries"]), f"{row['missing_in_baseline']}/{row['missing_in_system']}"]
        for test in spec.tests:
            cells += [fmt_p(row[f"p_{test}"]), fmt_p(row[f"p_{test}_adj"])]
            if row[f"significant_{test}"]:
                table.bold.add((len(table.rows), len(cells) - 1))
        table.rows.append(cells)
    return table


def study_tables(study: Any, spec: CompareSpec) -> tuple[Table, Table]:
    """The RRF-ordering study: (per dataset headline table, per paired setting table) on its measure."""
    test = spec.tests[0]
    headline = Table(
        header=[
            "dataset",
            "settings",
            f"mean delta {study.measure}",
            "95% CI",
            f"p ({test}, {spec.correction})",
            "significant settings",
            "top-10 changed",
            "Kendall tau",
        ],
        rows=[],
    )
    for _, row in study.datasets.iterrows():
        headline.rows.append(
            [
                row["dataset"],
                str(row["settings"]),
                f"{row['delta']:+.{DIGITS}f}",
                f"[{row['ci_low']:+.{DIGITS}f}, {row['ci_high']:+.{DIGITS}f}]",
                fmt_p(row[f"p_{test}_adj"]),
                f"{row['significant_settings']}/{row['settings']}",
                f"{row['top_changed_share']:.1%}",
                f"{row['kendall_tau']:.3f}",
            ]
        )
    detail = Table(
        header=[
            "dataset",
            "setting",
            "as_documented",
            "fixed",
            "delta",
            *[f"p ({t}, {spec.correction})" for t in spec.tests],
            "top-10 changed",
            "Kendall tau",
        ],
        rows=[],
    )
    primary = study.pairs[study.pairs["measure"] == study.measure]
    for _, row in primary.iterrows():
        detail.rows.append(
            [
                row["dataset"],
                row["setting"],
                fmt(row["mean_baseline"]),
                fmt(row["mean_system"]),
                f"{row['delta']:+.{DIGITS}f}",
                *[fmt_p(row[f"p_{t}_adj"]) for t in spec.tests],
                f"{row['top_changed_share']:.1%}",
                f"{row['kendall_tau']:.3f}",
            ]
        )
    return headline, detail


def efficiency_table(data: RunData) -> Table:
    """Efficiency per cell: index time, latency, throughput, memory (with units in the header)."""
    columns = [c for c in EFFICIENCY if c in data.results.columns]
    header = [
        "dataset",
        "system",
        *[f"{c} ({UNITS[c]})" if c in UNITS else _column_title(c) for c in columns],
    ]
    rows = [[r["dataset"], r["system"], *[fmt(r[c], 2) for c in columns]] for _, r in data.results.iterrows()]
    return Table(header=header, rows=rows)


def library_versions(data: RunData) -> dict[str, str]:
    """Library versions in the resolved config, then any others the cells recorded (first seen wins)."""
    versions: dict[str, str] = {k: str(v) for k, v in (data.config.get("versions") or {}).items()}
    for result in data.cell_results.values():
        for library, version in (result.get("library_versions") or {}).items():
            versions.setdefault(library, str(version))
    return dict(sorted(versions.items()))
