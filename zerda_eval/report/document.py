"""The report's content as a list of blocks, built once and rendered by ``markdown``, ``html`` and ``latex``.

Order: summary and contents; each study's section (its headline answer); the best held-out
configuration per dataset (when the experiment tunes); results per dataset (the main
table, then every measure as bars with CIs); the comparisons with the baseline (wins/ties/losses, a
per-query scatter and the tests per dataset); quality against latency per dataset; parameter sweeps;
efficiency per dataset; the configuration and library versions.
"""

from __future__ import annotations

import json
import platform
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zerda_eval.analysis import significance as sig
from zerda_eval.analysis.best import best_configurations, fold_choices
from zerda_eval.analysis.compare import compare_to_baseline
from zerda_eval.analysis.formatting import fmt
from zerda_eval.analysis.studies import run_studies
from zerda_eval.analysis.studies.base import FinishedRun
from zerda_eval.errors import ZerdaEvalError
from zerda_eval.evaluation.efficiency import NOT_MEASURED
from zerda_eval.evaluation.measures import ANSWERABLE_PREFIX, parse_measure
from zerda_eval.report import plots
from zerda_eval.report.explorer import Explorer, dataset_collections, explorer_block
from zerda_eval.report.tables import (
    MARKERS,
    RunData,
    Table,
    comparison_table,
    dataset_measures,
    efficiency_table,
    label_table,
    library_versions,
    metric_table,
    official_columns,
)

TEST_NAMES = {"t-test": "paired t-test", "fisher": "randomisation (Fisher) test"}
EFFICIENCY_NOTE = (
    "A fusion's index time and latency include its inputs' (run one after the other); the parallel columns "
    "take its slowest input instead (inputs side by side). A fusion's or tuned row's index time and build "
    "time count a store entry its cells share (one corpus encoding, one BM25 index) once (result.json: "
    "builds_counted_once). peak RSS is the process's resident high-water "
    "mark during the cell (reset at the cell's start on Linux; a fusion: its largest input or the fusing step). "
    "A rerank row's latency is its input's plus the re-ranking's own per query, its index time the input's plus "
    "loading the model, its peak RSS the input's or the re-ranking's, the larger. "
    f'"{NOT_MEASURED}": the cell timed nothing of its own (a run file, or a fusion over one).'
)
SWEEPS = (("k", "RRF k"), ("weights", "weight of the first input"), ("vector_weight", "vector weight"))


@dataclass(frozen=True)
class Heading:
    level: int
    text: str
    anchor: str = ""


@dataclass(frozen=True)
class Paragraph:
    text: str


@dataclass(frozen=True)
class Code:
    text: str
    language: str = ""


@dataclass(frozen=True)
class Contents:
    """The table of contents: (level, text, anchor) of every level-2 and level-3 heading."""

    entries: tuple[tuple[int, str, str], ...]


Block = Heading | Paragraph | Code | Table | plots.Figure | Contents | Explorer


