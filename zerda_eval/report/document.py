"""The report's content as a list of blocks, built once and rendered by ``markdown``, ``html`` and ``latex``.

Order: summary and contents; each study's section (its headline answer); the best configuration per
dataset (when the experiment tunes: ``best[nested]``, chosen on training queries only, beside the per-row
figures); results per dataset (the main table, then every measure as bars with CIs); the comparisons with
the baseline (wins/ties/losses, a per-query scatter, the tests per dataset with effect intervals, the
tests' agreement and power, and a figure of the effects); every row of each dataset at once (rank
stability, randomised Tukey HSD, ANOVA); quality against latency per dataset; parameter sweeps; efficiency
per dataset; the configuration and library versions. Every number comes from ``analysis``.
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
from zerda_eval.analysis.formatting import UNDERPOWERED, fmt, fmt_count, fmt_p
from zerda_eval.analysis.grid import GridAnalysis, analyse_grid
from zerda_eval.analysis.nested import NESTED, nested_best
from zerda_eval.analysis.power import queries_needed
from zerda_eval.analysis.rank_stability import RESAMPLES
from zerda_eval.analysis.studies import run_studies
from zerda_eval.analysis.studies.base import FinishedRun
from zerda_eval.errors import ZerdaEvalError
from zerda_eval.evaluation.efficiency import NOT_MEASURED
from zerda_eval.evaluation.measures import ANSWERABLE_PREFIX, parse_measure
from zerda_eval.evaluation.tie_aware import TIE_SENSITIVE
from zerda_eval.report import plots
from zerda_eval.report.explorer import Explorer, dataset_collections, explorer_block
from zerda_eval.report.tables import (
    MARKERS,
    TIE_MARKER,
    RunData,
    Table,
    comparison_table,
    dataset_measures,
    efficiency_table,
    label_table,
    library_versions,
    metric_table,
    official_columns,
    tie_sensitive,
)

TEST_NAMES = {
    "t-test": "paired t-test",
    "fisher": "randomisation (Fisher) test",
    "wilcoxon": "Wilcoxon signed-rank test",
}
EFFICIENCY_NOTE = (
    "A fusion's index time and latency include its inputs' (run one after the other); the parallel columns "
    "take its slowest input instead (inputs side by side). A fusion's or tuned row's index time and build "
    "time count a store entry its cells share (one corpus encoding, one BM25 index) once (result.json: "
    "builds_counted_once), and a system cell under several of them (two grid points of one fusion) once. "
    "peak RSS increment: the cell's resident high-water mark less the process's RSS when the cell started "
    "(Linux; what earlier cells left loaded, such as a model, is not counted; a fusion: the largest of its inputs' "
    "and the fusing step's). "
    "A rerank row's latency is its input's plus the re-ranking's own per query, its index time the input's plus "
    "loading the model, its peak RSS increment the input's or the re-ranking's, the larger. "
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
    blocks += _all_rows(data, plot_dir)
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
    nested, nested_folds = nested_best(data.run_dir, data.results, data.per_query, measure)
    answers = nested.set_index("dataset")
    rows = [
        [
            r["dataset"],
            *(
                [fmt(answers.loc[r["dataset"], "value"]), answers.loc[r["dataset"], "chosen"]]
                if r["dataset"] in answers.index
                else ["-", "-"]
            ),
            r["held_out"],
            fmt(r["held_out_value"]),
            r["chosen_by"],
            r["on_test"],
            fmt(r["on_test_value"]),
        ]
        for _, r in best.iterrows()
    ]
    header = [
        "dataset",
        f"{NESTED} {measure}",
        f"rows {NESTED} chose (folds won)",
        "best tuned row (picked on test)",
        measure,
        "its grid point chosen by",
        "best untuned row (picked on test)",
        measure,
    ]
    note = (
        f"The answer is {NESTED}: on each fold, the tuned row (configuration and grid point together) best on the "
        "fold's training queries answers the fold's held-out queries, so no test query takes part in any choice "
        "(analysis.nested). Beside it, the per-row figures: each tuned row's grid point was chosen without the "
        "queries it is scored on, but picking the best of those rows by their test scores is a choice made on the "
        f"test queries, and the best untuned row is picked by its {measure} on them outright: both optimistic, "
        f"shown for the gap. A dash: the tuned rows of that dataset predate the record of their folds (rerun)."
    )
    blocks = [Heading(2, "Best configuration per dataset"), Paragraph(note), Table(header=header, rows=rows)]
    if not nested_folds.empty:
        chosen = [
            [f["dataset"], str(f["fold"]), f["row"], f["chosen"], fmt(f["chosen_on_mean"]), str(f["answers"])]
            for _, f in nested_folds.iterrows()
        ]
        header = ["dataset", "fold", "tuned row chosen", "its grid point", f"{measure} on training queries", "answers"]
        blocks += [
            Heading(3, f"What {NESTED} chose per fold"),
            Table(header=header, rows=chosen),
        ]
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
    if any(tie_sensitive(row, column) for _, row in data.results.iterrows() for column in data.results.columns):
        parts.append(
            f"{TIE_MARKER}: the value moves by more than {TIE_SENSITIVE} with the order of tied scores (shown: "
            "its value in the harness's one tie order; results.csv gives the expected value over every order "
            "and the range as '<measure> expected', '<measure> min', '<measure> max')."
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
            effects = plots.effect_intervals(data, comparisons, dataset, measure, plot_dir)
            blocks += [effects] if effects else []
    return blocks


def _tests_note(data: RunData) -> str:
    spec = data.spec
    first = TEST_NAMES[spec.tests[0]]
    return (
        f"Per-query values are aligned by query id; a query missing from a run counts as 0 (a 'missing' column, "
        f"baseline/system, appears when any was). Tests: "
        f"{'; '.join(sig.describe_test(t, spec.n_permutations, spec.seed) for t in spec.tests)}. "
        f"Corrections: {spec.correction} and Benjamini-Hochberg (BH, false discovery rate), each over one family: "
        f"all comparisons of one dataset's table (every system and measure against the baseline); raw p-values in "
        f"`Results.compare()`. Bold = significant at alpha {spec.alpha}. Delta = system minus baseline, with its "
        f"95% t interval and 95% BCa bootstrap interval; d_z = delta over the standard deviation of the per-query "
        f"differences. Tests: the paired t-test, the Wilcoxon signed-rank test and the randomisation test side by "
        f"side on the raw p-values; **differ** marks a comparison they do not agree on at alpha. Power: MDE = the "
        f"smallest mean difference the {first} detects with probability {spec.power:g} at alpha {spec.alpha} with "
        f"these queries and this variance; 'queries for ±{fmt(spec.min_effect, 2)}' = the queries a difference of "
        f"[compare].min_effect = {fmt(spec.min_effect, 2)} would need (Sakai's topic-set size); "
        f"'{UNDERPOWERED}' = not significant AND the MDE above min_effect: absence of evidence, not evidence of "
        "absence. The plots use the first tested measure."
    )


def _all_rows(data: RunData, plot_dir: Path) -> list[Block]:
    """Per dataset, every row at once on the first tested measure: rank stability, all pairs, the ANOVA."""
    spec, measure = data.spec, data.measures[0]
    analyses = analyse_grid(data.results, data.per_query, measure, spec)
    if not analyses:
        return []
    note = (
        f"Every row of a dataset on {measure}, without a baseline. Rank stability: {RESAMPLES:,} bootstrap "
        f"resamples of the queries (seed {spec.seed}), each ranking every row by its mean. All pairs: "
        f"the randomised Tukey HSD (Carterette, TOIS 2012; {spec.n_permutations} permutations of each query's "
        "values among the rows, seed "
        f"{spec.seed}), whose family is every pair of the dataset's rows. ANOVA: topic x system, two-way without "
        "replication, with the variance components of each source; the residual one sets the queries a "
        "difference needs (Sakai's topic-set size)."
    )
    blocks: list[Block] = [Heading(2, "Every row: ranking stability, all pairs, variance"), Paragraph(note)]
    for analysis in analyses:
        blocks += [Heading(3, f"Every row of {analysis.dataset}"), Paragraph(_grid_summary(data, analysis))]
        blocks += [plots.rank_stability(data, analysis.ranks, analysis.dataset, measure, plot_dir)]
        blocks += [rank_table(data, analysis), anova_table(analysis)]
    return blocks


def _grid_summary(data: RunData, analysis: GridAnalysis) -> str:
    """What the grid's statistics say, in three sentences (generated from the numbers)."""
    spec = data.spec
    pairs, ranks, anova = analysis.pairs, analysis.ranks, analysis.anova.set_index("source")
    top = ranks.iloc[0]
    tied = ranks[(~ranks["differs_from_best"]) & (ranks["cell_id"] != top["cell_id"])]
    residual = float(anova.loc["residual", "variance"])
    needed = queries_needed(spec.min_effect, (2 * residual) ** 0.5, spec.alpha, spec.power)
    best = data.labels.get(top["system"], top["system"])
    return (
        f"{int(pairs['significant'].sum())} of {len(pairs)} pairs of rows differ significantly (Tukey HSD, alpha "
        f"{spec.alpha}). The best row, {best}, is best in {top['p_best']:.0%} of resamples; "
        f"{len(tied)} other row(s) cannot be told apart from it. Variance: topics {anova.loc['topic', 'share']:.0%}, "
        f"systems {anova.loc['system', 'share']:.0%}, residual {anova.loc['residual', 'share']:.0%}; with this "
        f"residual variance, two rows {fmt(spec.min_effect, 2)} apart need {fmt_count(needed)} queries to be told "
        f"apart with power {spec.power:g} ({analysis.queries} here)."
    )


