"""Read a run directory and turn results and comparisons into display tables.

A ``Table`` is what every renderer (markdown, html, latex) prints: a header, rows of strings, and
which cells are bold. Numbers are formatted here once, so the renderers agree. Systems are shown by
their short labels (``labels.short_labels``); the full labels are listed once in the report.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from zerda_eval.analysis.compare import CompareSpec, cells_of, measure_columns
from zerda_eval.analysis.formatting import DIFFER, UNDERPOWERED, fmt, fmt_ci, fmt_count, fmt_delta, fmt_p
from zerda_eval.analysis.settings import AnalysisSettings, parse_analysis
from zerda_eval.evaluation.efficiency import EFFICIENCY_COLUMNS, NOT_MEASURED
from zerda_eval.evaluation.measures import ANSWERABLE_PREFIX
from zerda_eval.evaluation.tie_aware import TIE_SENSITIVE, tie_range
from zerda_eval.report.labels import short_labels
from zerda_eval.store.run_dir import EXPERIMENT_FILE, read_experiment_json, read_tables

COLUMN_TITLES = {  # efficiency columns as headers: the unit once, in parentheses
    "index_time_s": "index time (s)",
    "index_build_s": "index build (s)",
    "index_time_parallel_s": "index, parallel (s)",
    "latency_mean_ms": "latency (ms)",
    "latency_p50_ms": "p50 (ms)",
    "latency_p95_ms": "p95 (ms)",
    "latency_p99_ms": "p99 (ms)",
    "latency_parallel_mean_ms": "latency, parallel (ms)",
    "qps": "queries/s",
    "peak_rss_increment_mb": "peak RSS increment over the cell's start (MB)",
}
MAIN_LATENCY = "latency_mean_ms"  # a fusion's total with its inputs' (the parallel figure: efficiency table)
MARKERS = {"t-test": "*", "fisher": "†", "wilcoxon": "‡"}
TIE_MARKER = "§"  # a mean that moves by more than TIE_SENSITIVE with the order of tied documents
TEST_TITLES = {"t-test": "t-test", "fisher": "Fisher", "wilcoxon": "Wilcoxon"}
NUMERIC = re.compile(r"^([+-]?(\d+(\.\d*)?|\.\d+)(e[+-]?\d+)?%?[*†‡§]*|<1e-4|-|\d+/\d+|\[.*\]|>?[\d,]+|∞)$")


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
    measures: list[str]  # the compared measures ([compare].measures, default all)

    @property
    def spec(self) -> CompareSpec:
        """The ``[compare]`` settings."""
        return self.settings.compare

    @property
    def datasets(self) -> list[str]:
        """Dataset labels in results order."""
        return list(dict.fromkeys(self.results["dataset"]))

    @cached_property
    def labels(self) -> dict[str, str]:
        """``{full system label: short label}`` (``labels.short_labels``)."""
        return short_labels(self.results["system"].astype(str))


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

    def numeric(self) -> list[bool]:
        """Per column: every cell is a number ("-", "not measured", a CI or a marked value count as one).

        Renderers right-align these and left-align text.
        """
        columns = []
        for j in range(len(self.header)):
            cells = [row[j] for row in self.rows if row[j] not in ("", NOT_MEASURED)]
            columns.append(bool(cells) and all(NUMERIC.match(cell) for cell in cells))
        return columns


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


def _dataset_entry(data: RunData, dataset: str) -> dict[str, Any]:
    for entry in data.config.get("datasets", []):
        if isinstance(entry, dict) and entry.get("label", entry.get("id")) == dataset:
            return entry
    return {}


def official_columns(data: RunData, dataset: str, rows: pd.DataFrame) -> list[str]:
    """A dataset's official measures (its ``official_measures`` option, Qur'an QA: MAP@10, MRR@10), each
    followed by its answerable-only figure, as far as the results hold them."""
    official = list((_dataset_entry(data, dataset).get("options") or {}).get("official_measures", []))
    columns = [column for m in official for column in (m, ANSWERABLE_PREFIX + m)]
    return [c for c in columns if c in rows.columns and rows[c].notna().any()]


def dataset_measures(data: RunData, dataset: str) -> list[str]:
    """Every measure the experiment asked of ``dataset`` that it holds: official ones (with their
    answerable-only figure) first, then the dataset's ``measures`` (else the experiment's), then any
    compared measure not yet listed. Other answerable-only figures stay in results.csv."""
    rows = data.results[data.results["dataset"] == dataset]
    official = official_columns(data, dataset, rows)
    asked = _dataset_entry(data, dataset).get("measures") or data.config.get("experiment", {}).get("measures") or []
    columns = list(dict.fromkeys([*official, *asked, *data.measures]))
    return [c for c in columns if c in rows.columns and rows[c].notna().any()]


def system_cell(data: RunData, rows: pd.DataFrame, label: str) -> str:
    """A system as a table shows it: its short label, "(baseline)" after the baseline's."""
    short = data.labels.get(label, label)
    if data.spec.baseline is not None and label in set(cells_of(rows, data.spec.baseline)["system"]):
        return f"{short} (baseline)"
    return short


