"""Effectiveness through ranx (tie-break applied first) and efficiency figures of a grid cell.

Effectiveness: ranx's ``Qrels`` / ``Run`` / ``evaluate``. ranx and trec_eval order tied scores
differently (trec_eval: score desc, then doc id desc; ranx: whatever its sort yields), which moved
MAP@100 by up to 2e-3 on the small Arabic sets. So every run is first put in ONE order
(``TIE_BREAK``: score descending, then doc id ascending) and its scores replaced by strictly
decreasing rank scores; after that every tool sees the same ranking and the numbers agree to 1e-12.

Queries: the mean is over ALL judged queries. A judged query the system returned nothing for scores
0 on every measure (ranx cannot hold an empty result list, ranx #51/#67, so it is scored outside ranx).

Efficiency: ``time.perf_counter`` (monotonic, highest resolution) around each single-query search,
after one warm-up query that is not timed. A fusion's figures include its inputs': per query, the sum
of the inputs' latencies plus the fusing step (run one after the other), and beside it the
"parallel" figure, the slowest input plus the fusing step; index time likewise (sum, and max as
parallel). Peak RSS is the process's resident high-water mark over the cell's own window: on Linux
the kernel's ``VmHWM`` is reset to the current RSS when the cell starts (``/proc/self/clear_refs``
"5") and read when it ends, so it is exact for the cell (it includes what was already resident,
e.g. the loaded collection). Where that reset is unavailable the figure is the process's peak since
it started (``ru_maxrss``) and ``RssWindow.scope`` says "process".
"""

from __future__ import annotations

import re
import sys
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

import numpy as np

from zerda_eval.errors import RunError

MEASURE_FAMILIES = ("ndcg", "mrr", "recall", "map", "precision")
MEASURE_PATTERN = re.compile(r"^(ndcg|mrr|recall|map|precision)@([1-9][0-9]*)$")
DEFAULT_MEASURES = ("ndcg@10", "mrr@10", "recall@100", "map@100", "precision@10")
TIE_BREAK = "score desc, doc_id asc"
ANSWERABLE_PREFIX = "answerable:"

Run = dict[str, list[tuple[str, float]]]
Qrels = Mapping[str, Mapping[str, int]]

_ranx_warmed = False


def is_measure(name: str) -> bool:
    """True for ranx measure names this harness reports: ``family@k`` with k >= 1."""
    return MEASURE_PATTERN.match(name) is not None


def tie_break(results: Sequence[tuple[str, float]]) -> list[tuple[str, float]]:
    """Results in ``TIE_BREAK`` order (score desc, doc id asc), a doc kept once (its best score).

    NaN or infinite scores are a system bug that would make any order arbitrary: ``RunError``.
    """
    doc_ids, scores = ranked_arrays(results)
    return list(zip(doc_ids, scores.tolist(), strict=True))


def ranked_arrays(results: Sequence[tuple[str, float]]) -> tuple[list[str], np.ndarray]:
    """``tie_break`` as doc ids and float64 scores, with no per-document Python work where it can be avoided.

    A ranking already strictly decreasing (as the runner hands it over) is kept as it is; otherwise one
    numeric sort, and doc id strings are compared only if some scores tie.
    """
    if not results:
        return [], np.array([], dtype=np.float64)
    ranked = list(map(itemgetter(0), results))
    scores = np.fromiter(map(itemgetter(1), results), dtype=np.float64, count=len(ranked))
    finite = np.isfinite(scores)
    if not finite.all():
        bad = int(np.flatnonzero(~finite)[0])
        raise RunError(f"non-finite score {scores[bad]!r} for document {ranked[bad]!r}; fix the system or embedder")
    if not (np.diff(scores) < 0).all():
        order = np.argsort(-scores, kind="stable")
        ranked, scores = [ranked[i] for i in order.tolist()], scores[order]
        tied = np.flatnonzero(np.diff(scores) == 0)  # ranked[i] and ranked[i + 1] tie
        if tied.size:  # each maximal run of equal scores: doc id ascending decides
            breaks = np.diff(tied) > 1
            starts, stops = tied[np.r_[True, breaks]], tied[np.r_[breaks, True]] + 2
            for start, stop in zip(starts.tolist(), stops.tolist(), strict=True):
                ranked[start:stop] = sorted(ranked[start:stop])
    if len(set(ranked)) < len(ranked):  # a doc listed twice keeps its first (best-ranked) place
        seen: set[str] = set()
        keep = [i for i, doc_id in enumerate(ranked) if not (doc_id in seen or seen.add(doc_id))]
        ranked, scores = [ranked[i] for i in keep], scores[keep]
    return ranked, scores


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


