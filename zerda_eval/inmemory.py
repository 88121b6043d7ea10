"""The in-memory API, the calls ranx and ir_measures users reach for first, on the grid's own code.

    import zerda_eval as ze

    qrels = ze.read_qrels("qrels.txt")                       # TREC, ranx JSON or Parquet
    run = ze.read_run("bm25.trec")
    ze.evaluate(qrels, run, ["nDCG@10", "R@100", "Judged@10"])
    report = ze.compare(qrels, {"bm25": run, "dense": other}, baseline="bm25")
    report.to_markdown()
    fused = ze.fuse([run, other], method="rrf")
    choice = ze.optimize_fusion(qrels, [run, other], method="wsum", measure="ndcg@10", folds=5)

Runs are ``{qid: {doc_id: score}}`` (ranx's and pytrec_eval's dicts), ``{qid: [(doc_id, score), ...]}``
(the harness's), ranx ``Run`` objects or DataFrames (columns ``q_id`` or ``query_id``, ``doc_id``,
``score``); qrels ``{qid: {doc_id: grade}}`` or a ranx ``Qrels``; ``as_ranx=True`` returns ranx objects.
A run is a ranking by its scores, whatever its container's order: every input is first put in
trec_eval's order (``zerda_eval.ranking.TIE_BREAK``). A doc listed twice for a query is an error unless
``duplicates="max"`` (its best score counts) or ``"first"`` (its first copy) is passed; a run sharing no
query with the qrels is an error, a partial overlap one warning with the counts.

Runs are held as arrays (``zerda_eval.columnar.ColumnarRun``, a read-only mapping of query id to
``[(doc_id, score), ...]``, so it reads like the dict ``Run``): a TREC file is parsed by pyarrow, fusion
and evaluation run compiled over every query at once (``fusion.columns``, ``evaluation.measures.
evaluate_columns``), the same numbers as the dict path the grid runs. Every number comes from the code
the grid runs: the measures from ``evaluation.measures`` (one tie-break, one kernel), fusion from
``fusion.methods`` (``fusion.columns`` computes the same arithmetic on arrays), tests and
corrections from ``analysis.compare``, the tables from the report's own renderers, and the held-out
choice of ``optimize_fusion`` from ``execution.tuning`` (the grid's tuned rows). Runs are evaluated as
given: the grid cuts each at ``[experiment].depth`` first.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from zerda_eval.analysis.compare import compare_to_baseline, parse_compare
from zerda_eval.analysis.settings import AnalysisSettings
from zerda_eval.columnar import ColumnarRun, from_columns, from_run, gather, on_one_table
from zerda_eval.config.experiment import DEFAULT_SEED
from zerda_eval.config.tuning import DEFAULT_FOLDS
from zerda_eval.errors import ConfigError, DataFormatError, unknown_value_message
from zerda_eval.evaluation.measures import (
    DEFAULT_MEASURES,
    aggregate_values,
    check_query_overlap,
    evaluate_columns,
    parse_measure,
)
from zerda_eval.execution.tuning import assign_folds, best_variant
from zerda_eval.fusion import FUSION_METHODS
from zerda_eval.fusion.columns import fuse_columns
from zerda_eval.fusion.simplex import simplex_weights
from zerda_eval.report.html import table_html
from zerda_eval.report.latex import table_latex
from zerda_eval.report.markdown import table_markdown
from zerda_eval.report.tables import RunData, Table, comparison_table, metric_table
from zerda_eval.store import run_files
from zerda_eval.store.qrels_text import integer_grade
from zerda_eval.store.run_files import PARQUET_COLUMNS

WEIGHT_STEP = 0.1  # optimize_fusion's default weights grid: every weight vector in steps of 0.1 summing to 1
DATASET = "runs"  # the dataset label of an in-memory comparison (one set of qrels)
QUERY_COLUMNS = (PARQUET_COLUMNS[0], "query_id")  # a run DataFrame's query column: ranx's, or ir_measures'


def as_run(run: Any, where: str = "run", duplicates: str | None = None) -> ColumnarRun:
    """A run as a ``ColumnarRun`` (rankings in ``TIE_BREAK`` order) from a dict ``{qid: {doc_id: score}}`` or
    ``{qid: [(doc_id, score), ...]}``, a ranx ``Run`` or a DataFrame; ``duplicates`` (None, "max", "first")
    as in ``ranking.tie_break``."""
    if isinstance(run, ColumnarRun):
        return run
    if isinstance(run, pd.DataFrame):
        return _frame_run(run, where, duplicates)
    if hasattr(run, "to_dict") and not isinstance(run, Mapping):
        run = run.to_dict()
    if not isinstance(run, Mapping):
        raise DataFormatError(f"{where}: expected {{qid: {{doc_id: score}}}} or a ranx Run, got {type(run).__name__}")
    return from_run(run, duplicates, where)


def _frame_run(frame: pd.DataFrame, where: str, duplicates: str | None) -> ColumnarRun:
    """The run of a DataFrame's rows (columns: one of ``QUERY_COLUMNS``, doc_id, score)."""
    query = next((column for column in QUERY_COLUMNS if column in frame.columns), None)
    if query is None or not {"doc_id", "score"} <= set(frame.columns):
        raise DataFormatError(
            f"{where}: a run DataFrame needs the columns {' or '.join(QUERY_COLUMNS)}, doc_id and score; "
            f"got {', '.join(map(str, frame.columns))}"
        )
    if not pd.api.types.is_numeric_dtype(frame["score"]) or pd.api.types.is_bool_dtype(frame["score"]):
        rows: dict[str, list[tuple[Any, Any]]] = {}
        for qid, doc_id, score in zip(
            frame[query].tolist(), frame["doc_id"].tolist(), frame["score"].tolist(), strict=True
        ):
            rows.setdefault(str(qid), []).append((doc_id, score))
        return from_run(rows, duplicates, where)
    query_codes, query_ids = pd.factorize(frame[query].astype(str), use_na_sentinel=False)
    doc_codes, doc_ids = pd.factorize(frame["doc_id"].astype(str), use_na_sentinel=False)
    scores = frame["score"].to_numpy(dtype=np.float64)
    return from_columns(list(query_ids), query_codes, np.asarray(doc_ids), doc_codes, scores, duplicates, where)


