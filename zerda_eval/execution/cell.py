"""One grid cell: load the dataset, index and search (or fuse the input cells' runs), evaluate, write.

``run_cell(cell, output_dir, cache_dir)`` is a pure function of the resolved cell config. A cell whose
``result.json`` verifies (``store.run_dir.verified_result``) is reused unless ``force``; one that fails
verification is recomputed with one warning naming it. That one mechanism gives resume after a crash
or Ctrl-C, repairs a damaged run directory, and lets a scheduler (Dask) or concurrent runs compute
cells anywhere that shares the output directory (one process per cell at a time: ``cell_lock``).

Latency: each query is searched alone and timed with ``time.perf_counter`` after one untimed warm-up
query (first-call costs: caches, lazy imports, numba kernels), with one thread per pool
(``evaluation.efficiency.query_thread_limits``, recorded in ``stats["threads"]``). A fusion cell's
latency and index time include its inputs' (``evaluation.efficiency.Efficiency``), read from their ``result.json``
(``stats["latency_ms"]``). A system that times nothing of its own (a run file) has no latency:
its efficiency figures, and those of every fusion over it, are "not measured" (NaN). A tuned cell
(``execution.tuning``) assembles its run from the grid cells it chose.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from zerda_eval.columnar import ColumnarRun, RunBuilder, from_run
from zerda_eval.config.experiment import CellSpec
from zerda_eval.config.reranks import RERANK
from zerda_eval.config.tuning import TUNED
from zerda_eval.errors import DatasetError, RunError, ZerdaEvalWarning
from zerda_eval.evaluation.efficiency import (
    BUILD_COLUMN,
    LATENCY_KEY,
    PARTS_KEY,
    PEAK_COLUMN,
    Efficiency,
    RssWindow,
    as_json,
    figure,
    largest,
    not_measured,
    query_thread_limits,
    row_costs,
)
from zerda_eval.evaluation.measures import evaluate_collection
from zerda_eval.evaluation.tie_aware import TIE_AWARE_KEY, tie_aware_collection
from zerda_eval.execution.machine import cpu
from zerda_eval.execution.rerank import MODEL_LOAD_KEY, reranked_run
from zerda_eval.execution.tuned_fusion import Judged, tuned_fusion_run
from zerda_eval.execution.tuning import train_overlap, tuned_run
from zerda_eval.hashing import canonical_json
from zerda_eval.ranking import Ranking, Run
from zerda_eval.store.build_costs import (
    COUNTED_ONCE_KEY,
    SHARED_KEY,
    counting_builds,
    rebuilding_caches,
)
from zerda_eval.store.run_dir import (
    cell_dir,
    cell_lock,
    load_result,
    per_query_csv,
    read_cell_columns,
    verified_result,
    write_cell,
)


@dataclass(frozen=True)
class CellResult:
    """What ``run_cell`` returns: the cell's ``result.json`` content and whether it was reused."""

    cell_id: str
    result: dict[str, Any]
    reused: bool


def run_cell(
    cell: CellSpec,
    output_dir: Path,
    cache_dir: Path | None = None,
    force: bool = False,
    progress: bool = False,
    systems: Mapping[str, Any] | None = None,
) -> CellResult:
    """Reuse the cell if it verifies, else compute it and write its files atomically (``result.json`` last).

    ``force`` recomputes the cell and rebuilds the store entries it uses (once per process).
    ``systems``: objects given to the Python API by name (``family = "python"`` entries without ``object``).
    """
    output_dir = Path(output_dir)
    with cell_lock(output_dir, cell.cell_id):  # concurrent runs: one computes, the others then reuse
        if not force:
            finished, problem = verified_result(output_dir, cell.cell_id)
            if finished is not None:
                return CellResult(cell.cell_id, finished, reused=True)
            if problem:
                warnings.warn(
                    f"cell {cell.label!r} of {cell.dataset!r} ({cell.cell_id}): {problem}; recomputing it",
                    ZerdaEvalWarning,
                    stacklevel=2,
                )
        result, run, per_query = _compute(cell, output_dir, cache_dir, force, progress, systems or {})
        sealed = write_cell(cell_dir(output_dir, cell.cell_id), result, run, per_query)
        return CellResult(cell.cell_id, sealed, reused=False)