@dataclass(frozen=True)
class Efficiency:
    """What a cell cost: index time, per-query latency percentiles, throughput, peak RSS.

    For a fusion, ``index_time_s`` and the latencies are its inputs' summed with the fusing step (the
    inputs run one after the other); the ``*_parallel_*`` figures take the slowest input instead (the
    inputs run side by side). For a single system both are the same.
    """

    index_time_s: float
    index_time_parallel_s: float
    latency_mean_ms: float
    latency_p50_ms: float
    latency_p95_ms: float
    latency_p99_ms: float
    latency_parallel_mean_ms: float
    qps: float
    peak_rss_mb: float

    @classmethod
    def from_timings(
        cls,
        index_time_s: float,
        latencies_s: Sequence[float],
        peak_rss_mb: float,
        index_time_parallel_s: float | None = None,
        parallel_latencies_s: Sequence[float] | None = None,
    ) -> Efficiency:
        """Summarise per-query latencies (seconds) measured with ``time.perf_counter``."""
        lat = _milliseconds(latencies_s)
        parallel = lat if parallel_latencies_s is None else _milliseconds(parallel_latencies_s)
        total_s = float(lat.sum()) / 1000.0
        return cls(
            index_time_s=float(index_time_s),
            index_time_parallel_s=float(index_time_s if index_time_parallel_s is None else index_time_parallel_s),
            latency_mean_ms=float(lat.mean()),
            latency_p50_ms=float(np.percentile(lat, 50)),
            latency_p95_ms=float(np.percentile(lat, 95)),
            latency_p99_ms=float(np.percentile(lat, 99)),
            latency_parallel_mean_ms=float(parallel.mean()),
            qps=float(len(latencies_s) / total_s) if total_s > 0 else 0.0,
            peak_rss_mb=float(peak_rss_mb),
        )


def _milliseconds(latencies_s: Sequence[float]) -> np.ndarray:
    lat = np.asarray(latencies_s, dtype=np.float64) * 1000.0
    return lat if lat.size else np.zeros(1)


_CLEAR_REFS = "/proc/self/clear_refs"
_STATUS = "/proc/self/status"


class RssWindow:
    """Peak resident memory of this process from the moment the window opens (see the module docstring).

    ``scope`` is ``"cell"`` when the kernel's high-water mark was reset at the start (Linux), else
    ``"process"`` (the peak since the process started: an upper bound for the window).
    """

    def __init__(self) -> None:
        try:
            with open(_CLEAR_REFS, "w") as handle:
                handle.write("5")  # resets VmHWM to the current RSS (Linux >= 4.0)
            self.scope = "cell" if _vm_hwm_mb() is not None else "process"
        except OSError:
            self.scope = "process"

    def peak_mb(self) -> float:
        """The high-water mark in MB since the window opened (``scope="cell"``) or since the process started."""
        if self.scope == "cell":
            peak = _vm_hwm_mb()
            if peak is not None:
                return peak
        return peak_rss_mb()


def _vm_hwm_mb() -> float | None:
    try:
        with open(_STATUS) as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0  # kB
    except (OSError, ValueError, IndexError):
        return None
    return None


def peak_rss_mb() -> float:
    """Peak resident set size of this process since it started, in MB (``ru_maxrss``: KB on Linux, bytes on macOS)."""
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024.0 * 1024.0) if sys.platform == "darwin" else peak / 1024.0