def as_qrels(qrels: Any, where: str = "qrels") -> dict[str, dict[str, int]]:
    """Qrels ``{qid: {doc_id: grade}}`` (integer grades) from a ranx ``Qrels`` or a dict."""
    if hasattr(qrels, "to_dict") and not isinstance(qrels, Mapping):
        qrels = qrels.to_dict()
    if not isinstance(qrels, Mapping) or not all(isinstance(docs, Mapping) for docs in qrels.values()):
        raise DataFormatError(f"{where}: expected {{qid: {{doc_id: grade}}}} or a ranx Qrels")
    out: dict[str, dict[str, int]] = {}
    for qid, docs in qrels.items():
        for doc_id, grade in docs.items():
            grade = integer_grade(grade)
            if grade is None:
                raise DataFormatError(
                    f"{where}: query {qid!r}, doc {doc_id!r}: grade {docs[doc_id]!r} is not an integer"
                )
            out.setdefault(str(qid), {})[str(doc_id)] = grade
    return out


def named_runs(runs: Any, duplicates: str | None = None) -> dict[str, ColumnarRun]:
    """``{name: run}`` (each through ``as_run``) from a mapping of names to runs, or a sequence of runs (a
    ranx Run's ``name``, else ``run_1``, ``run_2``, ...)."""
    if isinstance(runs, Mapping) and _named(runs):
        items = list(runs.items())
    elif isinstance(runs, Sequence) and not isinstance(runs, str):
        items = [(getattr(run, "name", None) or f"run_{i}", run) for i, run in enumerate(runs, start=1)]
    else:
        raise DataFormatError("runs: give {name: run} or a list of runs")
    names = [str(name) for name, _ in items]
    if len(set(names)) < len(names):
        raise ConfigError(f"runs: two runs are named {next(n for n in names if names.count(n) > 1)!r}; name each once")
    return {str(name): as_run(run, f"run {name!r}", duplicates) for name, run in items}


