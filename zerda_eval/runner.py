"""Grid cells -> runs on disk (reused by content hash, written atomically) -> one results table.

``run_cell(cell, output_dir, cache_dir)`` is a pure function of the resolved cell config: it loads
the dataset, builds and indexes the system (or reads the runs a fusion fuses), searches every query,
evaluates, and writes ``cells/<cell_id>/{run.trec, per_query.csv, result.json}`` (result LAST, with
the SHA-256 of the other two and its own checksum). A cell whose ``result.json`` verifies is reused
unless ``force``; one that fails verification is recomputed with one warning naming it. That one
mechanism gives resume after a crash or Ctrl-C, repairs a damaged run directory, and lets a scheduler
(Dask) or concurrent runs compute cells anywhere that shares the output directory (one process per
cell at a time: ``cache.cell_lock``). The results tables are rebuilt from every finished cell of the
experiment on every run, so a partial run (``--only``) never shrinks them.

Latency: each query is searched alone and timed with ``time.perf_counter`` after one untimed
warm-up query (first-call costs: caches, lazy imports, numba kernels). A fusion cell's latency and
index time include its inputs' (``measures.Efficiency``); its inputs' per-query latencies are read
from their ``result.json`` (``stats["latency_ms"]``).
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm import tqdm

from zerda_eval.cache import (
    RESULT_FILE,
    atomic_write_bytes,
    atomic_write_text,
    cell_dir,
    cell_lock,
    check_writable,
    counting_builds,
    forget_rebuilt,
    load_result,
    rebuilding_caches,
    remove_temp_files,
    seal,
    verified_result,
)
from zerda_eval.config import CellSpec, Experiment, canonical_json
from zerda_eval.distributed import Executor, run_serially
from zerda_eval.errors import DataFormatError, DatasetError, RunError, ZerdaEvalWarning
from zerda_eval.measures import Efficiency, RssWindow, evaluate_collection, tie_break, warm_up_ranx

RUN_TAG = "zerda-eval"
BUILD_COLUMN = "index_build_s"  # from-scratch cost of the index; index_time_s is this run's wall time
EFFICIENCY_COLUMNS = (
    "index_time_s",
    BUILD_COLUMN,
    *(f for f in Efficiency.__dataclass_fields__ if f != "index_time_s"),
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
) -> CellResult:
    """Reuse the cell if it verifies, else compute it and write its files atomically (``result.json`` last).

    ``force`` recomputes the cell and rebuilds the cache entries it uses (once per process).
    """
    output_dir = Path(output_dir)
    with cell_lock(output_dir, cell.cell_id):  # concurrent runs: one computes, the others then reuse
        if not force:
            cached, problem = verified_result(output_dir, cell.cell_id)
            if cached is not None:
                return CellResult(cell.cell_id, cached, reused=True)
            if problem:
                warnings.warn(
                    f"cell {cell.label!r} of {cell.dataset!r} ({cell.cell_id}): {problem}; recomputing it",
                    ZerdaEvalWarning,
                    stacklevel=2,
                )
        result = _compute(cell, output_dir, cache_dir, force, progress)
        run_text, per_query_text = format_trec(result.pop("run")), result.pop("table")
        result = _write_cell(cell_dir(output_dir, cell.cell_id), result, run_text, per_query_text)
        return CellResult(cell.cell_id, result, reused=False)


def _compute(cell: CellSpec, output_dir: Path, cache_dir: Path | None, force: bool, progress: bool) -> dict[str, Any]:
    collection, qids = _collection(cell.config["dataset"])
    queries = {qid: collection.queries[qid] for qid in qids}
    with rebuilding_caches(force), counting_builds() as costs:
        if cell.kind == "fusion":
            run, efficiency, stats = _fuse(cell, output_dir, queries)
        else:
            run, efficiency, stats = _search(cell, collection, queries, cache_dir, progress)
    run = _finish_run(run, collection, cell.config["depth"])
    per_query, means = evaluate_collection(run, collection, qids, cell.config["measures"])
    measured = asdict(efficiency)
    if cell.kind == "fusion":  # what its inputs cost from scratch
        inputs = [load_result(output_dir, input_id) or {} for input_id in cell.inputs]
        build = sum(r.get("efficiency", {}).get(BUILD_COLUMN, 0.0) for r in inputs)
    else:  # this run's wall time, with each cache entry's recorded build time in place of its read time
        build = measured["index_time_s"] - costs.spent_s + costs.build_s
    return {
        "cell_id": cell.cell_id,
        "dataset": cell.dataset,
        "system": cell.label,
        "name": cell.name,
        "kind": cell.kind,
        "config": cell.config,
        "means": means,
        "efficiency": {"index_time_s": measured.pop("index_time_s"), BUILD_COLUMN: build, **measured},
        "stats": stats,
        "queries": len(qids),
        "run": run,
        "table": _per_query_csv(per_query),
    }


def _write_cell(directory: Path, result: dict[str, Any], run_text: str, per_query_text: str) -> dict[str, Any]:
    """Write the run files, then ``result.json`` sealed with their checksums; a cell never finished is removed.

    Called under the cell's lock. A failed write leaves a previously finished version of the cell alone
    (its checksums then no longer match, so the next run recomputes it): a finished cell is never deleted.
    """
    contents = {"run.trec": run_text.encode("utf-8"), "per_query.csv": per_query_text.encode("utf-8")}
    finished_before = (directory / RESULT_FILE).exists()
    try:
        for name, data in contents.items():
            atomic_write_bytes(directory / name, data)
        sealed = seal(result, contents)
        atomic_write_text(directory / RESULT_FILE, json.dumps(sealed, indent=2, sort_keys=True, ensure_ascii=False))
        return sealed
    except RunError:
        if not finished_before:
            for name in contents:
                (directory / name).unlink(missing_ok=True)
            with contextlib.suppress(OSError):  # other files in it: not ours to remove
                directory.rmdir()
        raise


def run_experiment(
    experiment: Experiment,
    force: bool = False,
    progress: bool = True,
    on_cell: Callable[[CellResult], None] | None = None,
    executor: Executor | None = None,
) -> pd.DataFrame:
    """Run every cell (fusions after their inputs), then write the experiment-level files.

    ``executor`` runs the cells (``zerda_eval.distributed``): serially in this process by default, or
    as Dask tasks; tasks get absolute paths, so workers with another working directory find them.
    """
    output_dir = experiment.output_dir
    check_writable(output_dir)
    check_writable(experiment.cache_dir, key="cache_dir")
    remove_temp_files(output_dir)
    forget_rebuilt()
    every_cell = experiment.every_cell
    atomic_write_text(
        output_dir / "experiment.json",
        json.dumps(
            {
                "config_hash": experiment.config_hash,
                "config": experiment.resolved,
                "cells": [cell.cell_id for cell in every_cell],
            },
            indent=2,
            sort_keys=True,
            ensure_ascii=False,
        ),
    )
    check_collections(experiment.cells)
    warm_up_ranx()
    executor = executor or run_serially
    task = partial(
        run_cell,
        output_dir=output_dir.resolve(),
        cache_dir=experiment.cache_dir.resolve(),
        force=force,
        progress=progress and executor is run_serially,
    )
    finished = {}
    bar = tqdm(total=len(experiment.cells), desc=f"grid {experiment.name}", unit="cell", disable=not progress)
    for outcome in executor(experiment.cells, task):
        bar.update()
        bar.set_postfix_str(f"{outcome.result['dataset']} | {outcome.result['system']}")
        finished[outcome.cell_id] = outcome.result
        if on_cell is not None:
            on_cell(outcome)
    bar.close()
    remove_temp_files(output_dir)  # what a worker killed mid-cell left behind
    results = finished_results(output_dir, every_cell, finished)
    table = results_table(results)
    write_tables(output_dir, table, results)
    return table


def finished_results(
    output_dir: Path, cells: list[CellSpec], known: Mapping[str, Mapping[str, Any]] | None = None
) -> list[Mapping[str, Any]]:
    """The result of every finished (verified) cell of ``cells``, in grid order; ``known`` ones are not re-read."""
    known = known or {}
    results = []
    for cell in cells:
        result = known.get(cell.cell_id) or load_result(output_dir, cell.cell_id)
        if result is not None:
            results.append(result)
    return results


def results_table(results: list[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per cell: dataset, system, family, params (JSON), cell_id, means, efficiency."""
    rows = []
    for result in results:
        config = result["config"]
        part = config.get("system") or config.get("fusion")
        family = part.get("family") or f"fusion.{part['method']}"
        means = result["means"]  # a reused result.json has sorted keys: order columns as the config does
        ordered = [m for m in config["measures"] if m in means] + sorted(set(means) - set(config["measures"]))
        rows.append(
            {
                "dataset": result["dataset"],
                "system": result["system"],
                "family": family,
                "params": canonical_json(part["params"]),
                "cell_id": result["cell_id"],
                **{m: means[m] for m in ordered},
                **{k: result["efficiency"].get(k, float("nan")) for k in EFFICIENCY_COLUMNS},
            }
        )
    return pd.DataFrame(rows)


