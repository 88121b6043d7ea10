"""A tuned fusion over tuned inputs (or a learned fusion): inputs chosen first, then the fusion, per fold.

A ``[[fusions]]`` entry whose inputs name tuned systems (``inputs = ["bm25_grid[tuned]", "dense"]``) or
whose method is learned (``ltr``) has one row, ``<name>[tuned]``, assembled here. On each fold's training
queries (the other folds, or the train split's queries), each input's grid point is chosen by its own
mean ``[tuning].measure`` (``tuning.best_variant``; an untuned input has one), then the fusion's grid
point by the mean of its fused run over those same queries, fused from the chosen inputs' runs (a
learned fusion is fitted on those queries and scored on them). The fold's held-out queries are then
answered by that combination. Nothing retrieves again: the input cells' runs are read from their files
and fused in memory with ``fusion.fuse_runs`` (``fusion.ltr`` for a learned one), the grid's own code.

Efficiency: per query, the chosen inputs' latencies summed plus the fusing step's own time (timed
per held-out query); index time, the system cells under the chosen cells, each once (a shared store
entry once: ``efficiency.row_costs``); peak RSS increment, the largest of them.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zerda_eval.config.experiment import CellSpec
from zerda_eval.errors import RunError
from zerda_eval.evaluation.efficiency import PEAK_COLUMN, Efficiency, figure, largest, not_measured, row_costs
from zerda_eval.execution.tuning import assign_folds, best_variant, finished_result, train_overlap, tuning_stats
from zerda_eval.fusion.ltr import fit_ltr, ltr_fuse, training_set
from zerda_eval.fusion.methods import LEARNED_METHODS, fuse_runs, wsum_grid
from zerda_eval.ranking import Run
from zerda_eval.store.run_dir import read_cell_per_query, read_cell_run

Combiner = Callable[[Sequence[Run], Mapping[str, str]], Run]  # (input runs, query texts) -> fused run


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
    read: dict[int, Run] = field(default_factory=dict)

    def run(self, index: int) -> Run:
        """The run of grid cell ``index``."""
        if index not in self.read:
            self.read[index] = read_cell_run(self.output_dir, self.cell_ids[index])
        return self.read[index]


def tuned_fusion_run(
    cell: CellSpec, output_dir: Path, test: Judged, train: Judged | None
) -> tuple[Run, Efficiency, dict[str, Any]]:
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
    run: Run = {}
    fusing_s: dict[str, float] = {}
    picks: dict[str, list[int]] = {}
    choices = []
    for fold, on, held_out, choosing, judged in folds:
        inputs, variant, combiner, mean = choose(choosing, fusion, judged, on, config["seed"], cell.label)
        chosen_runs = [_only(stage.run(index), held_out) for stage, index in zip(stages, inputs, strict=True)]
        for qid in held_out:
            start = time.perf_counter()
            run[qid] = combiner([{qid: r.get(qid, [])} for r in chosen_runs], test.queries).get(qid, [])
            fusing_s[qid] = time.perf_counter() - start
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
    return run, _efficiency(stages, used, latencies, qids), stats | {"latency_ms": latencies}


def choose(
    stages: Sequence[_Stage], fusion: Mapping[str, Any], judged: Judged, on: Sequence[str], seed: int, where: str
) -> tuple[list[int], int, Combiner, float]:
    """On the queries ``on`` only: each input's grid point, then the fusion's, and its fitted combiner.

    Returns the chosen input indices, the chosen fusion variant, its combiner and its mean on ``on``.
    """
    inputs = [best_variant(stage.values, on) for stage in stages]
    runs = [_only(stage.run(index), on) for stage, index in zip(stages, inputs, strict=True)]
    combiners = [
        fitted_combiner(fusion["method"], v["params"], runs, judged, on, seed, where) for v in fusion["variants"]
    ]
    if fusion["method"] == "wsum":  # a weight grid: each query's score matrix built once (same numbers)
        fused = _wsum_variants(runs, [variant["params"] for variant in fusion["variants"]])
    else:
        fused = [combiner(runs, judged.queries) for combiner in combiners]
    values = [judged.evaluate(run) for run in fused]
    chosen = best_variant(values, on)
    mean = sum(values[chosen].get(q, 0.0) for q in on) / len(on)
    return inputs, chosen, combiners[chosen], mean


def fitted_combiner(
    method: str,
    params: Mapping[str, Any],
    runs: Sequence[Run],
    judged: Judged,
    on: Sequence[str],
    seed: int,
    where: str,
) -> Combiner:
    """The fusion of ``method`` with ``params`` as a function of the input runs; a learned one is fitted
    here on the queries ``on`` of ``judged`` (and only those)."""
    options = {key: value for key, value in params.items() if key != "method"}
    if method not in LEARNED_METHODS:
        return lambda inputs, _queries: fuse_runs(method, inputs, **options)
    features, labels = training_set(runs, judged.queries, judged.relevant, on)
    estimator = fit_ltr(options["model"], features, labels, seed, f"tuned row {where!r}")
    return lambda inputs, queries: ltr_fuse(estimator, inputs, queries, options["top_k"])


def _wsum_variants(runs: Sequence[Run], variants: Sequence[Mapping[str, Any]]) -> list[Run]:
    """``fuse_runs("wsum", runs, **params)`` of each variant, through ``wsum_grid`` per (score_norm, top_k)."""
    fused: list[Run | None] = [None] * len(variants)
    groups: dict[tuple, list[int]] = {}
    for index, params in enumerate(variants):
        groups.setdefault((params["score_norm"], params["top_k"]), []).append(index)
    for (score_norm, top_k), indices in groups.items():
        grid = wsum_grid(runs, [variants[i]["weights"] for i in indices], score_norm, top_k)
        for index, run in zip(indices, grid, strict=True):
            fused[index] = run
    return [run for run in fused if run is not None]


def _stage(output_dir: Path, cell: CellSpec, cell_ids: Sequence[str], measure: str) -> _Stage:
    results = [finished_result(output_dir, cell, cell_id) for cell_id in cell_ids]
    return _Stage(
        output_dir=output_dir,
        cell_ids=list(cell_ids),
        labels=[result["system"] for result in results],
        results=results,
        values=[read_cell_per_query(output_dir, cell_id, measure) for cell_id in cell_ids],
    )


def _only(run: Run, qids: Sequence[str]) -> Run:
    """``run`` restricted to ``qids`` (a query the run lacks gets an empty ranking)."""
    return {qid: run.get(qid, []) for qid in qids}


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
