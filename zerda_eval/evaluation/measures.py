"""Effectiveness through ranx, on runs in the one tie-break order (``evaluation.ranking``).

Effectiveness: ranx's ``Qrels`` / ``Run`` / ``evaluate``. ranx and trec_eval order tied scores
differently (trec_eval: score desc, then doc id desc; ranx: whatever its sort yields), which moved
MAP@100 by up to 2e-3 on the small Arabic sets. So every run is first put in ONE order
(``TIE_BREAK``: score descending, then doc id ascending) and its scores replaced by strictly
decreasing rank scores; after that every tool sees the same ranking and the numbers agree to 1e-12.

Queries: the mean is over ALL judged queries. A judged query the system returned nothing for scores
0 on every measure (ranx cannot hold an empty result list, ranx #51/#67, so it is scored outside ranx).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from zerda_eval.evaluation.ranking import Run, ranked_arrays, tie_break

MEASURE_FAMILIES = ("ndcg", "mrr", "recall", "map", "precision")
MEASURE_PATTERN = re.compile(rf"^({'|'.join(MEASURE_FAMILIES)})@([1-9][0-9]*)$")
DEFAULT_MEASURES = ("ndcg@10", "mrr@10", "recall@100", "map@100", "precision@10")
ANSWERABLE_PREFIX = "answerable:"

Qrels = Mapping[str, Mapping[str, int]]

_ranx_warmed = False


def is_measure(name: str) -> bool:
    """True for ranx measure names this harness reports: ``family@k`` with k >= 1."""
    return MEASURE_PATTERN.match(name) is not None


def warm_up_ranx() -> None:
    """Compile ranx's numba kernels and numba's typed list once per process (about 1.5 s when cached on disk)."""
    global _ranx_warmed
    if not _ranx_warmed:
        evaluate_run({"q": [("d1", 2.0), ("d2", 1.0)]}, {"q": {"d1": 1}}, DEFAULT_MEASURES)
        _ranx_warmed = True


def evaluate_run(run: Run, qrels: Qrels, measures: Sequence[str]) -> dict[str, dict[str, float]]:
    """Per-query values ``{measure: {qid: value}}`` for every judged query (tie-break applied here).

    Queries in the run but not in the qrels are ignored (they are unjudged); judged queries the run
    misses or answers with nothing score 0. ranx gets arrays, not ``Run``/``Qrels`` objects built from
    dicts (that building cost more than the evaluation): per query a ``[doc, score]`` float64 array
    whose doc column is the number of a judged doc id (its place among the sorted judged ids: exact,
    no hashing) or a distinct negative number for an unjudged one.
    """
    from numba.core.errors import NumbaTypeSafetyWarning
    from numba.typed import List as TypedList
    from ranx import evaluate

    judged = {qid: docs for qid, docs in qrels.items() if docs}
    values = {measure: dict.fromkeys(judged, 0.0) for measure in measures}
    judged_numbers = {doc_id: n for n, doc_id in enumerate(sorted({d for docs in judged.values() for d in docs}))}
    scored, run_arrays, qrels_arrays = [], TypedList(), TypedList()
    for qid, docs in judged.items():
        doc_ids, _ = ranked_arrays(run.get(qid, []))
        if not doc_ids:
            continue
        scored.append(qid)
        rank_scores = np.arange(len(doc_ids), 0, -1.0)  # strictly decreasing: ranx keeps the tie-broken order
        run_arrays.append(np.column_stack((_doc_numbers(doc_ids, docs, judged_numbers), rank_scores)))
        by_relevance = sorted(docs.items(), key=lambda item: -item[1])
        qrels_arrays.append(np.array([(judged_numbers[doc_id], rel) for doc_id, rel in by_relevance], dtype=np.float64))
    if scored:
        # ranx 0.3 fails on ONE metric with return_mean=False (it looks the result up by family name): ask twice
        names = list(measures) * (2 if len(measures) == 1 else 1)
        with warnings.catch_warnings():  # ranx's kernels warn about a uint64 index cast when compiled; harmless
            warnings.simplefilter("ignore", NumbaTypeSafetyWarning)
            per_measure = evaluate(qrels_arrays, run_arrays, names, return_mean=False, threads=1)
        for measure in measures:
            values[measure].update(zip(scored, per_measure[measure].tolist(), strict=True))
    return values


def _doc_numbers(ranked: list[str], judged: Iterable[str], judged_numbers: Mapping[str, int]) -> np.ndarray:
    """Float doc numbers for ranx: a judged doc's number, else ``-1 - position`` (unique, never judged).

    Looks the few judged docs up in the ranking rather than every ranked doc up in the judgements.
    """
    numbers = -1.0 - np.arange(len(ranked), dtype=np.float64)
    for doc_id in set(ranked).intersection(judged):
        numbers[ranked.index(doc_id)] = judged_numbers[doc_id]
    return numbers


def evaluate_collection(
    run: Run, collection: Any, qids: Sequence[str], measures: Sequence[str]
) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """Per-query values and means over the judged queries among ``qids`` of ``collection``.

    Qur'an QA no-answer questions follow the task rule (``zerda_eval.datasets.quranqa.task_scores``:
    full credit only for a run of exactly ``["-1"]``); their means come with ``answerable:<measure>``
    means over the answerable questions alone.
    """
    from zerda_eval.datasets.quranqa import task_scores

    qrels = {qid: collection.qrels[qid] for qid in qids if qid in collection.qrels}
    no_answer = collection.no_answer_qids & qrels.keys()
    if not no_answer:
        per_query = evaluate_run(run, qrels, measures)
        return per_query, mean_values(per_query)
    answerable = [qid for qid in qrels if qid not in no_answer]
    values = evaluate_run(run, {qid: qrels[qid] for qid in answerable}, measures)
    ranked_ids = {qid: [doc for doc, _ in tie_break(run.get(qid, []))] for qid in qrels}
    per_query = {}
    for measure in measures:
        scores = task_scores(values[measure], ranked_ids, collection)
        per_query[measure] = {qid: scores[qid] for qid in qrels}
    means = mean_values(per_query)
    means.update({ANSWERABLE_PREFIX + m: v for m, v in mean_values(values, answerable).items()})
    return per_query, means


def mean_values(per_query: Mapping[str, Mapping[str, float]], qids: Sequence[str] | None = None) -> dict:
    """Mean of each measure over ``qids`` (default: all queries of the per-query table)."""
    means = {}
    for measure, by_qid in per_query.items():
        keys = list(by_qid) if qids is None else list(qids)
        means[measure] = float(np.mean([by_qid[q] for q in keys])) if keys else 0.0
    return means