def write_tables(output_dir: Path, table: pd.DataFrame, results: list[Mapping[str, Any]]) -> None:
    """``results.csv``, ``results.parquet`` and the long ``per_query.parquet``, each atomically."""
    atomic_write_text(output_dir / "results.csv", table.to_csv(index=False))
    atomic_write_bytes(output_dir / "results.parquet", _parquet(table))
    frames = []
    for result in results:
        per_query = read_per_query_csv(cell_dir(output_dir, result["cell_id"]) / "per_query.csv")
        per_query.insert(0, "system", result["system"])
        per_query.insert(0, "dataset", result["dataset"])
        per_query.insert(0, "cell_id", result["cell_id"])
        frames.append(per_query)
    long = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    atomic_write_bytes(output_dir / "per_query.parquet", _parquet(long))


def read_per_query_csv(path: Path) -> pd.DataFrame:
    """A cell's ``per_query.csv`` (columns query_id, measure, value); ids read verbatim ("NA" stays "NA")."""
    return pd.read_csv(path, dtype={"query_id": str, "measure": str}, keep_default_na=False, na_filter=False)


def check_run_dir(run_dir: Path) -> None:
    """A one-line ``DataFormatError`` naming the experiment-level file of ``run_dir`` that cannot be read.

    ``zerda-eval run`` rewrites every one of them from the finished cells, which is the fix it names.
    """
    fix = "rerun `zerda-eval run CONFIG` (finished cells are reused) to rewrite it"
    path = run_dir / "experiment.json"
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DataFormatError(f"{path}: unreadable ({type(exc).__name__}); {fix}") from None
    if not isinstance(document, dict) or not isinstance(document.get("config"), dict):
        raise DataFormatError(f"{path}: not the experiment.json of a run; {fix}")
    for name in ("results.parquet", "per_query.parquet"):
        if (run_dir / name).exists():
            try:
                pd.read_parquet(run_dir / name)
            except Exception as exc:  # pyarrow raises several types for a damaged file
                raise DataFormatError(f"{run_dir / name}: unreadable ({type(exc).__name__}); {fix}") from None


