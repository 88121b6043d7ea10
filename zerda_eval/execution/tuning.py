"""A tuned cell: the grid point chosen without the queries it is scored on, assembled from finished runs.

With a train split, the grid point with the best mean ``measure`` on the train split's queries answers
every query; train queries that are test queries (same id, or the same words: ``same_text``) are refused before any cell
runs (``check_held_out``) or, with ``overlap = "drop"``, left out of the choice. Otherwise the queries
are dealt into ``folds`` folds (a permutation drawn from the experiment's seed: reruns deal the same
folds; queries with the same text are dealt together, so none is chosen on its own twin), and each
fold's queries are answered by the grid point with the best mean on the other folds' queries
(PyTerrier's ``KFoldGridSearch``). Ties go to the first grid point. Nothing is retrieved again: the
chosen cells' rankings and per-query latencies are read from their files, and the assembled run is
evaluated like any other.

Efficiency of a tuned row: per query, the latency of the cell that answered it; index time, the sum of
the distinct chosen cells' (each must be indexed to serve its fold), a store entry they share (one
corpus encoding under several grid points) counted once, as is its from-scratch build time
(``stats["builds_counted_once"]`` names such entries), and so is a system cell under several chosen
cells (two grid points of one fusion); peak RSS increment, the largest of them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.core.tokenize import normalize_arabic
from zerda_eval.columnar import ColumnarRun, assemble
from zerda_eval.config.experiment import CellSpec
from zerda_eval.errors import RunError
from zerda_eval.evaluation.efficiency import PEAK_COLUMN, Efficiency, figure, largest, not_measured, row_costs
from zerda_eval.store.run_dir import load_result, read_cell_columns, read_cell_per_query

WORD = re.compile(r"\w+")  # the seed tokenizer's runs without its two-character minimum


def assign_folds(qids: Sequence[str], folds: int, seed: int, texts: Mapping[str, str] | None = None) -> dict[str, int]:
    """Each query's fold (0 .. folds-1): a seeded permutation dealt round-robin, so folds differ by one at most.

    With ``texts``, queries with the same text (``same_text`` key) form one group dealt as one, so a
    duplicated question never sits on both sides of a fold.
    """
    groups: dict[str, list[str]] = {}
    for qid in qids:
        groups.setdefault(same_text(texts[qid]) if texts is not None else qid, []).append(qid)
    if folds > len(groups):
        raise RunError(
            f"tuning: {folds} folds for {len(groups)} distinct queries; give [tuning].folds <= the query count"
        )
    members = list(groups.values())
    order = np.random.default_rng(seed).permutation(len(members))
    return {qid: fold % folds for fold, position in enumerate(order) for qid in members[int(position)]}


def same_text(text: str) -> str:
    """The key two queries share when they ask the same question: the words the harness's analysis reads
    (its Arabic light normalisation, then word runs of the seed's tokenizer, lower-cased), so case, spacing,
    punctuation and Arabic diacritics are left out; one-letter words are kept ("vitamin D" is not "vitamin E")."""
    return " ".join(WORD.findall(normalize_arabic(text).casefold()))


def train_overlap(test: Mapping[str, str], train: Mapping[str, str]) -> list[str]:
    """Train query ids that are test queries: the same id, or the same text (``same_text``), sorted."""
    test_texts = {same_text(text) for text in test.values()}
    return sorted(qid for qid, text in train.items() if qid in test or same_text(text) in test_texts)


def best_variant(values: Sequence[Mapping[str, float]], qids: Sequence[str]) -> int:
    """Index of the variant with the highest mean over ``qids`` (a missing query counts 0; ties: the first)."""
    means = [sum(v.get(q, 0.0) for q in qids) / len(qids) for v in values]
    return int(np.argmax(means))


def tuned_run(
    cell: CellSpec, output_dir: Path, queries: Mapping[str, str], train_queries: Mapping[str, str]
) -> tuple[ColumnarRun, Efficiency, dict[str, Any]]:
    """The tuned cell's run over ``queries`` (id -> text), its efficiency and ``stats["tuning"]`` (the
    choice per fold). ``train_queries``: the train split's evaluated queries (empty without one)."""
    qids = list(queries)
    config = cell.config
    tuning = config["tuned"]["tuning"]
    measure, inputs = tuning["measure"], config["inputs"]
    results = [finished_result(output_dir, cell, input_id) for input_id in inputs]
    labels = [result["system"] for result in results]
    if tuning["train"]:
        train = [read_cell_per_query(output_dir, input_id, measure) for input_id in config["train_inputs"]]
        left_out = train_overlap(queries, train_queries)
        train_qids = [qid for qid in train[0] if qid not in set(left_out)]
        if not train_qids:
            raise RunError(f"tuned row {cell.label!r}: every train query is a test query; give another train split")
        chosen = best_variant(train, train_qids)
        picks = dict.fromkeys(qids, chosen)
        folds = dict.fromkeys(qids, "train")
        choices = [_choice("train", labels[chosen], train, chosen, train_qids, len(qids))]
    else:
        values = [read_cell_per_query(output_dir, input_id, measure) for input_id in inputs]
        left_out = []
        folds = assign_folds(qids, tuning["folds"], config["seed"], queries)
        picks, choices = {}, []
        for fold in range(tuning["folds"]):
            held_out = [q for q in qids if folds[q] == fold]
            others = [q for q in qids if folds[q] != fold]
            chosen = best_variant(values, others)
            picks.update(dict.fromkeys(held_out, chosen))
            choices.append(_choice(fold, labels[chosen], values, chosen, others, len(held_out)))
    answering = sorted(set(picks.values()))
    runs = {index: read_cell_columns(output_dir, inputs[index]) for index in answering}
    run = assemble([(runs[index], qid) for qid, index in picks.items()])
    cells = [inputs[index] for index in answering]
    stats = tuning_stats(measure, tuning, choices, cells, left_out, folds)
    return run, _efficiency(results, picks, qids), stats | {"latency_ms": _latencies(results, picks)}