def rank_table(data: RunData, analysis: GridAnalysis) -> Table:
    """The rows the rank figure draws: mean, observed rank, 95% rank interval, P(best), Tukey against the best."""
    shown = analysis.ranks.head(plots.MAX_DRAWN)
    rows = [
        [
            data.labels.get(str(r["system"]), str(r["system"])),
            fmt(r["mean"]),
            str(r["rank"]),
            f"{r['rank_low']}-{r['rank_high']}",
            f"{r['p_best']:.0%}",
            "best" if r["rank"] == 1 else "yes" if r["differs_from_best"] else "no",
        ]
        for _, r in shown.iterrows()
    ]
    header = ["row", analysis.measure, "rank", "95% rank interval", "P(best)", "differs from the best (Tukey)"]
    return Table(header=header, rows=rows)


def anova_table(analysis: GridAnalysis) -> Table:
    """The topic x system ANOVA with its variance components."""
    rows = [
        [
            r["source"],
            fmt(r["sum_sq"]),
            str(int(r["df"])),
            fmt(r["mean_sq"], 5),
            fmt(r["F"], 2),
            fmt_p(r["p"]),
            fmt(r["variance"], 5),
            f"{r['share']:.0%}" if r["share"] == r["share"] else "-",
        ]
        for _, r in analysis.anova.iterrows()
    ]
    return Table(header=["source", "sum of squares", "df", "mean square", "F", "p", "variance", "share"], rows=rows)


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