def _named(runs: Mapping[str, Any]) -> bool:
    """True when ``runs`` maps names to runs rather than being one run (query id -> ranking)."""
    return all(hasattr(run, "to_dict") or (isinstance(run, Mapping) and _is_run(run)) for run in runs.values())


def _measure_names(measures: Any, where: str) -> list[str]:
    """``measures`` (a name or a list of names) as a non-empty list, else a one-line ``ConfigError``."""
    names = [measures] if isinstance(measures, str) else measures
    if not isinstance(names, Sequence) or not names or not all(isinstance(name, str) for name in names):
        raise ConfigError(
            f"{where}: measures must be a measure name or a non-empty list of names (e.g. ['ndcg@10', 'R@100']), "
            f"got {measures!r}"
        )
    return list(names)


def _is_run(mapping: Mapping[str, Any]) -> bool:
    return all(isinstance(value, Mapping | list | tuple) for value in mapping.values())


def _to_ranx_run(run: Mapping[str, Any], name: str | None = None) -> Any:
    from ranx import Run as RanxRun

    return RanxRun({qid: dict(ranking) for qid, ranking in run.items()}, name=name)


def evaluate(
    qrels: Any,
    run: Any,
    measures: str | Sequence[str] = DEFAULT_MEASURES,
    per_query: bool = False,
    duplicates: str | None = None,
) -> Any:
    """Each measure over every judged query (the mean; a sum for the counts), or ``per_query``
    ``{measure: {qid: value}}``. A single measure name (a string) gives its value alone, as ranx does."""
    names = _measure_names(measures, "evaluate")
    judged, ranked = as_qrels(qrels), as_run(run, "run", duplicates)
    check_query_overlap(ranked, judged)
    values = _per_query(ranked, judged, names)
    result = values if per_query else aggregate_values(values)
    return result[names[0]] if isinstance(measures, str) else result


@dataclass
class Comparison:
    """Runs compared with a baseline on one set of qrels: the grid's ``[compare]`` on in-memory runs.

    ``means``: a row per run, a column per measure. ``table``: a row per (system, measure) other than
    the baseline: delta with t and BCa intervals, d_z, p-values per test, agreement and power, the columns
    ``Results.compare`` returns for a grid (``dataset`` is ``"runs"``, ``cell_id`` the run's name).
    ``to_markdown`` / ``to_latex`` / ``to_html`` print the report's two tables (means with significance
    markers, best bold; then the tests).
    """

    means: pd.DataFrame
    table: pd.DataFrame
    _data: RunData = field(repr=False)

    def _tables(self) -> list[Table]:
        return [metric_table(self._data, DATASET, self.table), comparison_table(self._data, self.table, DATASET)]

    def to_markdown(self) -> str:
        """The means table and the tests table in markdown."""
        return "\n\n".join(table_markdown(table) for table in self._tables()) + "\n"

    def to_latex(self) -> str:
        """The two tables as booktabs LaTeX."""
        captions = ("Mean per measure; markers: significant against the baseline.", "Tests against the baseline.")
        return "\n\n".join(
            table_latex(table, caption, f"tab:compare-{i}")
            for i, (table, caption) in enumerate(zip(self._tables(), captions, strict=True), start=1)
        )

    def to_html(self) -> str:
        """The two tables as HTML ``<table>`` elements."""
        return "\n".join(table_html(table) for table in self._tables())