def format_trec(run: Mapping[str, list[tuple[str, float]]]) -> str:
    """TREC run lines ``qid Q0 docid rank score tag``, in tie-break order (score desc, doc id asc).

    The score column keeps the systems' real scores (fusion reads them back). trec_eval ignores the
    rank column and orders exact ties by doc id *descending*, so to re-evaluate a file with trec_eval,
    give it the rank order (e.g. score = -rank): the harness's numbers are those of the rank order.
    """
    lines = [
        f"{qid} Q0 {doc_id} {rank} {score!r} {RUN_TAG}"
        for qid, results in run.items()
        for rank, (doc_id, score) in enumerate(results, start=1)
    ]
    return "\n".join(lines) + ("\n" if lines else "")


def read_trec(path: Path) -> dict[str, list[tuple[str, float]]]:
    """A run file written by ``format_trec``; a malformed line is a ``DataFormatError`` naming it."""
    run: dict[str, list[tuple[str, float]]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        parts = line.split()
        if len(parts) != 6:
            raise DataFormatError(f"{path}:{number}: expected 'qid Q0 docid rank score tag', got {line!r}")
        run.setdefault(parts[0], []).append((parts[2], float(parts[4])))
    return run


# --- inside a cell --------------------------------------------------------------------------------


def check_collections(cells: list[CellSpec]) -> None:
    """Load each dataset of the grid once before any cell runs; one with nothing to evaluate is an error.

    Loading up front also seeds the ``ir_datasets`` cache, so parallel workers never race to build it.
    """
    checked = set()
    for cell in cells:
        key = canonical_json(cell.config["dataset"])
        if key in checked:
            continue
        checked.add(key)
        collection, qids = _collection(cell.config["dataset"])
        if not collection.doc_ids:
            raise DatasetError(f"dataset {cell.dataset!r} has no documents; check its corpus file")
        if not qids:
            raise DatasetError(
                f"dataset {cell.dataset!r} has no judged queries; check that its qrels name its query ids"
            )


def _collection(dataset: Mapping[str, Any]) -> tuple[Any, list[str]]:
    from zerda_eval.datasets import load_collection

    collection = load_collection(dataset["id"], **dataset["given"])
    qids = list(collection.queries)
    if dataset["max_queries"] is not None:
        qids = qids[: dataset["max_queries"]]
    return collection, qids


def _search(
    cell: CellSpec, collection: Any, queries: dict[str, str], cache_dir: Path | None, progress: bool
) -> tuple[dict, Efficiency, dict]:
    """Index and search, timed; the per-query latencies (ms) go into the stats for fusions to add up."""
    from zerda_eval.systems import build_system

    spec = cell.config["system"]
    system = build_system(spec["family"], spec["params"])
    depth = cell.config["depth"]
    memory = RssWindow()
    start = time.perf_counter()
    system.index(collection, cache_dir)
    index_time = time.perf_counter() - start
    if queries:
        first = next(iter(queries))
        system.search({first: queries[first]}, depth)  # warm-up, not timed
    run, latencies = {}, {}
    for qid, text in tqdm(queries.items(), desc=cell.label, unit="q", leave=False, disable=not progress):
        start = time.perf_counter()
        run.update(system.search({qid: text}, depth))
        latencies[qid] = time.perf_counter() - start
    efficiency = Efficiency.from_timings(index_time, list(latencies.values()), memory.peak_mb())
    stats = {
        **system.stats,
        "peak_rss_scope": memory.scope,
        "latency_ms": {qid: seconds * 1000.0 for qid, seconds in latencies.items()},
    }
    if collection.options.get("ignore_identical_ids") and collection.self_judged_pairs:
        stats["self_judged_pairs_filtered"] = collection.self_judged_pairs
    return run, efficiency, stats


def _fuse(cell: CellSpec, output_dir: Path, queries: dict[str, str]) -> tuple[dict, Efficiency, dict]:
    """Fuse the inputs' runs; costs include the inputs' (summed, and the slowest one as "parallel")."""
    from zerda_eval.fusion import fuse_runs

    memory = RssWindow()
    runs, inputs = [], []
    for input_id in cell.inputs:
        path = cell_dir(output_dir, input_id) / "run.trec"
        result = load_result(output_dir, input_id)
        if result is None:
            raise RunError(f"fusion {cell.label!r}: input cell {input_id} has no finished run; rerun without --only")
        if "latency_ms" not in result.get("stats", {}):
            raise RunError(
                f"fusion {cell.label!r}: input cell {input_id} has no per-query latencies (written by an older "
                "version); rerun with --force"
            )
        runs.append(read_trec(path))
        inputs.append(result)
    spec = cell.config["fusion"]
    params = {k: v for k, v in spec["params"].items() if k != "method"}
    run, serial, parallel = {}, [], []
    for qid in queries:
        start = time.perf_counter()
        fused = fuse_runs(spec["method"], [{qid: r.get(qid, [])} for r in runs], **params)
        fusing = time.perf_counter() - start
        run[qid] = fused.get(qid, [])
        own = [result["stats"]["latency_ms"].get(qid, 0.0) / 1000.0 for result in inputs]
        serial.append(sum(own) + fusing)
        parallel.append(max(own) + fusing)
    index_times = [result["efficiency"]["index_time_s"] for result in inputs]
    peak = max([memory.peak_mb()] + [result["efficiency"]["peak_rss_mb"] for result in inputs])
    efficiency = Efficiency.from_timings(sum(index_times), serial, peak, max(index_times), parallel)
    stats = {
        "peak_rss_scope": "largest input cell or the fusing step",
        "latency_ms": {qid: seconds * 1000.0 for qid, seconds in zip(queries, serial, strict=True)},
    }
    return run, efficiency, stats


def _finish_run(run: Mapping[str, list], collection: Any, depth: int) -> dict[str, list[tuple[str, float]]]:
    """Protocol rules, then the tie-break order, then the cut: self-hits dropped, run depth of the dataset."""
    from zerda_eval.datasets.protocols import drop_self_hits

    cut = min(depth, collection.options.get("run_depth", depth))
    kept = drop_self_hits(run, collection)
    return {qid: tie_break(results)[:cut] for qid, results in kept.items()}


def _per_query_csv(per_query: Mapping[str, Mapping[str, float]]) -> str:
    """``query_id,measure,value`` rows, quoted where an id needs it (a comma, a quote, a line break)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(("query_id", "measure", "value"))
    for measure, values in per_query.items():
        writer.writerows((qid, measure, repr(value)) for qid, value in values.items())
    return buffer.getvalue()


def _parquet(table: pd.DataFrame) -> bytes:
    buffer = io.BytesIO()
    table.to_parquet(buffer, index=False)
    return buffer.getvalue()
