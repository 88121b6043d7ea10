"""A weighted query on the fast engine: ``sum over t of w(t) * bm25(t, d)`` from ``SparseBM25.scores``.

RM3's second pass (``retrieval.core.rm3``) on ``SparseBM25`` without touching its kernels: each term's
scores come from the engine's own ``scores([t])`` (each weight bit-identical to ``BM25Index``'s), are
multiplied by the term's weight and added in the mapping's order, as ``BM25Index.weighted_scores`` adds
them, so the scores are the reference's, bit for bit. One dense row per term: fine for a query of tens of
terms; a corpus of millions would want a kernel of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from retrieval.core.dense import top_k_rows


def sparse_weighted_top_k(index: Any, term_weights: Mapping[str, float], k: int) -> list[tuple[int, float]]:
    """Top ``k`` of a weighted query on a ``SparseBM25``: best first, ties by lower doc index (``BM25Index``'s
    ``weighted_top_k``)."""
    if index.n_docs == 0 or k <= 0:
        return []
    scores = np.zeros(index.n_docs)
    for term, weight in term_weights.items():
        scores += weight * index.scores([term])
    rows, top = top_k_rows(scores[None, :], k)
    return list(zip(rows[0].tolist(), top[0].tolist(), strict=True))