def compare(
    qrels: Any,
    runs: Any,
    baseline: str,
    measures: Sequence[str] = DEFAULT_MEASURES,
    tests: Sequence[str] | None = None,
    correction: str | None = None,
    alpha: float | None = None,
    n_permutations: int | None = None,
    seed: int | None = None,
    min_effect: float | None = None,
    power: float | None = None,
    duplicates: str | None = None,
) -> Comparison:
    """Every run against ``baseline`` (a name of ``runs``) on ``measures``, with the grid's tests
    (``t-test``, ``fisher``, ``wilcoxon``), correction (``holm``, ``bonferroni``, ``bh``) over this comparison's
    rows, effect intervals, the tests' agreement and power (the columns of ``Results.compare``)."""
    measures = _measure_names(measures, "compare")
    runs = named_runs(runs, duplicates)
    if baseline not in runs:
        raise ConfigError(unknown_value_message("baseline", baseline, runs, "compare"))
    given = {
        "tests": tests,
        "correction": correction,
        "alpha": alpha,
        "n_permutations": n_permutations,
        "seed": seed,
        "min_effect": min_effect,
        "power": power,
    }
    settings = {key: list(value) if key == "tests" else value for key, value in given.items() if value is not None}
    spec = parse_compare({"compare": {**settings, "baseline": baseline, "measures": list(measures)}}, "compare")
    judged = as_qrels(qrels)
    rows, long = [], []
    for name, run in runs.items():
        check_query_overlap(run, judged, f"run {name!r}")
        values = _per_query(run, judged, list(measures))
        rows.append({"dataset": DATASET, "system": name, "cell_id": name, **aggregate_values(values)})
        long += [(name, m, qid, value) for m, by_qid in values.items() for qid, value in by_qid.items()]
    results = pd.DataFrame(rows)
    per_query = pd.DataFrame(long, columns=["cell_id", "measure", "query_id", "value"])
    table = compare_to_baseline(results, per_query, spec)
    config = {"experiment": {"measures": list(measures)}, "compare": settings}
    data = RunData(Path("."), "compare", config, None, results, per_query, AnalysisSettings(spec), list(measures))
    means = results.drop(columns=["dataset", "cell_id"]).set_index("system")
    return Comparison(means, table, data)


def fuse(runs: Any, method: str = "rrf", as_ranx: bool = False, duplicates: str | None = None, **params: Any) -> Any:
    """The runs fused by ``method`` (``zerda_eval.fusion.FUSION_METHODS``: rrf, combsum, combmnz, wsum, zerda,
    pipeline_rrf) with its parameters, in the tie-break order; ``weights`` follow the runs' order. A rank
    (RRF's) is a doc's place in its run's score order, never its place in the dict."""
    named = named_runs(runs, duplicates)
    fused = fuse_columns(method, list(named.values()), **params)
    return _to_ranx_run(fused, method) if as_ranx else fused


def _per_query(run: ColumnarRun, judged: Mapping[str, Mapping[str, int]], measures: list[str]) -> dict:
    """``evaluate_run``'s ``{measure: {qid: value}}`` over the judged queries, computed on the arrays."""
    qids = [qid for qid, docs in judged.items() if docs]
    table = evaluate_columns(run, judged, measures)
    return {measure: dict(zip(qids, table[measure].tolist(), strict=True)) for measure in measures}


@dataclass(frozen=True)
class FusionChoice:
    """What ``optimize_fusion`` chose.

    ``best_params``: the grid point best on ALL queries (ranx's answer; scored on the queries it was
    chosen on, so optimistic). ``run``: the held-out run, each fold's queries fused with the point best
    on the other folds (the grid's ``[tuned]`` row); ``folds``: per fold, its point and the mean it was
    chosen on. ``grid``: every point tried, in order.
    """

    best_params: dict[str, Any]
    run: Any
    folds: list[dict[str, Any]]
    grid: list[dict[str, Any]]