def anchor_of(text: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens (markdown links work)."""
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def with_anchors(blocks: list[Block]) -> list[Block]:
    """Headings given unique anchors (GitHub's ``-1``, ``-2`` suffixes), and the contents filled in."""
    seen: dict[str, int] = {}
    out: list[Block] = []
    for block in blocks:
        if isinstance(block, Heading):
            base = anchor_of(block.text)
            count = seen.get(base, 0)
            seen[base] = count + 1
            block = Heading(block.level, block.text, base if count == 0 else f"{base}-{count}")
        out.append(block)
    entries = tuple((b.level, b.text, b.anchor) for b in out if isinstance(b, Heading) and b.level in (2, 3))
    return [Contents(entries) if isinstance(b, Contents) else b for b in out]


def build_document(data: RunData, plot_dir: Path) -> list[Block]:
    """Every section of the report, with its plots written to ``plot_dir``."""
    spec = data.spec
    comparisons = compare_to_baseline(data.results, data.per_query, spec)
    finished = FinishedRun(data.run_dir, data.results, data.per_query, spec, data.measures)
    studies = run_studies(data.settings.studies, finished)
    blocks: list[Block] = [Heading(1, f"zerda-eval report: {data.name}"), Paragraph(_summary(data)), Contents(())]
    for study in studies:
        blocks += [Heading(2, study.title), Paragraph(study.summary)]
        for caption, frame in study.tables:
            blocks += [Paragraph(caption), Table.of_frame(frame)]
        blocks += [plots.study_figure(figure, plot_dir) for figure in study.figures]
        for caption, frame in study.detail:
            blocks += [Heading(3, caption), Table.of_frame(frame)]
    blocks += _best_configurations(data)
    blocks += [Heading(2, "Results per dataset"), Paragraph(_legend(data))]
    labels = label_table(data)
    if labels is not None:
        blocks += [Paragraph("Grid cells are named by the parameters that vary between them:"), labels]
    collections = dataset_collections(data)
    for dataset in data.datasets:
        blocks += [Heading(3, dataset), metric_table(data, dataset, comparisons)]
        note = judged_note(dataset_measures(data, dataset), collections[dataset])
        blocks += [Paragraph(note)] if note else []
        blocks.append(plots.metric_bars(data, dataset, plot_dir))
    if not comparisons.empty:
        blocks += _comparisons(data, comparisons, plot_dir)
    explorer = explorer_block(data, collections)
    if explorer is not None:
        blocks += [Heading(2, "Per-query explorer"), explorer]
    blocks += _quality_latency(data, plot_dir)
    sweeps = [plots.sweep_curves(data.results, data.measures[0], param, xlabel, plot_dir) for param, xlabel in SWEEPS]
    if any(sweeps):
        blocks += [Heading(2, "Parameter sweeps"), *[figure for figure in sweeps if figure]]
    blocks += [Heading(2, "Efficiency"), Paragraph(EFFICIENCY_NOTE)]
    for dataset in data.datasets:
        blocks += [Heading(3, f"Efficiency: {dataset}"), efficiency_table(data, dataset)]
    blocks += _appendix(data)
    return with_anchors(blocks)


def _best_configurations(data: RunData) -> list[Block]:
    """The best held-out (tuned) row per dataset beside the best row picked on the test queries."""
    best = best_configurations(data.results, data.config.get("tuning") or {})
    if best.empty:
        return []
    measure = best["measure"].iloc[0]
    rows = [
        [r["dataset"], r["held_out"], fmt(r["held_out_value"]), r["chosen_by"], r["on_test"], fmt(r["on_test_value"])]
        for _, r in best.iterrows()
    ]
    header = ["dataset", "best held-out row", measure, "chosen by", "best row picked on test (optimistic)", measure]
    note = (
        f"Each tuned row's grid point was chosen without the queries it is scored on (its cell's result.json "
        f"records each fold's choice). The best untuned row was picked by its {measure} on the test queries "
        "themselves: an optimistic figure, shown for the gap."
    )
    blocks = [Heading(2, "Best configuration per dataset"), Paragraph(note), Table(header=header, rows=rows)]
    choices = fold_choices(data.run_dir, data.results, best)
    if choices.empty:
        return blocks
    chosen = [
        [
            c["dataset"],
            c["row"],
            str(c["fold"]),
            c["inputs"] or "-",
            c["chosen"],
            fmt(c["chosen_on_mean"]),
            f"{c['chosen_on_queries']} / {c['answers']}",
        ]
        for _, c in choices.iterrows()
    ]
    header = [
        "dataset",
        "row",
        "fold",
        "inputs chosen",
        "grid point chosen",
        f"{measure} where chosen",
        "queries: chosen on / answered",
    ]
    note = (
        "What each fold (or the train split) chose on its training queries only, for the best held-out row of "
        "each dataset and every fusion over tuned inputs (which first chose each input's grid point, then its own)."
    )
    return [*blocks, Heading(3, "What each fold chose"), Paragraph(note), Table(header=header, rows=chosen)]


def _summary(data: RunData) -> str:
    measures = list(dict.fromkeys(m for d in data.datasets for m in dataset_measures(data, d)))
    baseline = f" Baseline: {data.spec.baseline}." if data.spec.baseline else ""
    description = str(data.config.get("experiment", {}).get("description") or "").strip()
    opening = f"{description.rstrip('.')}. " if description else ""
    return (
        f"{opening}{len(data.results)} cells over {len(data.datasets)} dataset(s): {', '.join(data.datasets)}. "
        f"Measures: {', '.join(measures)}; tested against the baseline: {', '.join(data.measures)}.{baseline} "
        f"Generated by `zerda-eval report` from `{data.run_dir}`."
    )


def _legend(data: RunData) -> str:
    spec = data.spec
    parts = [
        "One row per system, one column per measure (mean over the dataset's judged queries); bold: best value "
        "per column (lowest for latency). Latency: mean per query in ms, a fusion's with its inputs' "
        f'("{NOT_MEASURED}": a run file).'
    ]
    if any(official_columns(data, d, data.results[data.results["dataset"] == d]) for d in data.datasets):
        parts.append(
            "Official measures of a task come first (Qur'an QA 2023: MAP@10 and MRR@10 under the task's "
            "no-answer rule), each followed by its answerable-only figure (answerable:...)."
        )
    if spec.baseline is not None:
        markers = ", ".join(f"{MARKERS[t]} = {TEST_NAMES[t]}" for t in spec.tests)
        parts.append(
            f"Markers on the tested measures ({', '.join(data.measures)}): significantly different from the "
            f"baseline {spec.baseline} ({markers}; {spec.correction} correction over the comparisons of each "
            f"dataset, alpha = {spec.alpha})."
        )
    return " ".join(parts)


def _comparisons(data: RunData, comparisons, plot_dir: Path) -> list[Block]:
    spec, measure = data.spec, data.measures[0]
    blocks: list[Block] = [Heading(2, f"Against the baseline ({spec.baseline})"), Paragraph(_tests_note(data))]
    figure = plots.win_tie_loss_bars(data, measure, plot_dir)
    blocks += [figure] if figure else []
    for dataset in data.datasets:
        if (comparisons["dataset"] == dataset).any():
            queries = int(comparisons[comparisons["dataset"] == dataset]["n_queries"].max())
            blocks += [Heading(3, f"{dataset} against {spec.baseline}")]
            scatter = plots.per_query_scatter(data, dataset, measure, plot_dir)
            blocks += [scatter] if scatter else []
            blocks += [Paragraph(f"{queries} queries."), comparison_table(data, comparisons, dataset)]
    return blocks


def _tests_note(data: RunData) -> str:
    spec = data.spec
    return (
        f"Per-query values are aligned by query id; a query missing from a run counts as 0 (a 'missing' column, "
        f"baseline/system, appears when any was). Tests: "
        f"{'; '.join(sig.describe_test(t, spec.n_permutations, spec.seed) for t in spec.tests)}. "
        f"p-values corrected with {spec.correction} per dataset (raw ones in `Results.compare()`); bold = "
        f"significant at alpha {spec.alpha}. Delta = system minus baseline; CI = 95% percentile bootstrap of the "
        "mean delta; Cohen's d for paired samples. The plots use the first tested measure."
    )


def _quality_latency(data: RunData, plot_dir: Path) -> list[Block]:
    figures = [plots.quality_latency(data, dataset, data.measures[0], plot_dir) for dataset in data.datasets]
    if not any(figures):
        return []
    return [Heading(2, "Quality against latency"), *[figure for figure in figures if figure]]


def _appendix(data: RunData) -> list[Block]:
    import matplotlib
    import numpy
    import pandas
    import scipy

    versions = {
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "pandas": pandas.__version__,
        "scipy": scipy.__version__,
        "matplotlib": matplotlib.__version__,
    }
    versions |= library_versions(data)
    lines = [f"{name}: {version}" for name, version in versions.items()]
    return [
        Heading(2, "Appendix: configuration and library versions"),
        Paragraph(f"Config hash: `{data.config_hash}`." if data.config_hash else "Resolved configuration:"),
        Code(json.dumps(data.config, indent=2, sort_keys=True, default=str), "json"),
        Code("\n".join(lines)),
    ]


def judged_note(measures: Sequence[str], collection: Any) -> str | None:
    """Why Judged@k equals P@k on this dataset, when its judgements hold no judged non-relevant document: a judged
    document in a top k is then a relevant one, so the two cannot differ (for runs of at least k documents)."""
    if isinstance(collection, ZerdaEvalError):
        return None
    if any(grade <= 0 for docs in collection.qrels.values() for grade in docs.values()):
        return None
    parsed = [(name, parse_measure(name)) for name in measures if not name.startswith(ANSWERABLE_PREFIX)]
    pairs = [
        (judged, precision)
        for judged, j in parsed
        if j.family == "judged"
        for precision, p in parsed
        if p.family == "precision" and p.cutoff == j.cutoff and p.rel <= 1
    ]
    if not pairs:
        return None
    named = ", ".join(f"{judged} and {precision}" for judged, precision in pairs)
    return (
        f"{named} cannot differ here for a run that returns at least k documents: every judged document of this "
        "dataset is relevant (its judgements hold no non-relevant one), so a judged document in a top k is a "
        "relevant one."
    )