def _compute(
    cell: CellSpec,
    output_dir: Path,
    cache_dir: Path | None,
    force: bool,
    progress: bool,
    systems: Mapping[str, Any],
) -> tuple[dict[str, Any], ColumnarRun, str]:
    collection, qids = load_cell_collection(cell.config["dataset"])
    queries = {qid: collection.queries[qid] for qid in qids}
    with rebuilding_caches(force), counting_builds() as costs:
        if cell.kind == "fusion":
            run, efficiency, stats = _fuse(cell, output_dir, queries)
        elif cell.kind == TUNED and "input_stages" in cell.config:  # a fusion over tuned inputs, or learned
            train = cell.config.get("train_dataset")
            judged = _judged(*load_cell_collection(train), cell.config) if train else None
            run, efficiency, stats = tuned_fusion_run(cell, output_dir, _judged(collection, qids, cell.config), judged)
        elif cell.kind == TUNED:
            train = cell.config.get("train_dataset")
            train_queries = _evaluated_queries(train) if train else {}
            run, efficiency, stats = tuned_run(cell, output_dir, queries, train_queries)
        elif cell.kind == RERANK:
            run, efficiency, stats = reranked_run(cell, output_dir, collection, queries)
        else:
            run, efficiency, stats = _search(cell, collection, queries, cache_dir, progress, systems)
    run = _finish_run(run, collection, cell.config["depth"], f"cell {cell.label!r}")
    per_query, means = evaluate_collection(run, collection, qids, cell.config["measures"])
    measured = asdict(efficiency)
    if cell.kind != "system":  # what the cells it fuses (or, tuned, the cells it chose) cost from scratch:
        used = stats["tuning"]["cells"] if cell.kind == TUNED else cell.inputs  # each system cell under them once,
        results = [load_result(output_dir, cell_id) or {"cell_id": cell_id} for cell_id in used]  # a shared entry once
        load_s = stats.get(MODEL_LOAD_KEY)  # a rerank also loads its model
        own = {cell.cell_id: {"index_time_s": load_s, BUILD_COLUMN: load_s}} if load_s is not None else {}
        row = row_costs(results, own)
        build = row.build_s
        stats = {**stats, PARTS_KEY: row.parts} | ({COUNTED_ONCE_KEY: row.counted_once} if row.counted_once else {})
    else:  # this run's wall time, with each store entry's recorded build time in place of its read time
        build = measured["index_time_s"] - costs.spent_s + costs.build_s
        stats = {**stats, SHARED_KEY: costs.shared} if costs.shared else stats
    result = {
        "cell_id": cell.cell_id,
        "dataset": cell.dataset,
        "system": cell.label,
        "name": cell.name,
        "kind": cell.kind,
        "config": cell.config,
        "means": means,
        TIE_AWARE_KEY: tie_aware_collection(run, collection, qids, cell.config["measures"]),
        "efficiency": as_json({"index_time_s": measured.pop("index_time_s"), BUILD_COLUMN: build, **measured}),
        "stats": stats,
        "queries": len(qids),
    }
    return result, run, per_query_csv(per_query)


def check_collections(cells: list[CellSpec]) -> None:
    """Load each dataset of the grid once before any cell runs; one with nothing to evaluate is an error,
    and so is a tuning train split whose documents are not the tuned dataset's.

    Loading up front also seeds the ``ir_datasets`` cache, so parallel workers never race to build it.
    """
    checked = set()
    for cell in cells:
        key = canonical_json(cell.config["dataset"])
        if key in checked:
            continue
        checked.add(key)
        collection, qids = load_cell_collection(cell.config["dataset"])
        if not collection.doc_ids:
            raise DatasetError(f"dataset {cell.dataset!r} has no documents; check its corpus file")
        if not qids:
            raise DatasetError(
                f"dataset {cell.dataset!r} has no judged queries; check that its qrels name its query ids"
            )
    for cell in cells:
        train = cell.config.get("train_dataset")
        if train is not None:
            check_held_out(cell, train)


