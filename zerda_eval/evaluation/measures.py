"""Effectiveness measures on runs in the one tie-break order (``evaluation.ranking``), computed as trec_eval does.

ranx and trec_eval order tied scores differently (trec_eval: score desc, then doc id desc; ranx:
whatever its sort yields), which moved MAP@100 by up to 2e-3 on the small Arabic sets. So every run
is first put in ONE order (``TIE_BREAK``: score descending, then doc id ascending); the measures are
then computed on that ranking by one compiled kernel (``evaluation.kernel``) that follows trec_eval's
arithmetic, and equal pytrec_eval's values on the same ranking to 1e-12. Measure names are ranx's
(``ndcg@10``, ``mrr@10``, ``recall@100``, ``map@100``, ``precision@10``).

Queries: the mean is over ALL judged queries. A judged query the system returned nothing for scores
0 on every measure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from itertools import chain, repeat
from typing import Any

import numpy as np

from zerda_eval.evaluation.ranking import Run, tie_break, top_doc_ids

MEASURE_FAMILIES = ("ndcg", "mrr", "recall", "map", "precision")  # codes 0..4 of ``evaluation.kernel``
MEASURE_PATTERN = re.compile(rf"^({'|'.join(MEASURE_FAMILIES)})@([1-9][0-9]*)$")
DEFAULT_MEASURES = ("ndcg@10", "mrr@10", "recall@100", "map@100", "precision@10")
ANSWERABLE_PREFIX = "answerable:"

Qrels = Mapping[str, Mapping[str, int]]


def is_measure(name: str) -> bool:
    """True for the measure names this harness reports: ``family@k`` with k >= 1."""
    return MEASURE_PATTERN.match(name) is not None


def evaluate_run(run: Run, qrels: Qrels, measures: Sequence[str]) -> dict[str, dict[str, float]]:
    """Per-query values ``{measure: {qid: value}}`` for every judged query (tie-break applied here).

    Queries in the run but not in the qrels are ignored (they are unjudged); judged queries the run
    misses or answers with nothing score 0. The rankings become flat arrays once (each ranked doc's
    judged grade, cut at the deepest cutoff, with per-query offsets) and one kernel call computes
    every measure of every query; numba is imported (and the kernel loaded) only here.
    """
    from zerda_eval.evaluation import kernel  # a module import: the code fingerprint does not load it either

    judged = {qid: docs for qid, docs in qrels.items() if docs}
    values = {measure: dict.fromkeys(judged, 0.0) for measure in measures}
    scored = [qid for qid in judged if run.get(qid)]
    if not scored or not measures:
        return values
    parsed = [MEASURE_PATTERN.match(measure) for measure in measures]
    if not all(parsed):
        bad = next(m for m, p in zip(measures, parsed, strict=True) if p is None)
        raise ValueError(f"unknown measure {bad!r}: expected one of {MEASURE_FAMILIES} as family@k, e.g. ndcg@10")
    families = np.array([MEASURE_FAMILIES.index(p.group(1)) for p in parsed], dtype=np.int64)
    cutoffs = np.array([int(p.group(2)) for p in parsed], dtype=np.int64)
    depth = int(cutoffs.max())
    ranked = top_doc_ids([run[qid] for qid in scored], depth)
    offsets = _offsets(map(len, ranked), len(scored))
    gains = np.fromiter(
        chain.from_iterable(map(judged[qid].get, docs, repeat(0)) for qid, docs in zip(scored, ranked, strict=True)),
        dtype=np.float64,
        count=int(offsets[-1]),
    )
    ideal = [sorted((grade for grade in judged[qid].values() if grade > 0), reverse=True) for qid in scored]
    ideal_offsets = _offsets(map(len, ideal), len(scored))
    best = np.fromiter(chain.from_iterable(ideal), dtype=np.float64, count=int(ideal_offsets[-1]))
    table = kernel.measure_kernel(gains, offsets, best, ideal_offsets, families, cutoffs)
    for measure, row in zip(measures, table.tolist(), strict=True):
        values[measure].update(zip(scored, row, strict=True))
    return values


def _offsets(lengths: Any, n: int) -> np.ndarray:
    """``[0, l0, l0 + l1, ...]`` (int64) of ``n`` lengths: where each query's slice of a flat array starts."""
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.fromiter(lengths, dtype=np.int64, count=n), out=offsets[1:])
    return offsets


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