def tuning_stats(
    measure: str,
    tuning: Mapping[str, Any],
    choices: list[dict[str, Any]],
    cells: list[str],
    left_out: list[str],
    fold_of: Mapping[str, Any],
) -> dict[str, Any]:
    """A tuned cell's ``stats["tuning"]``: what was chosen, on what, the cells that answered, and the fold
    (``"train"`` with a train split) each query was answered by (``analysis.nested`` chooses per fold)."""
    described = {"measure": measure, "train": tuning["train"], "folds": tuning["folds"], "choices": choices}
    described["fold_of"] = dict(fold_of)
    return {"tuning": {**described, "cells": cells, **({"left_out_of_train": left_out} if left_out else {})}}


def finished_result(output_dir: Path, cell: CellSpec, input_id: str) -> dict[str, Any]:
    """The ``result.json`` of grid cell ``input_id`` a tuned ``cell`` chooses among (a RunError if unfinished)."""
    result = load_result(output_dir, input_id)
    if result is None:
        raise RunError(f"tuned row {cell.label!r}: grid cell {input_id} has no finished run; rerun without --only")
    return result


def _choice(fold: Any, label: str, values: Sequence[Mapping[str, float]], chosen: int, on: list[str], n: int) -> dict:
    """What one fold chose: the grid point, its mean on the queries it was chosen on, the queries it answers."""
    mean = sum(values[chosen].get(q, 0.0) for q in on) / len(on)
    return {"fold": fold, "chosen": label, "chosen_on_mean": mean, "chosen_on_queries": len(on), "answers": n}


def _latencies(results: list[dict[str, Any]], picks: Mapping[str, int]) -> dict[str, float] | None:
    """Per query, the latency (ms) of the cell that answered it; None when a chosen cell has none."""
    latencies = {}
    for qid, index in picks.items():
        own = results[index]["stats"].get("latency_ms")
        if own is None:
            return None
        latencies[qid] = own.get(qid, 0.0)
    return latencies


def _efficiency(results: list[dict[str, Any]], picks: Mapping[str, int], qids: list[str]) -> Efficiency:
    chosen = sorted(set(picks.values()))
    latencies = _latencies(results, picks)
    index_times = [figure(results[i]["efficiency"]["index_time_s"]) for i in chosen]
    if latencies is None or any(math.isnan(t) for t in index_times):
        return not_measured()
    peak = largest([figure(results[i]["efficiency"][PEAK_COLUMN]) for i in chosen])
    seconds = [latencies[q] / 1000.0 for q in qids]
    index_time = row_costs([results[i] for i in chosen]).index_time_s  # a cell or entry they share, once
    return Efficiency.from_timings(index_time, seconds, peak, max(index_times))
