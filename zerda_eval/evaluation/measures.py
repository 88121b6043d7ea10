"""Effectiveness measures on runs in the one tie-break order (``zerda_eval.ranking``), computed as trec_eval does.

ranx and trec_eval order tied scores differently (trec_eval: score desc, then doc id desc; ranx:
whatever its sort yields), which moved MAP@100 by up to 2e-3 on the small Arabic sets. So every run
is first put in ONE order, trec_eval's (``TIE_BREAK``: score descending, then doc id descending by
UTF-8 bytes); the measures are then computed on that ranking by one compiled kernel
(``evaluation.kernel``) that follows trec_eval's arithmetic, and equal pytrec_eval's values on the same
run (its own scores, its own tie-break) to 1e-12.

Names: ``MEASURE_NAMES`` is the one name table. It accepts ranx's names (``ndcg@10``, ``mrr@10``,
``recall@100``, ``map@100``, ``precision@10``) and ir_measures' (``nDCG@10``, ``AP@100``, ``RR@10``,
``R@100``, ``P@10``, ``Judged@10``, ``Success@10``, ``Rprec``, ``Bpref``, ``nDCG``, ``AP``, ``NumRet``,
``NumRel``, ``NumRelRet``), the latter with a relevance threshold where ir_measures takes one
(``P(rel=2)@10``: a doc is relevant when graded >= 2, trec_eval's ``-l 2``). docs/MEASURES.md says which
trec_eval measure each name is.

Queries: a measure aggregates over ALL judged queries (the mean; the counts ``NumRet``, ``NumRel``,
``NumRelRet`` are summed, as trec_eval's and ir_measures' summaries do). A judged query the system
returned nothing for is evaluated on an empty ranking: 0 on every measure but ``NumRel``.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np

from zerda_eval.columnar import ColumnarRun, doc_table
from zerda_eval.errors import ConfigError, DataFormatError, RunError, ZerdaEvalWarning, did_you_mean
from zerda_eval.ranking import Run, tie_break, top_doc_ids

# The kernel's families, in the order of its codes (``evaluation.kernel``: NDCG = 0, ...).
KERNEL_FAMILIES = (
    *("ndcg", "rr", "recall", "ap", "precision", "judged"),
    *("success", "rprec", "bpref", "num_ret", "num_rel", "num_rel_ret"),
)
REQUIRED, OPTIONAL, NONE = "required", "optional", "none"  # whether a name takes a cutoff ``@k``


@dataclass(frozen=True)
class MeasureName:
    """A row of the name table: which kernel family a name is, what it takes, and its trec_eval twin."""

    family: str  # one of KERNEL_FAMILIES
    cutoff: str  # REQUIRED, OPTIONAL or NONE
    takes_rel: bool  # accepts ``(rel=N)``
    trec_eval: str  # the trec_eval measure (``k``: the cutoff; ``-l N``: the relevance threshold)
    sums: bool = False  # aggregated by a sum over queries (the counts), else by the mean


MEASURE_NAMES: dict[str, MeasureName] = {
    # ranx's names (today's; relevant = graded >= 1)
    "ndcg": MeasureName("ndcg", REQUIRED, False, "ndcg_cut.k"),
    "mrr": MeasureName("rr", REQUIRED, False, "recip_rank on the ranking cut at k"),
    "recall": MeasureName("recall", REQUIRED, False, "recall.k"),
    "map": MeasureName("ap", REQUIRED, False, "map_cut.k"),
    "precision": MeasureName("precision", REQUIRED, False, "P.k"),
    # ir_measures' names
    "nDCG": MeasureName("ndcg", OPTIONAL, False, "ndcg_cut.k; without @k: ndcg"),
    "AP": MeasureName("ap", OPTIONAL, True, "map_cut.k; without @k: map"),
    "RR": MeasureName("rr", OPTIONAL, True, "recip_rank (on the ranking cut at k)"),
    "R": MeasureName("recall", REQUIRED, True, "recall.k"),
    "P": MeasureName("precision", REQUIRED, True, "P.k"),
    "Success": MeasureName("success", REQUIRED, True, "success.k"),
    "Judged": MeasureName("judged", REQUIRED, False, "(num_rel_ret + num_nonrel_judged_ret) / num_ret, cut at k"),
    "Rprec": MeasureName("rprec", NONE, True, "Rprec"),
    "Bpref": MeasureName("bpref", NONE, True, "bpref"),
    "NumRet": MeasureName("num_ret", NONE, False, "num_ret", sums=True),
    "NumRel": MeasureName("num_rel", NONE, True, "num_rel", sums=True),
    "NumRelRet": MeasureName("num_rel_ret", NONE, True, "num_rel_ret", sums=True),
}
MEASURE_PATTERN = re.compile(r"^(?P<name>[A-Za-z]+)(?:\(rel=(?P<rel>[1-9][0-9]*)\))?(?:@(?P<cutoff>[1-9][0-9]*))?$")
DEFAULT_MEASURES = ("ndcg@10", "mrr@10", "recall@100", "map@100", "precision@10")
ANSWERABLE_PREFIX = "answerable:"
MEASURE_EXAMPLES = ("ndcg@10", "nDCG@10", "AP", "P(rel=2)@10", "R@100", "Judged@10", "Bpref")

Qrels = Mapping[str, Mapping[str, int]]


@dataclass(frozen=True)
class Measure:
    """A parsed measure name: its kernel family, cutoff (None: the whole ranking) and relevance threshold."""

    name: str
    family: str
    cutoff: int | None
    rel: int
    sums: bool


def parse_measure(name: str, where: str = "") -> Measure:
    """The measure a name means (``ConfigError`` naming it and ``where`` when the table has no such name)."""
    match = MEASURE_PATTERN.match(name) if isinstance(name, str) else None
    row = MEASURE_NAMES.get(match.group("name")) if match else None
    location = f"{where}: " if where else ""
    if row is None:
        suffix = str(name)[len(match.group("name")) :] if match else ""
        hint = did_you_mean(str(name), [known + suffix for known in MEASURE_NAMES])  # 'ndgc@10' -> 'ndcg@10'
        raise ConfigError(
            f"{location}unknown measure {name!r}{hint}; allowed: "
            f"{', '.join(MEASURE_NAMES)} as name, name@k or name(rel=N)@k with k, N >= 1 "
            f"(e.g. {', '.join(MEASURE_EXAMPLES)})"
        )
    cutoff, rel = match.group("cutoff"), match.group("rel")
    if cutoff is None and row.cutoff == REQUIRED:
        raise ConfigError(f"{location}measure {name!r} needs a cutoff, e.g. {name}@10")
    if cutoff is not None and row.cutoff == NONE:
        raise ConfigError(f"{location}measure {name!r} takes no cutoff: write {name.split('@')[0]}")
    if rel is not None and not row.takes_rel:
        raise ConfigError(f"{location}measure {name!r} takes no (rel=N) threshold")
    return Measure(name, row.family, None if cutoff is None else int(cutoff), 1 if rel is None else int(rel), row.sums)


def evaluate_run(run: Run, qrels: Qrels, measures: Sequence[str]) -> dict[str, dict[str, float]]:
    """Per-query values ``{measure: {qid: value}}`` for every judged query (tie-break applied here).

    Queries in the run but not in the qrels are ignored (they are unjudged); judged queries the run
    misses are evaluated on an empty ranking. The rankings become flat arrays once (each ranked doc's
    judged grade, NaN when unjudged, cut at the deepest cutoff, with per-query offsets) and one kernel
    call computes every measure of every query; numba is imported (and the kernel loaded) only here.
    """
    parsed = [parse_measure(measure) for measure in measures]
    judged = {qid: docs for qid, docs in qrels.items() if docs}
    values = {measure: dict.fromkeys(judged, 0.0) for measure in measures}
    if not judged or not measures:
        return values
    qids = list(judged)
    if isinstance(run, ColumnarRun):  # no (doc, score) tuple built: a 7,000 x 1,000 run stays arrays
        table = evaluate_columns(run, judged, measures)
        for measure in measures:
            values[measure].update(zip(qids, table[measure].tolist(), strict=True))
        return values
    rankings = [run.get(qid) or [] for qid in qids]
    whole = any(m.cutoff is None for m in parsed)
    depth = max(map(len, rankings)) if whole else max(m.cutoff or 0 for m in parsed)
    ranked = top_doc_ids(rankings, max(depth, 1))
    offsets = _offsets(map(len, ranked), len(qids))
    nan = float("nan")
    grades = np.fromiter(
        chain.from_iterable(
            (judged[qid].get(doc, nan) for doc in docs) for qid, docs in zip(qids, ranked, strict=True)
        ),
        dtype=np.float64,
        count=int(offsets[-1]),
    )
    table = grades_table(grades, offsets, [judged[qid] for qid in qids], parsed)
    for measure, row in zip(measures, table.tolist(), strict=True):
        values[measure].update(zip(qids, row, strict=True))
    return values


def evaluate_columns(run: ColumnarRun, qrels: Qrels, measures: Sequence[str]) -> dict[str, np.ndarray]:
    """``evaluate_run`` on a ``ColumnarRun``: per measure, the values of the judged queries (qrels order).

    The run's rows are in ``TIE_BREAK`` order already; ``column_grades`` finds each ranked doc's grade with
    no Python work per ranked document.
    """
    parsed = [parse_measure(measure) for measure in measures]
    judged = {qid: docs for qid, docs in qrels.items() if docs}
    if not judged or not measures:
        return {measure: np.zeros(len(judged)) for measure in measures}
    whole = any(m.cutoff is None for m in parsed)
    grades, offsets, _ = column_grades(run, judged, None if whole else max(max(m.cutoff or 0 for m in parsed), 1))
    table = grades_table(grades, offsets, list(judged.values()), parsed)
    return dict(zip(measures, table, strict=True))


def column_grades(
    run: ColumnarRun, judged: Mapping[str, Mapping[str, int]], depth: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rankings of the ``judged`` queries (in that order; a query the run lacks is empty), each cut at
    ``depth`` (None: whole), as each ranked doc's grade (NaN: unjudged), per-query offsets, and each row's
    position in the run's arrays. Each judged (query, doc) pair becomes one int64 key (query position x
    doc-table size + doc index) and every ranked doc finds its grade by one binary search over the sorted keys."""
    rows = np.array([run.row(qid) for qid in judged], dtype=np.int64)  # -1: not in the run, an empty ranking
    starts = run.offsets[rows]  # row -1 reads the last offset and the 0 appended to the lengths
    lengths = np.append(run.lengths(), 0)[rows]
    if depth is not None:
        lengths = np.minimum(lengths, depth)
    offsets = _offsets(lengths, len(judged))
    position = np.repeat(starts - offsets[:-1], lengths) + np.arange(int(offsets[-1]))
    width = max(run.doc_ids.size, 1)
    keys, grades = _judged_keys(run.doc_ids, judged.values(), width)
    ranked = np.repeat(np.arange(len(judged), dtype=np.int64), lengths) * width + run.docs[position]
    at = np.minimum(np.searchsorted(keys, ranked), max(keys.size - 1, 0))
    hit = keys[at] == ranked if keys.size else np.zeros(ranked.size, dtype=bool)
    return np.where(hit, grades[at] if keys.size else 0.0, np.nan), offsets, position