def metric_table(data: RunData, dataset: str, comparisons: pd.DataFrame) -> Table:
    """One dataset: a row per system, a column per measure (official ones first), then latency; best bold.

    Measures the dataset was not evaluated on are left out. Latency is a fusion's total with its inputs'
    ("not measured" for a run file). A compared measure carries a marker per test that found it
    significantly different from the baseline after the correction; ``TIE_MARKER`` flags a value that
    moves by more than ``TIE_SENSITIVE`` with the order of tied documents (``tie_sensitive``).
    """
    rows = data.results[data.results["dataset"] == dataset].reset_index(drop=True)
    columns = dataset_measures(data, dataset)
    latency = MAIN_LATENCY in rows.columns
    table = Table(header=["system", *columns, *([COLUMN_TITLES[MAIN_LATENCY]] if latency else [])], rows=[])
    for _, row in rows.iterrows():
        cells = [system_cell(data, rows, str(row["system"]))]
        for column in columns:
            marks = _markers(comparisons, row["cell_id"], column, data.spec)
            cells.append(fmt(row[column]) + marks + (TIE_MARKER if tie_sensitive(row, column) else ""))
        if latency:
            cells.append(_cost(row[MAIN_LATENCY]))
        table.rows.append(cells)
    for j, column in enumerate([*columns, *([MAIN_LATENCY] if latency else [])], start=1):
        values = rows[column]
        if values.notna().any():
            best = values.min() if column == MAIN_LATENCY else values.max()
            table.bold |= {(i, j) for i in range(len(rows)) if values.iloc[i] == best}
    return table


def tie_sensitive(row: Any, measure: str) -> bool:
    """Whether a results row's ``measure`` can move by more than ``TIE_SENSITIVE`` with the tie order."""
    return bool(tie_range(row, measure) > TIE_SENSITIVE)  # NaN (not recorded) compares False


def _markers(comparisons: pd.DataFrame, cell_id: str, measure: str, spec: CompareSpec) -> str:
    if comparisons.empty:
        return ""
    match = comparisons[(comparisons["cell_id"] == cell_id) & (comparisons["measure"] == measure)]
    if match.empty:
        return ""
    return "".join(MARKERS[t] for t in spec.tests if bool(match[f"significant_{t}"].iloc[0]))


def comparison_table(data: RunData, comparisons: pd.DataFrame, dataset: str) -> Table:
    """One dataset's comparisons with the baseline: delta with its 95% t and BCa intervals, d_z, corrected p
    per test (bold when significant) and the first test's Benjamini-Hochberg p; whether the three tests agree
    at alpha ("differ" in bold when not); the minimum detectable effect, the queries ``min_effect`` needs and
    the "n.s., underpowered" flag; a "missing" column (baseline/system) only when a query was missing."""
    spec = data.spec
    rows = comparisons[comparisons["dataset"] == dataset]
    missing = bool((rows["missing_in_baseline"] > 0).any() or (rows["missing_in_system"] > 0).any())
    first = spec.tests[0]
    header = ["system", "measure", "delta", "95% CI (t)", "95% CI (BCa)", "d_z"]
    header += [f"p {TEST_TITLES[t]} ({spec.correction})" for t in spec.tests] + [f"p {TEST_TITLES[first]} (BH)"]
    header += ["tests", "MDE", f"queries for ±{fmt(spec.min_effect, 2)}", "power"] + (["missing"] if missing else [])
    table = Table(header=header, rows=[])
    results = data.results[data.results["dataset"] == dataset]
    for _, row in rows.iterrows():
        cells = [system_cell(data, results, str(row["system"])), row["measure"], fmt_delta(row["delta"])]
        cells += [fmt_ci(row["t_low"], row["t_high"], 3), fmt_ci(row["ci_low"], row["ci_high"], 3)]
        cells.append(fmt(row["cohens_d"], 2))
        for test in spec.tests:
            cells.append(fmt_p(row[f"p_{test}_adj"]))
            if row[f"significant_{test}"]:
                table.bold.add((len(table.rows), len(cells) - 1))
        cells.append(fmt_p(row[f"p_{first}_bh"]))
        cells.append("agree" if row["tests_agree"] else DIFFER)
        if not row["tests_agree"]:
            table.bold.add((len(table.rows), len(cells) - 1))
        cells += [fmt(row["mde"], 3), fmt_count(row["queries_needed"]), UNDERPOWERED if row["underpowered"] else ""]
        if missing:
            cells.append(f"{row['missing_in_baseline']}/{row['missing_in_system']}")
        table.rows.append(cells)
    return table


def efficiency_columns(data: RunData) -> list[str]:
    """The efficiency columns the results hold (p99 left to results.csv: p95 says as much at these sizes)."""
    return [c for c in EFFICIENCY_COLUMNS if c in data.results.columns and c != "latency_p99_ms"]


def efficiency_table(data: RunData, dataset: str | None = None) -> Table:
    """Efficiency per cell (of one dataset, or all with a dataset column): index time, latency, throughput,
    memory; the unit once in each header; "not measured" where a cell could not measure (a run file)."""
    columns = efficiency_columns(data)
    results = data.results if dataset is None else data.results[data.results["dataset"] == dataset]
    lead = ["system"] if dataset is not None else ["dataset", "system"]
    header = [*lead, *[COLUMN_TITLES.get(c, c) for c in columns]]
    rows = []
    for _, r in results.iterrows():
        system = system_cell(data, results[results["dataset"] == r["dataset"]], str(r["system"]))
        rows.append([*([] if dataset is not None else [r["dataset"]]), system, *[_cost(r[c]) for c in columns]])
    return Table(header=header, rows=rows)


def _cost(value: Any) -> str:
    """An efficiency figure; NaN means the cell's costs were not measured here (a run file)."""
    return NOT_MEASURED if pd.isna(value) else fmt(value, 2)


def label_table(data: RunData) -> Table | None:
    """Short labels beside the full ones, when any label was shortened (None otherwise)."""
    pairs = [(short, full) for full, short in data.labels.items() if short != full]
    if not pairs:
        return None
    return Table(header=["label in this report", "full label (grid cell)"], rows=[list(p) for p in pairs])


def library_versions(data: RunData) -> dict[str, str]:
    """The library versions recorded in the resolved config when the run started."""
    return dict(sorted((k, str(v)) for k, v in (data.config.get("versions") or {}).items()))