def check_held_out(cell: CellSpec, train: Mapping[str, Any]) -> None:
    """A tuned cell's train split: the tuned dataset's documents (ids and texts), and none of its queries unless
    dropped."""
    if not same_documents(load_cell_collection(train)[0], load_cell_collection(cell.config["dataset"])[0]):
        raise DatasetError(
            f"[tuning].train: {train['id']!r} and {cell.dataset!r} do not hold the same documents, so a choice "
            "made on one says nothing of the other; give a train split of the same corpus"
        )
    overlap = train_overlap(_evaluated_queries(cell.config["dataset"]), _evaluated_queries(train))
    if overlap and cell.config["tuned"]["tuning"].get("overlap") != "drop":
        examples = ", ".join(repr(qid) for qid in overlap[:5])
        raise DatasetError(
            f"[tuning].train: {len(overlap)} quer{'y' if len(overlap) == 1 else 'ies'} of train split {train['id']!r} "
            f"{'is a test query' if len(overlap) == 1 else 'are test queries'} of {cell.dataset!r} (same id or same "
            f"text), e.g. {examples}: a choice made on them is not held out; remove them from the train split, or "
            'set [tuning].overlap = "drop" to leave them out of the choice'
        )


def same_documents(one: Any, other: Any) -> bool:
    """Whether two collections hold the same corpus: the same ids with the same texts, in the same order (texts
    compared one at a time, so a streamed corpus is never held whole)."""
    if one.doc_ids != other.doc_ids or len(one.texts) != len(other.texts):
        return False
    return all(a == b for a, b in zip(one.texts, other.texts, strict=True))


def _judged(collection: Any, qids: list[str], config: Mapping[str, Any]) -> Judged:
    """A split as a tuned fusion chooses on it: its queries, its runs judged as this cell judges its own run."""
    measure, depth = config["tuned"]["tuning"]["measure"], config["depth"]

    def evaluate(run: Run) -> Mapping[str, float]:
        return evaluate_collection(_finish_run(run, collection, depth), collection, list(run), [measure])[0][measure]

    relevant = {qid: {doc for doc, grade in collection.qrels.get(qid, {}).items() if grade > 0} for qid in qids}
    return Judged({qid: collection.queries[qid] for qid in qids}, evaluate, relevant)


def _evaluated_queries(dataset: Mapping[str, Any]) -> dict[str, str]:
    """``{qid: text}`` of the queries a dataset config evaluates (``max_queries`` applied)."""
    collection, qids = load_cell_collection(dataset)
    return {qid: collection.queries[qid] for qid in qids}


def load_cell_collection(dataset: Mapping[str, Any]) -> tuple[Any, list[str]]:
    """The collection of a cell's resolved dataset config and the query ids it evaluates (``max_queries``),
    read only while its files hold the content the cell id covers (``datasets.loader.load_recorded``)."""
    from zerda_eval.datasets import load_recorded

    collection = load_recorded(dataset["id"], dataset["content"], dataset["given"])
    qids = list(collection.queries)
    if dataset["max_queries"] is not None:
        qids = qids[: dataset["max_queries"]]
    return collection, qids


def _search(
    cell: CellSpec,
    collection: Any,
    queries: dict[str, str],
    cache_dir: Path | None,
    progress: bool,
    systems: Mapping[str, Any],
) -> tuple[Mapping[str, Ranking], Efficiency, dict]:
    """Index and search, timed; the per-query latencies (ms) go into the stats for fusions to add up."""
    from zerda_eval.systems import build_system

    spec = cell.config["system"]
    system = build_system(spec["family"], spec["params"], systems, spec.get("content"), cell.label)
    depth = cell.config["depth"]
    memory = RssWindow()
    start = time.perf_counter()
    system.index(collection, cache_dir)
    index_time = time.perf_counter() - start
    if not system.timed:  # a run file: its rankings were computed elsewhere, their cost is unknown
        run = system.search(queries, depth)
        return run, not_measured(), {**system.stats, LATENCY_KEY: None}
    run, latencies = RunBuilder(f"cell {cell.label!r}"), {}
    with query_thread_limits() as threads:
        if queries:
            first = next(iter(queries))
            system.search({first: queries[first]}, depth)  # warm-up, not timed
        for qid, text in tqdm(queries.items(), desc=cell.label, unit="q", leave=False, disable=not progress):
            start = time.perf_counter()
            found = system.search({qid: text}, depth)
            latencies[qid] = time.perf_counter() - start
            run.add(qid, found.get(qid, []))  # as arrays: no (doc, score) tuple outlives its query
    system.after_search()  # untimed: e.g. an approximate index's recall against exact search
    run = run.build()
    efficiency = Efficiency.from_timings(index_time, list(latencies.values()), memory.increment_mb())
    stats = {
        **system.stats,
        "cpu": cpu(),  # a neural encoder's last digits depend on it (execution.machine)
        "peak_rss_scope": memory.scope,
        "threads": threads,
        LATENCY_KEY: {qid: seconds * 1000.0 for qid, seconds in latencies.items()},
    }
    if collection.options.get("ignore_identical_ids") and collection.self_judged_pairs:
        stats["self_judged_pairs_filtered"] = collection.self_judged_pairs
    return run, efficiency, stats