def _judged_keys(doc_ids: np.ndarray, judgements: Any, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted keys ``query position * width + doc index`` of the judged docs found in ``doc_ids``, and their grades."""
    counts = []
    names, values = [], []
    for docs in judgements:
        counts.append(len(docs))
        names += docs.keys()
        values += docs.values()
    judged_docs = doc_table(names, "qrels")
    place = np.searchsorted(doc_ids, judged_docs)
    inside = place < doc_ids.size
    known = np.zeros(place.size, dtype=bool)
    known[inside] = doc_ids[place[inside]] == judged_docs[inside]
    keys = np.repeat(np.arange(len(counts), dtype=np.int64), counts) * width + place
    order = np.argsort(keys[known])
    return keys[known][order], np.asarray(values, dtype=np.float64)[known][order]


def check_query_overlap(run: Mapping[str, Any], qrels: Qrels, where: str = "run") -> None:
    """Refuse a run that shares no query id with the judged queries of ``qrels`` (it would score 0 on
    everything); one ``ZerdaEvalWarning`` with the counts when the overlap is partial."""
    judged = [qid for qid, docs in qrels.items() if docs]
    if not judged:
        raise DataFormatError("qrels: no query has a judgement; give the qrels of the run's queries")
    shared = sum(qid in run for qid in judged)
    if not shared:
        run_ids, qrels_ids = ", ".join(map(repr, list(run)[:3])) or "none", ", ".join(map(repr, judged[:3]))
        raise RunError(
            f"{where} shares no query id with the qrels (run: {run_ids}; qrels: {qrels_ids}); "
            "evaluate it against the qrels of its own queries (same dataset, same id spelling)"
        )
    unjudged = len(run) - sum(qid in qrels for qid in run)
    if shared < len(judged) or unjudged:
        warnings.warn(
            f"{where} covers {shared} of {len(judged)} judged queries (the other {len(judged) - shared} score 0 "
            f"in every mean); {unjudged} of its {len(run)} queries are not judged and are ignored",
            ZerdaEvalWarning,
            stacklevel=3,
        )


def grades_table(
    grades: np.ndarray, offsets: np.ndarray, judgements: Sequence[Mapping[str, int]], parsed: Sequence[Measure]
) -> np.ndarray:
    """Values ``(measure, query)`` of rankings given as judged grades in rank order (NaN: unjudged).

    Query ``q``'s ranking is ``grades[offsets[q]:offsets[q + 1]]``, judged by ``judgements[q]`` (its qrels,
    for the ideal ranking and the counts); one call of the compiled kernel (``evaluation.kernel``).
    """
    from zerda_eval.evaluation import kernel  # a module import: the code fingerprint does not load it either

    ideal = [sorted((grade for grade in docs.values() if grade > 0), reverse=True) for docs in judgements]
    ideal_offsets = _offsets(map(len, ideal), len(judgements))
    best = np.fromiter(chain.from_iterable(ideal), dtype=np.float64, count=int(ideal_offsets[-1]))
    n_judged = np.array([sum(grade >= 0 for grade in docs.values()) for docs in judgements], dtype=np.int64)
    families = np.array([KERNEL_FAMILIES.index(m.family) for m in parsed], dtype=np.int64)
    cutoffs = np.array([m.cutoff or kernel.NO_CUTOFF for m in parsed], dtype=np.int64)
    levels = np.array([m.rel for m in parsed], dtype=np.float64)
    return kernel.measure_kernel(grades, offsets, best, ideal_offsets, n_judged, families, cutoffs, levels)


def _offsets(lengths: Any, n: int) -> np.ndarray:
    """``[0, l0, l0 + l1, ...]`` (int64) of ``n`` lengths: where each query's slice of a flat array starts."""
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.fromiter(lengths, dtype=np.int64, count=n), out=offsets[1:])
    return offsets


