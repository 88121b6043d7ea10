"""A tuned fusion over tuned inputs (or a learned fusion): inputs chosen first, then the fusion, per fold.

A ``[[fusions]]`` entry whose inputs name tuned systems (``inputs = ["bm25_grid[tuned]", "dense"]``) or
whose method is learned (``ltr``) has one row, ``<name>[tuned]``, assembled here. On each fold's training
queries (the other folds, or the train split's queries), each input's grid point is chosen by its own
mean ``[tuning].measure`` (``tuning.best_variant``; an untuned input has one), then the fusion's grid
point by the mean of its fused run over those same queries, fused from the chosen inputs' runs (a
learned fusion is fitted on those queries and scored on them). The fold's held-out queries are then
answered by that combination. Nothing retrieves again: the input cells' runs are read from their files as
``ColumnarRun``s and fused in memory with ``fusion.columns.fuse_columns`` (``fuse_runs``' numbers to the bit;
``fusion.ltr`` for a learned one), the grid's own code, so a grid point costs one compiled call at depth 1,000.

Efficiency: per query, the chosen inputs' latencies summed plus the fusing step's own time (timed per
held-out query as the fusion cell times it: ``QueryFusion.fuse`` for a kernel method); index time, the
system cells under the chosen cells, each once (a shared store entry once: ``efficiency.row_costs``); peak
RSS increment, the largest of them.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zerda_eval.columnar import ColumnarRun, assemble, from_run, gather, on_one_table
from zerda_eval.config.experiment import CellSpec
from zerda_eval.errors import RunError
from zerda_eval.evaluation.efficiency import PEAK_COLUMN, Efficiency, figure, largest, not_measured, row_costs
from zerda_eval.execution.tuning import assign_folds, best_variant, finished_result, train_overlap, tuning_stats
from zerda_eval.fusion.columns import KERNEL_METHODS, QueryFusion, fuse_columns
from zerda_eval.fusion.ltr import fit_ltr, ltr_fuse, training_set
from zerda_eval.fusion.methods import LEARNED_METHODS
from zerda_eval.ranking import Run
from zerda_eval.store.run_dir import read_cell_columns, read_cell_per_query

Combiner = Callable[[Sequence[ColumnarRun], Mapping[str, str]], ColumnarRun]  # (inputs, query texts) -> fused


@dataclass(frozen=True)
class Judged:
    """One split as the tuning sees it: its evaluated queries (id -> text), ``evaluate(run)`` (per-query
    values of the tuning measure, the cell's own protocol and measure code) and the relevant docs per query."""

    queries: Mapping[str, str]
    evaluate: Callable[[Run], Mapping[str, float]]
    relevant: Mapping[str, set[str]]


@dataclass
class _Stage:
    """One input of the fusion: its grid cells' labels, results and per-query values on the choosing split;
    a cell's run is read when a fold chooses it (``run``), once."""

    output_dir: Path
    cell_ids: list[str]
    labels: list[str]
    results: list[dict[str, Any]]
    values: list[Mapping[str, float]]
    read: dict[int, ColumnarRun] = field(default_factory=dict)

    def run(self, index: int) -> ColumnarRun:
        """The run of grid cell ``index``."""
        if index not in self.read:
            self.read[index] = read_cell_columns(self.output_dir, self.cell_ids[index])
        return self.read[index]


def tuned_fusion_run(
    cell: CellSpec, output_dir: Path, test: Judged, train: Judged | None
) -> tuple[ColumnarRun, Efficiency, dict[str, Any]]:
    """The tuned fusion cell's run over ``test.queries``, its efficiency and ``stats["tuning"]``."""
    config = cell.config
    tuning, fusion = config["tuned"]["tuning"], config["tuned"]["fusion"]
    measure = tuning["measure"]
    stages = [_stage(output_dir, cell, ids, measure) for ids in config["input_stages"]]
    qids = list(test.queries)
    if tuning["train"]:
        if train is None:
            raise RunError(f"tuned row {cell.label!r}: its train split was not loaded")
        train_stages = [_stage(output_dir, cell, ids, measure) for ids in config["train_input_stages"]]
        left_out = train_overlap(test.queries, train.queries)
        dropped = set(left_out)
        on = [qid for qid in train.queries if qid not in dropped]
        if not on:
            raise RunError(f"tuned row {cell.label!r}: every train query is a test query; give another train split")
        folds = [("train", on, qids, train_stages, train)]
        dealt = dict.fromkeys(qids, "train")
    else:
        left_out = []
        dealt = assign_folds(qids, tuning["folds"], config["seed"], test.queries)
        folds = [
            (f, [q for q in qids if dealt[q] != f], [q for q in qids if dealt[q] == f], stages, test)
            for f in range(tuning["folds"])
        ]
    answered: list[tuple[ColumnarRun, str]] = []  # each held-out query, with its fold's fused run
    fusing_s: dict[str, float] = {}
    picks: dict[str, list[int]] = {}
    choices = []
    for fold, on, held_out, choosing, judged in folds:
        inputs, variant, combiner, mean = choose(choosing, fusion, judged, on, config["seed"], cell.label)
        chosen = on_one_table([_only(stage.run(index), held_out) for stage, index in zip(stages, inputs, strict=True)])
        params = fusion["variants"][variant]["params"]
        fused = _fused_one_by_one(fusion["method"], params, combiner, chosen, held_out, test, fusing_s)
        answered += [(fused, qid) for qid in held_out]
        picks.update(dict.fromkeys(held_out, inputs))
        choices.append(
            {
                "fold": fold,
                "inputs": [stage.labels[index] for stage, index in zip(stages, inputs, strict=True)],
                "chosen": fusion["variants"][variant]["label"],
                "chosen_on_mean": mean,
                "chosen_on_queries": len(on),
                "answers": len(held_out),
            }
        )
    used = sorted({(s, index) for chosen in picks.values() for s, index in enumerate(chosen)})
    cells = [config["input_stages"][s][index] for s, index in used]
    stats = tuning_stats(measure, tuning, choices, cells, left_out, dealt)
    latencies = _latencies(stages, picks, fusing_s)
    run = assemble(answered)
    return run, _efficiency(stages, used, latencies, qids), stats | {"latency_ms": latencies}


def choose(
    stages: Sequence[_Stage], fusion: Mapping[str, Any], judged: Judged, on: Sequence[str], seed: int, where: str
) -> tuple[list[int], int, Combiner, float]:
    """On the queries ``on`` only: each input's grid point, then the fusion's, and its fitted combiner.

    Returns the chosen input indices, the chosen fusion variant, its combiner and its mean on ``on``.
    """
    inputs = [best_variant(stage.values, on) for stage in stages]
    runs = on_one_table([_only(stage.run(index), on) for stage, index in zip(stages, inputs, strict=True)])
    combiners = [
        fitted_combiner(fusion["method"], v["params"], runs, judged, on, seed, where) for v in fusion["variants"]
    ]
    values = [judged.evaluate(combiner(runs, judged.queries)) for combiner in combiners]
    chosen = best_variant(values, on)
    mean = sum(values[chosen].get(q, 0.0) for q in on) / len(on)
    return inputs, chosen, combiners[chosen], mean


def fitted_combiner(
    method: str,
    params: Mapping[str, Any],
    runs: Sequence[ColumnarRun],
    judged: Judged,
    on: Sequence[str],
    seed: int,
    where: str,
) -> Combiner:
    """The fusion of ``method`` with ``params`` as a function of the input runs; a learned one is fitted
    here on the queries ``on`` of ``judged`` (and only those)."""
    options = _options(params)
    if method not in LEARNED_METHODS:
        return lambda inputs, _queries: fuse_columns(method, inputs, **options)
    features, labels = training_set(runs, judged.queries, judged.relevant, on)
    estimator = fit_ltr(options["model"], features, labels, seed, f"tuned row {where!r}")
    return lambda inputs, queries: from_run(ltr_fuse(estimator, inputs, queries, options["top_k"]))


def _fused_one_by_one(
    method: str,
    params: Mapping[str, Any],
    combiner: Combiner,
    runs: Sequence[ColumnarRun],
    qids: Sequence[str],
    test: Judged,
    seconds: dict[str, float],
) -> ColumnarRun:
    """The queries ``qids`` of ``runs`` (on one doc table) fused one at a time, each timed into ``seconds`` as
    the grid's fusion cell times a query: ``QueryFusion.fuse`` for a kernel method (one untimed call first:
    numba's first call), else the combiner on that query's rankings alone, gathered before its timer starts."""
    if method in KERNEL_METHODS:
        fusion = QueryFusion(method, runs, **_options(params))
        if qids:
            fusion.fuse(qids[0])
        fused = {}
        for qid in qids:
            start = time.perf_counter()
            fused[qid] = fusion.fuse(qid)
            seconds[qid] = time.perf_counter() - start
        return fusion.run(fused)
    parts = []
    for qid in qids:
        alone = [gather([(run, qid)], run.doc_ids) for run in runs]
        start = time.perf_counter()
        parts.append(combiner(alone, test.queries))
        seconds[qid] = time.perf_counter() - start
    return assemble(list(zip(parts, qids, strict=True)))


def _options(params: Mapping[str, Any]) -> dict[str, Any]:
    """A fusion variant's parameters without its method."""
    return {key: value for key, value in params.items() if key != "method"}


def _stage(output_dir: Path, cell: CellSpec, cell_ids: Sequence[str], measure: str) -> _Stage:
    results = [finished_result(output_dir, cell, cell_id) for cell_id in cell_ids]
    return _Stage(
        output_dir=output_dir,
        cell_ids=list(cell_ids),
        labels=[result["system"] for result in results],
        results=results,
        values=[read_cell_per_query(output_dir, cell_id, measure) for cell_id in cell_ids],
    )


def _only(run: ColumnarRun, qids: Sequence[str]) -> ColumnarRun:
    """``run`` restricted to ``qids``, in that order (a query the run lacks gets an empty ranking)."""
    return gather([(run, qid) for qid in qids], run.doc_ids)


def _latencies(
    stages: Sequence[_Stage], picks: Mapping[str, list[int]], fusing_s: Mapping[str, float]
) -> dict[str, float] | None:
    """Per query (ms): its chosen inputs' latencies summed plus its fusing time; None when an input has none."""
    latencies = {}
    for qid, chosen in picks.items():
        total = fusing_s[qid] * 1000.0
        for stage, index in zip(stages, chosen, strict=True):
            own = stage.results[index]["stats"].get("latency_ms")
            if own is None:
                return None
            total += own.get(qid, 0.0)
        latencies[qid] = total
    return latencies


def _efficiency(
    stages: Sequence[_Stage], used: list[tuple[int, int]], latencies: Mapping[str, float] | None, qids: list[str]
) -> Efficiency:
    results = [stages[s].results[index] for s, index in used]
    index_times = [figure(result["efficiency"]["index_time_s"]) for result in results]
    if latencies is None or any(math.isnan(t) for t in index_times):
        return not_measured()
    peak = largest([figure(result["efficiency"][PEAK_COLUMN]) for result in results])
    index_time = row_costs(results).index_time_s  # a system cell or store entry they share, once
    return Efficiency.from_timings(index_time, [latencies[q] / 1000.0 for q in qids], peak, max(index_times))
