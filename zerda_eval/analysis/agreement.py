"""How much two rankings of the same queries agree: top-k changes and Kendall's tau."""

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
    queries = sorted(set(first) | set(second))
    if not queries:
        return float("nan"), float("nan")
    a_ids = {q: [d for d, _ in first.get(q, [])] for q in queries}
    b_ids = {q: [d for d, _ in second.get(q, [])] for q in queries}
    changed = np.mean([a_ids[q][:depth] != b_ids[q][:depth] for q in queries])
    return float(changed), float(np.nanmean([kendall_tau_top(a_ids[q], b_ids[q], depth) for q in queries]))
