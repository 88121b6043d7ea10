"""Read a run directory and turn results and comparisons into display tables.

A ``Table`` is what both renderers (markdown, html) print: a header, rows of strings, and which
cells are bold. Numbers are formatted here once, so the markdown and html reports agree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from zerda_eval.analysis.compare import CompareSpec, cells_of, measure_columns
from zerda_eval.analysis.formatting import fmt, fmt_ci, fmt_delta, fmt_p
from zerda_eval.analysis.settings import AnalysisSettings, parse_analysis
from zerda_eval.evaluation.efficiency import EFFICIENCY_COLUMNS, NOT_MEASURED
from zerda_eval.evaluation.measures import ANSWERABLE_PREFIX
from zerda_eval.store.run_dir import EXPERIMENT_FILE, read_experiment_json, read_tables

UNITS = {
    "index_time_s": "s",
    "index_build_s": "s",
    "index_time_parallel_s": "s",
    "qps": "queries/s",
    "peak_rss_mb": "MB",
}
LATENCY_COLUMNS = ("latency_mean_ms", "latency_parallel_mean_ms")
MARKERS = {"t-test": "*", "fisher": "†"}


@dataclass
class RunData:
    """Everything a report needs from one run directory."""

    run_dir: Path
    name: str
    config: dict[str, Any]
    config_hash: str | None
    results: pd.DataFrame
    per_query: pd.DataFrame
    settings: AnalysisSettings
    measures: list[str]

    @property
    def spec(self) -> CompareSpec:
        """The ``[compare]`` settings."""
        return self.settings.compare


@dataclass
class Table:
    """A display table: header, rows of formatted strings, bold cells as (row, column) pairs."""

    header: list[str]
    rows: list[list[str]]
    bold: set[tuple[int, int]] = field(default_factory=set)

    @classmethod
    def of_frame(cls, frame: pd.DataFrame) -> Table:
        """A frame of display strings (a study's table) as a ``Table``."""
        return cls(header=[str(c) for c in frame.columns], rows=[[str(v) for v in row] for row in frame.to_numpy()])


def load_run_dir(run_dir: Path) -> RunData:
    """Read a run directory's ``experiment.json`` and results tables (one-line errors naming the file)."""
    run_dir = Path(run_dir)
    document = read_experiment_json(run_dir)
    config = document["config"]
    results, per_query = read_tables(run_dir)
    settings = parse_analysis(config, str(run_dir / EXPERIMENT_FILE))
    return RunData(
        run_dir=run_dir,
        name=str(config.get("experiment", {}).get("name", run_dir.name)),
        config=config,
        config_hash=document.get("config_hash"),
        results=results,
        per_query=per_query,
        settings=settings,
        measures=measure_columns(results, per_query, settings.compare),
    )


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
        cells = [row["dataset"], row["system"], row["measure"], fmt_delta(row["delta"])]
        cells += [fmt_ci(row["ci_low"], row["ci_high"]), fmt(row["cohens_d"], 2)]
        cells += [str(row["n_queries"]), f"{row['missing_in_baseline']}/{row['missing_in_system']}"]
        for test in spec.tests:
            cells += [fmt_p(row[f"p_{test}"]), fmt_p(row[f"p_{test}_adj"])]
            if row[f"significant_{test}"]:
                table.bold.add((len(table.rows), len(cells) - 1))
        table.rows.append(cells)
    return table


def efficiency_table(data: RunData) -> Table:
    """Efficiency per cell: index time, latency, throughput, memory (with units in the header)."""
    columns = [c for c in EFFICIENCY_COLUMNS if c in data.results.columns and c != "latency_p99_ms"]
    header = [
        "dataset",
        "system",
        *[f"{c} ({UNITS[c]})" if c in UNITS else _column_title(c) for c in columns],
    ]
    rows = [[r["dataset"], r["system"], *[_cost(r[c]) for c in columns]] for _, r in data.results.iterrows()]
    return Table(header=header, rows=rows)


def _cost(value: Any) -> str:
    """An efficiency figure; NaN means the cell's costs were not measured here (a run file)."""
    return NOT_MEASURED if pd.isna(value) else fmt(value, 2)


def library_versions(data: RunData) -> dict[str, str]:
    """The library versions recorded in the resolved config when the run started."""
    return dict(sorted((k, str(v)) for k, v in (data.config.get("versions") or {}).items()))
