"""How much two rankings of the same queries agree: top-k changes, Kendall's tau and rank-biased overlap."""

from __future__ import annotations

import numpy as np

from zerda_eval.ranking import Run

TOP_DEPTH = 10


def kendall_tau_top(first: list[str], second: list[str], depth: int = TOP_DEPTH) -> float:
    """Kendall's tau-b between two rankings over the union of their top-``depth`` documents.

    Each document takes its 1-based rank in each full ranking; a document absent from a ranking is
    tied at rank ``len(ranking) + 1``. Identical top lists give 1.0.
    """
    from scipy.stats import kendalltau

    if first[:depth] == second[:depth]:
        return 1.0
    union = list(dict.fromkeys(first[:depth] + second[:depth]))
    rank_a = {doc: rank for rank, doc in enumerate(first, start=1)}
    rank_b = {doc: rank for rank, doc in enumerate(second, start=1)}
    a = [rank_a.get(doc, len(first) + 1) for doc in union]
    b = [rank_b.get(doc, len(second) + 1) for doc in union]
    return float(kendalltau(a, b).statistic)


def ranking_agreement(first: Run, second: Run, depth: int = TOP_DEPTH) -> tuple[float, float]:
    """(share of queries whose top-``depth`` list differs, mean Kendall tau) over the union of queries."""
    a_ids, b_ids = _id_lists(first, second)
    queries = list(a_ids)
    if not queries:
        return float("nan"), float("nan")
    changed = np.mean([a_ids[q][:depth] != b_ids[q][:depth] for q in queries])
    return float(changed), float(np.nanmean([kendall_tau_top(a_ids[q], b_ids[q], depth) for q in queries]))


RBO_PERSISTENCE = 0.9  # the user's patience p: the weight of depth d is p^(d-1)


def rbo(first: list[str], second: list[str], depth: int = TOP_DEPTH, persistence: float = RBO_PERSISTENCE) -> float:
    """Rank-biased overlap (Webber, Moffat & Zobel, TOIS 2010) of the top-``depth`` lists, normalised so that
    identical lists give 1: sum over d <= depth of p^(d-1) * |overlap at d| / d, over sum of p^(d-1) (the
    truncated form Clarke et al. and repro_eval compute)."""
    seen_a: set[str] = set()
    seen_b: set[str] = set()
    score = weights = 0.0
    for d in range(1, depth + 1):
        if d <= len(first):
            seen_a.add(first[d - 1])
        if d <= len(second):
            seen_b.add(second[d - 1])
        weight = persistence ** (d - 1)
        score += weight * len(seen_a & seen_b) / d
        weights += weight
    return score / weights


def mean_rbo(first: Run, second: Run, depth: int = TOP_DEPTH, persistence: float = RBO_PERSISTENCE) -> float:
    """Mean ``rbo`` of the two runs' rankings over the union of their queries (NaN when there is none)."""
    a_ids, b_ids = _id_lists(first, second)
    if not a_ids:
        return float("nan")
    return float(np.mean([rbo(a_ids[q], b_ids[q], depth, persistence) for q in a_ids]))


def _id_lists(first: Run, second: Run) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Each run's ranked doc ids per query, over the sorted union of the two runs' queries."""
    queries = sorted(set(first) | set(second))
    return (
        {q: [d for d, _ in first.get(q, [])] for q in queries},
        {q: [d for d, _ in second.get(q, [])] for q in queries},
    )