def evaluate_collection(
    run: Run, collection: Any, qids: Sequence[str], measures: Sequence[str]
) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """Per-query values and means over the judged queries among ``qids`` of ``collection``.

    Qur'an QA no-answer questions follow the task rule (``zerda_eval.evaluation.no_answer.task_scores``:
    full credit only for a run of exactly ``["-1"]``); their means come with ``answerable:<measure>``
    means over the answerable questions alone.
    """
    from zerda_eval.evaluation.no_answer import task_scores

    qrels = {qid: collection.qrels[qid] for qid in qids if qid in collection.qrels}
    no_answer = collection.no_answer_qids & qrels.keys()
    if not no_answer:
        per_query = evaluate_run(run, qrels, measures)
        return per_query, aggregate_values(per_query)
    answerable = [qid for qid in qrels if qid not in no_answer]
    values = evaluate_run(run, {qid: qrels[qid] for qid in answerable}, measures)
    ranked_ids = {qid: [doc for doc, _ in tie_break(run.get(qid, []))] for qid in qrels}
    per_query = {}
    for measure in measures:
        scores = task_scores(values[measure], ranked_ids, collection)
        per_query[measure] = {qid: scores[qid] for qid in qrels}
    means = aggregate_values(per_query)
    means.update({ANSWERABLE_PREFIX + m: v for m, v in aggregate_values(values, answerable).items()})
    return per_query, means


def aggregate_values(per_query: Mapping[str, Mapping[str, float]], qids: Sequence[str] | None = None) -> dict:
    """Each measure over ``qids`` (default: all queries of the per-query table): its mean, or its sum for
    the counts (``NumRet``, ``NumRel``, ``NumRelRet``), as trec_eval's summary line gives them."""
    summary = {}
    for measure, by_qid in per_query.items():
        keys = list(by_qid) if qids is None else list(qids)
        values = [by_qid[q] for q in keys]
        if not values:
            summary[measure] = 0.0
        else:
            summary[measure] = float(np.sum(values) if parse_measure(measure).sums else np.mean(values))
    return summary
