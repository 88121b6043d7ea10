"""Tie-aware measures: the expected value of each measure over every order of tied documents, and its range.

A system that gives several documents the same score has not ranked them; trec_eval (and the harness,
``zerda_eval.ranking``) still puts them in one conventional order, and a measure can move with that
convention. Following McSherry and Najork ("Computing information retrieval performance measures
efficiently in the presence of tied scores", ECIR 2008), each measure is also given as its mean over all
orders of the tied documents (every permutation of each tie group equally likely, groups independent),
exactly and in closed form per tie group (no sampling), with its range: ``min`` (each tie group worst
first: unjudged, then lower grades, relevant last) and ``max`` (each group best first: higher grades
first, unjudged last). Neither depends on which convention ``ranking.TIE_BREAK`` takes.

A tie group is a maximal run of equal scores (float64 equality) in a query's ranking as the system
returned it (at most the experiment's ``depth``). Documents tied with the last one returned but cut off
by the system are not seen: the group is the documents returned.

Notation, per query: positions i = 0, 1, ... (rank i + 1), position i in group g of size n_g holding
r_g relevant documents (grade >= the measure's level) at offset t_i in the group; p_i = r_g / n_g is
the chance that position i holds a relevant document; B_g is the relevant documents in groups before g;
k is the cutoff (the whole ranking without one), R the query's relevant documents in the qrels.

- P@k, R@k, Rprec, NumRelRet, Judged@k: linear in the indicators, so E = sum over i < k of p_i
  (Judged: the group's share of judged documents), divided as the measure divides (k, R, min(k, len)).
- nDCG@k: linear in the gains, so E[DCG@k] is the DCG of the ranking whose gain at i is its group's mean
  gain; the ideal DCG does not depend on the order. That ranking is handed to the same kernel.
- RR@k, Success@k: only the first group holding a relevant document matters; in it the first relevant
  document sits at offset t with probability C(n - 1 - t, r - 1) / C(n, r) (q_i).
  E[RR@k] = sum over i < k of q_i / (i + 1); E[Success@k] = sum over i < k of q_i.
- AP@k = (1/R) sum over i < k of rel_i (sum over j <= i of rel_j) / (i + 1). Its terms are products of two
  indicators, which are not independent within a group: E[rel_i rel_j] = r(r - 1) / (n(n - 1)) for j in
  i's group (sampling without replacement), p_i p_j for j in an earlier (independent) group, and the
  earlier groups' p_j sum to B_g. Hence McSherry and Najork's exact expectation
  E[AP@k] = (1/R) sum over i < k of [p_i (1 + B_g) + t_i r_g (r_g - 1) / (n_g (n_g - 1))] / (i + 1);
  a formula that multiplied expected precision by p_i would be wrong by the within-group covariance.
- Bpref = (1/R) sum over retrieved relevant d of 1 - min(N_d, R) / min(N, R), N_d the judged non-relevant
  documents above d, N the query's judged non-relevant documents. For a relevant d in group g with u_g
  judged non-relevant documents, N_d = N'_g + X, N'_g those in earlier groups and X uniform on
  0 .. u_g (d's place among the u_g + 1 is uniform); so each relevant d of g adds the mean of
  1 - min(x, R) / min(N, R) over x = N'_g .. N'_g + u_g, a sum of an arithmetic series clipped at R.
- NumRet, NumRel: do not depend on the order.

Best and worst orders: every measure of the table is non-decreasing when a document moves above a
lower-graded (or unjudged, for Judged and bpref) one of its group, so sorting each group by grade, best
first or worst first, gives ``max`` and ``min``; both are computed by the kernel on those orders.
``tests/zerda_eval/test_tie_aware.py`` checks the three against pytrec_eval on every permutation of
small random runs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np

from zerda_eval.columnar import ColumnarRun
from zerda_eval.evaluation.measures import (
    ANSWERABLE_PREFIX,
    Measure,
    Qrels,
    aggregate_values,
    column_grades,
    grades_table,
    parse_measure,
)
from zerda_eval.ranking import Run, ranked_arrays, trec_scores

EXPECTED, LOW, HIGH = "expected", "min", "max"
BOUNDS = (EXPECTED, LOW, HIGH)
TIE_SENSITIVE = 1e-3  # a mean whose range over tie orders is wider than this is flagged in the report
TIE_AWARE_KEY = "tie_aware"  # result.json: {measure: {"expected": ..., "min": ..., "max": ...}}

PerQuery = dict[str, dict[str, float]]


@dataclass(frozen=True)
class _Ties:
    """The flat rankings of all queries with their tie groups (see the module docstring's notation)."""

    grades: np.ndarray  # per position: judged grade, NaN when unjudged
    query: np.ndarray  # per position: its query's index
    rank: np.ndarray  # per position: 0-based rank in its query
    group: np.ndarray  # per position: its tie group (global index)
    offset: np.ndarray  # per position: its offset t in its group
    sizes: np.ndarray  # per group: n_g
    group_query: np.ndarray  # per group: its query's index
    offsets: np.ndarray  # per query: where its positions start (and the total, last)

    def per_group(self, values: np.ndarray) -> np.ndarray:
        """Sum of ``values`` (per position) over each group."""
        return np.bincount(self.group, weights=values, minlength=self.sizes.size)

    def per_query(self, values: np.ndarray) -> np.ndarray:
        """Sum of ``values`` (per position) over each query."""
        return np.bincount(self.query, weights=values, minlength=self.offsets.size - 1)

    def before(self, per_group: np.ndarray) -> np.ndarray:
        """Per group: the sum of ``per_group`` over the earlier groups of its query."""
        total = np.cumsum(per_group) - per_group
        return total - total[np.searchsorted(self.group_query, self.group_query)]  # less its query's first group's


def tie_aware_run(run: Run, qrels: Qrels, measures: Sequence[str]) -> dict[str, PerQuery]:
    """``{bound: {measure: {qid: value}}}`` for bound in ``BOUNDS`` over every judged query.

    The queries and the empty-ranking rule are ``measures.evaluate_run``'s; so is every value on one
    order (the kernel), so ``min <= evaluate_run's value <= max`` whatever the tie convention.
    """
    parsed = [parse_measure(measure) for measure in measures]
    judged = {qid: docs for qid, docs in qrels.items() if docs}
    qids = list(judged)
    out = {bound: {measure: dict.fromkeys(qids, 0.0) for measure in measures} for bound in BOUNDS}
    if not qids or not measures:
        return out
    ties = _ties(*_flat_grades(run, judged))
    judgements = [judged[qid] for qid in qids]
    key = np.where(np.isnan(ties.grades), -np.inf, ties.grades)
    best = grades_table(ties.grades[np.lexsort((-key, ties.group))], ties.offsets, judgements, parsed)
    worst = grades_table(ties.grades[np.lexsort((key, ties.group))], ties.offsets, judgements, parsed)
    expected = _expected(ties, judgements, parsed, best)
    for bound, table in ((EXPECTED, expected), (LOW, worst), (HIGH, best)):
        for measure, row in zip(measures, table.tolist(), strict=True):
            out[bound][measure].update(zip(qids, row, strict=True))
    return out


def tie_aware_collection(run: Run, collection: Any, qids: Sequence[str], measures: Sequence[str]) -> dict[str, dict]:
    """``{measure: {"expected", "min", "max"}}``: the means of ``tie_aware_run`` over the judged queries among
    ``qids``, aggregated as ``measures.evaluate_collection`` aggregates (``answerable:<measure>`` too).

    A Qur'an QA no-answer question scores by the task rule, which looks only at whether the run is exactly
    ``["-1"]``: the same in every order, so its value is each bound's.
    """
    from zerda_eval.evaluation.no_answer import task_scores

    qrels = {qid: collection.qrels[qid] for qid in qids if qid in collection.qrels}
    no_answer = collection.no_answer_qids & qrels.keys()
    answerable = [qid for qid in qrels if qid not in no_answer]
    bounds = tie_aware_run(run, {qid: qrels[qid] for qid in answerable}, measures)
    means: dict[str, dict[str, float]] = {}
    for bound, values in bounds.items():
        if no_answer:
            ranked_ids = {qid: ranked_arrays(run.get(qid, []))[0] for qid in qrels}
            every = {m: task_scores(values[m], ranked_ids, collection) for m in measures}
            summary = aggregate_values({m: {qid: every[m][qid] for qid in qrels} for m in measures})
            summary.update({ANSWERABLE_PREFIX + m: v for m, v in aggregate_values(values, answerable).items()})
        else:
            summary = aggregate_values(values)
        for measure, value in summary.items():
            means.setdefault(measure, {})[bound] = value
    return means


def tie_aware_columns(result: Mapping[str, Any], measures: Sequence[str]) -> dict[str, float]:
    """A cell's tie-aware figures as results-table columns ``"<measure> expected"``, ``"<measure> min"``,
    ``"<measure> max"`` (NaN for a result written before they were recorded)."""
    record = result.get(TIE_AWARE_KEY) or {}
    return {f"{m} {bound}": float(record.get(m, {}).get(bound, math.nan)) for m in measures for bound in BOUNDS}


def tie_range(row: Mapping[str, Any], measure: str) -> float:
    """How far ``measure``'s mean can move with the order of tied documents (max - min; NaN: not recorded)."""
    return float(row.get(f"{measure} {HIGH}", math.nan)) - float(row.get(f"{measure} {LOW}", math.nan))


def _flat_grades(run: Run, judged: Mapping[str, Mapping[str, int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rankings of the ``judged`` queries (each in score order, a doc once, whole) as flat arrays: each
    ranked doc's grade (NaN: unjudged), its score, per-query offsets; a ``ColumnarRun`` by
    ``measures.column_grades``, with no (doc, score) tuple built."""
    if isinstance(run, ColumnarRun):
        grades, offsets, position = column_grades(run, judged)
        return grades, run.scores[position], offsets
    ranked = [ranked_arrays(run.get(qid) or []) for qid in judged]
    lengths = np.fromiter((len(ids) for ids, _ in ranked), dtype=np.int64, count=len(ranked))
    offsets = np.concatenate(([0], np.cumsum(lengths)))
    nan = float("nan")
    grades = np.fromiter(
        chain.from_iterable(
            (docs.get(d, nan) for d in ids) for (ids, _), docs in zip(ranked, judged.values(), strict=True)
        ),
        dtype=np.float64,
        count=int(offsets[-1]),
    )
    scores = np.concatenate([scores for _, scores in ranked]) if ranked else np.zeros(0)
    return grades, scores, offsets


def _ties(grades: np.ndarray, scores: np.ndarray, offsets: np.ndarray) -> _Ties:
    """Flat rankings (``_flat_grades``) with their tie groups."""
    total = int(offsets[-1])
    lengths = np.diff(offsets)
    query = np.repeat(np.arange(lengths.size), lengths)
    starts_group = np.ones(total, dtype=bool)
    keys = trec_scores(scores)  # a tie is trec_eval's: equal as float32
    starts_group[1:] = (keys[1:] != keys[:-1]) | (query[1:] != query[:-1])
    group = np.cumsum(starts_group) - 1
    starts = np.flatnonzero(starts_group)
    position = np.arange(total)
    return _Ties(
        grades=grades,
        query=query,
        rank=position - offsets[query],
        group=group,
        offset=position - starts[group],
        sizes=np.diff(np.append(starts, total)),
        group_query=query[starts],
        offsets=offsets,
    )


def _expected(ties: _Ties, judgements: Sequence[Mapping[str, int]], parsed: Sequence[Measure], any_order: np.ndarray):
    """The expected values ``(measure, query)`` (``any_order``: the kernel's values on one order, for the
    measures that do not depend on it)."""
    table = np.array(any_order, dtype=np.float64)
    nonnegative = np.where(ties.grades > 0, ties.grades, 0.0)  # nDCG's gain (NaN > 0 is False)
    mean_gain = (ties.per_group(nonnegative) / ties.sizes)[ties.group]
    rows = [m for m, measure in enumerate(parsed) if measure.family == "ndcg"]
    if rows:
        table[rows] = grades_table(mean_gain, ties.offsets, judgements, [parsed[m] for m in rows])
    lengths = np.diff(ties.offsets)
    for m, measure in enumerate(parsed):
        if measure.family in ("ndcg", "num_ret", "num_rel"):
            continue
        level = measure.rel
        relevant = ties.grades >= level  # NaN compares False
        n_relevant = np.array([sum(grade >= level for grade in docs.values()) for docs in judgements], np.float64)
        r = ties.per_group(relevant.astype(np.float64))
        p = (r / ties.sizes)[ties.group]
        k = measure.cutoff
        in_cut = np.ones(ties.grades.size, dtype=bool) if k is None else ties.rank < k
        if measure.family == "rprec":
            in_cut = ties.rank < n_relevant[ties.query]
        if measure.family in ("precision", "recall", "rprec", "num_rel_ret"):
            hits = ties.per_query(p * in_cut)
            divisor = {"precision": np.full(lengths.size, float(k or 1)), "num_rel_ret": np.ones(lengths.size)}
            table[m] = _ratio(hits, divisor.get(measure.family, n_relevant))
        elif measure.family == "judged":
            judged = ties.per_group((~np.isnan(ties.grades)).astype(np.float64)) / ties.sizes
            table[m] = _ratio(ties.per_query(judged[ties.group] * in_cut), np.minimum(lengths, k or lengths))
        elif measure.family in ("rr", "success"):
            first = _first_relevant(ties, r)
            weight = 1.0 / (ties.rank + 1.0) if measure.family == "rr" else 1.0
            table[m] = ties.per_query(first * weight * in_cut).astype(np.float64)
        elif measure.family == "ap":
            n = ties.sizes.astype(np.float64)
            pairs = np.divide(r * (r - 1), n * (n - 1), out=np.zeros_like(n), where=n > 1)
            above = ties.before(r)
            term = p * (1.0 + above[ties.group]) + ties.offset * pairs[ties.group]
            table[m] = _ratio(ties.per_query(term * in_cut / (ties.rank + 1.0)), n_relevant)
        else:  # bpref, the last family of ``KERNEL_FAMILIES`` (the tests cover every one)
            table[m] = _bpref(ties, judgements, level, r, n_relevant)
    return table


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """``numerator / denominator`` where the denominator is positive, else 0 (trec_eval's convention)."""
    numerator, denominator = np.asarray(numerator, dtype=np.float64), np.asarray(denominator, dtype=np.float64)
    return np.divide(numerator, denominator, out=np.zeros_like(numerator), where=denominator > 0)


def _first_relevant(ties: _Ties, r: np.ndarray) -> np.ndarray:
    """Per position: the chance that it holds its query's first relevant document, C(n-1-t, r-1) / C(n, r)
    in the query's first group with a relevant document (``r``: relevant per group), else 0."""
    first_group = (r > 0) & (ties.before(r) == 0)
    n, count = ties.sizes[ties.group].astype(np.float64), r[ties.group]
    rest = n - 1.0 - ties.offset
    possible = first_group[ties.group] & (rest >= count - 1)
    chance = np.zeros(ties.grades.size)
    a, b, c = rest[possible], count[possible], n[possible]
    log = _log_choose(a, b - 1.0) - _log_choose(c, b)
    chance[possible] = np.exp(log)
    return chance


def _log_choose(n: np.ndarray, k: np.ndarray) -> np.ndarray:
    """log C(n, k) for 0 <= k <= n (scipy imported here: a fully cached rerun never loads it)."""
    from scipy.special import gammaln

    return gammaln(n + 1.0) - gammaln(k + 1.0) - gammaln(n - k + 1.0)


def _bpref(
    ties: _Ties, judgements: Sequence[Mapping[str, int]], level: int, r: np.ndarray, n_relevant: np.ndarray
) -> np.ndarray:
    """E[bpref] per query (the module docstring): per group, r_g times the mean of 1 - min(x, R) / min(N, R)
    over x = N'_g .. N'_g + u_g."""
    nonrelevant = (ties.grades >= 0) & (ties.grades < level)  # judged non-relevant (NaN compares False)
    u = ties.per_group(nonrelevant.astype(np.float64))
    low = ties.before(u)
    n_judged = np.array([sum(grade >= 0 for grade in docs.values()) for docs in judgements], np.float64)
    big_r = n_relevant[ties.group_query]
    divisor = np.minimum(n_judged[ties.group_query] - big_r, big_r)

    def clipped_sum(b: np.ndarray) -> np.ndarray:  # sum of min(x, R) over x = 0 .. b (0 for b = -1)
        return np.where(b <= big_r, b * (b + 1.0) / 2.0, big_r * (big_r + 1.0) / 2.0 + (b - big_r) * big_r)

    mean_clipped = (clipped_sum(low + u) - clipped_sum(low - 1.0)) / (u + 1.0)
    credit = 1.0 - np.divide(mean_clipped, divisor, out=np.zeros_like(divisor), where=divisor > 0)
    per_query = np.bincount(ties.group_query, weights=r * credit, minlength=n_relevant.size)
    return _ratio(per_query, n_relevant)