def _fuse(cell: CellSpec, output_dir: Path, queries: dict[str, str]) -> tuple[Mapping, Efficiency, dict]:
    """Fuse the inputs' runs one query at a time, each timed; costs include the inputs' (summed, and the slowest
    one as "parallel"). The inputs are read as ``ColumnarRun``s (never as dict runs: a 5M-row run would be
    1.6 GB of tuples), put on one doc table once, untimed, and fused by ``fusion.columns.QueryFusion``, which
    gives ``fuse_runs``' rankings to the bit; a method the kernel does not fuse (``pipeline_rrf``) goes through
    ``fuse_runs`` on each query's rankings, built before its timer starts. The first query is fused once untimed
    first (numba's first call)."""
    from zerda_eval.fusion import fuse_runs
    from zerda_eval.fusion.columns import KERNEL_METHODS, QueryFusion

    memory = RssWindow()
    runs, inputs = [], []
    for input_id in cell.inputs:
        result = load_result(output_dir, input_id)
        if result is None:
            raise RunError(f"fusion {cell.label!r}: input cell {input_id} has no finished run; rerun without --only")
        if LATENCY_KEY not in result.get("stats", {}):
            raise RunError(
                f"fusion {cell.label!r}: input cell {input_id} has no per-query latencies (written by an older "
                "version); rerun with --force"
            )
        runs.append(read_cell_columns(output_dir, input_id))
        inputs.append(result)
    spec = cell.config["fusion"]
    method = spec["method"]
    params = {k: v for k, v in spec["params"].items() if k != "method"}
    fusion = QueryFusion(method, runs, **params) if method in KERNEL_METHODS else None

    def rankings(qid: str) -> list | None:  # the dict path's input, built before its timer starts
        return None if fusion else [{qid: run.get(qid, [])} for run in runs]

    def fuse(qid: str, given: list | None) -> Any:
        return fusion.fuse(qid) if fusion else fuse_runs(method, given, **params).get(qid, [])

    fused: dict[str, Any] = {}
    serial, parallel = [], []
    if queries:  # warm-up, not timed, as a system cell's: the kernel's first call loads or compiles it
        first = next(iter(queries))
        fuse(first, rankings(first))
    for qid in queries:
        given = rankings(qid)
        start = time.perf_counter()
        fused[qid] = fuse(qid, given)
        fusing = time.perf_counter() - start
        own = [_latency_s(result, qid) for result in inputs]
        serial.append(sum(own) + fusing)
        parallel.append(max(own) + fusing)
    run = fusion.run(fused) if fusion else fused
    index_times = [figure(result["efficiency"]["index_time_s"]) for result in inputs]
    peak = largest([memory.increment_mb()] + [figure(result["efficiency"][PEAK_COLUMN]) for result in inputs])
    if any(math.isnan(t) for t in index_times):  # an input whose costs are not measured (a run file)
        return run, not_measured(), {"peak_rss_scope": "not measured", LATENCY_KEY: None}
    index_time = row_costs(inputs).index_time_s  # a system cell or store entry the inputs share, once
    efficiency = Efficiency.from_timings(index_time, serial, peak, max(index_times), parallel)
    stats = {
        "peak_rss_scope": "the largest increment of its input cells and the fusing step",
        LATENCY_KEY: {qid: seconds * 1000.0 for qid, seconds in zip(queries, serial, strict=True)},
    }
    return run, efficiency, stats


def _latency_s(result: Mapping[str, Any], qid: str) -> float:
    latencies = result["stats"][LATENCY_KEY]
    return math.nan if latencies is None else latencies.get(qid, 0.0) / 1000.0


def _finish_run(run: Mapping[str, Any], collection: Any, depth: int, where: str = "run") -> ColumnarRun:
    """The run as arrays in the tie-break order (``columnar.from_run``: a doc listed twice is an error naming
    ``where`` and the query; a family that allows it applied its ``duplicates`` policy already), then the
    protocol rules (self-hits dropped), then the cut at the run depth of the dataset."""
    from zerda_eval.datasets.protocols import drop_self_hits

    cut = min(depth, collection.options.get("run_depth", depth))
    return drop_self_hits(from_run(run, None, where), collection).top(cut)