def optimize_fusion(
    qrels: Any,
    runs: Any,
    method: str = "wsum",
    measure: str = DEFAULT_MEASURES[0],
    folds: int = DEFAULT_FOLDS,
    grid: Mapping[str, Sequence[Any]] | None = None,
    seed: int = DEFAULT_SEED,
    as_ranx: bool = False,
    duplicates: str | None = None,
    **params: Any,
) -> FusionChoice:
    """Grid search of a fusion's parameters on ``measure``, held out by ``folds``-fold cross-validation.

    ``grid``: ``{parameter: [values]}`` (their cartesian product, in order); by default the weights in
    steps of 0.1 summing to 1 for a method that takes weights. ``params`` are fixed for every point.
    The folds are dealt over the judged queries in ``qrels`` order from ``seed``, as the grid deals a
    dataset's queries from ``[experiment].seed``; ties go to the first grid point.
    """
    named = named_runs(runs, duplicates)
    judged = as_qrels(qrels)
    for name, run in named.items():
        check_query_overlap(run, judged, f"run {name!r}")
    points = _grid_points(method, grid, len(named))
    parse_measure(measure, "optimize_fusion")
    inputs = on_one_table(list(named.values()))  # one doc table: the fused runs share it
    values = [
        _per_query(fuse_columns(method, inputs, **params, **point), judged, [measure])[measure] for point in points
    ]
    qids = [qid for qid, docs in judged.items() if docs]
    if isinstance(folds, bool) or not isinstance(folds, int) or not 2 <= folds <= len(qids):
        raise ConfigError(
            f"optimize_fusion: folds must be an integer from 2 to the {len(qids)} judged queries (each fold is "
            f"chosen on the others), got {folds!r}"
        )
    best = points[best_variant(values, qids)]
    fold_of = assign_folds(qids, folds, seed)
    fused: dict[int, ColumnarRun] = {}
    held_out: list[tuple[ColumnarRun, str]] = []
    chosen = []
    for fold in range(folds):
        others = [q for q in qids if fold_of[q] != fold]
        index = best_variant(values, others)
        if index not in fused:
            fused[index] = fuse_columns(method, inputs, **params, **points[index])
        held_out += [(fused[index], q) for q in qids if fold_of[q] == fold]
        mean = sum(values[index].get(q, 0.0) for q in others) / len(others)
        chosen.append({"fold": fold, "params": points[index], "chosen_on_mean": mean, "chosen_on_queries": len(others)})
    tuned = gather(held_out, inputs[0].doc_ids)
    run = _to_ranx_run(tuned, f"{method}[tuned]") if as_ranx else tuned
    return FusionChoice(best_params={**params, **best}, run=run, folds=chosen, grid=points)


def _grid_points(method: str, grid: Mapping[str, Sequence[Any]] | None, n_runs: int) -> list[dict[str, Any]]:
    if method not in FUSION_METHODS:
        raise ConfigError(unknown_value_message("fusion method", method, FUSION_METHODS, "optimize_fusion"))
    if grid is None:
        if "weights" not in FUSION_METHODS[method]:
            raise ConfigError(
                f"optimize_fusion: fusion {method!r} takes no weights; give grid={{parameter: [values]}} "
                f"over its parameters ({', '.join(FUSION_METHODS[method])})"
            )
        grid = {"weights": simplex_weights(n_runs, WEIGHT_STEP)}
    if not grid or not all(isinstance(v, Sequence) and not isinstance(v, str) and v for v in grid.values()):
        raise ConfigError("optimize_fusion: grid must map each parameter to a non-empty list of values")
    keys = list(grid)
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(grid[k] for k in keys))]


def read_run(path: str | Path, kind: str | None = None, as_ranx: bool = False, duplicates: str | None = None) -> Any:
    """A run file (TREC, ranx JSON or Parquet: ``store.run_files``) as a ``ColumnarRun`` (reads as
    ``{qid: [(doc_id, score), ...]}``) in ``TIE_BREAK`` order, whatever the order of its lines."""
    run = run_files.read_run_columns(path, kind, duplicates)
    return _to_ranx_run(run, Path(path).stem) if as_ranx else run


def write_run(run: Any, path: str | Path, kind: str | None = None, duplicates: str | None = None) -> Path:
    """Write a run (any accepted shape) in the tie-break order; the kind follows the extension."""
    return run_files.write_run(as_run(run, "run", duplicates), path, kind)


def read_qrels(path: str | Path, kind: str | None = None, as_ranx: bool = False) -> Any:
    """A qrels file (TREC ``qid iter docid grade``, ranx JSON or Parquet) as ``{qid: {doc_id: grade}}``."""
    qrels = run_files.read_qrels(path, kind)
    if as_ranx:
        from ranx import Qrels as RanxQrels

        return RanxQrels(qrels)
    return qrels


def write_qrels(qrels: Any, path: str | Path, kind: str | None = None) -> Path:
    """Write qrels (a dict or a ranx Qrels); the kind follows the extension."""
    return run_files.write_qrels(as_qrels(qrels), path, kind)
