"""The numba building blocks every BM25 traversal shares: the weight, the top-k heap, the list searches.

One home, so the exhaustive, term-at-a-time and document-at-a-time kernels compute a weight with the same
operations and break ties by the same rule (``retrieval.core.top_k``: higher score first, then lower index).
"""

from __future__ import annotations

import numba
import numpy as np

# Relative slack on every pruning bound: a float sum of at most a few hundred terms rounds by far less.
SLACK = 1e-12


@numba.njit(cache=True, inline="always")
def _weight(idf, tf, k1_plus_1, norm):  # type: ignore[no-untyped-def]
    return idf * tf * k1_plus_1 / (tf + norm)


@numba.njit(cache=True, inline="always")
def _worse(score_a: float, doc_a: int, score_b: float, doc_b: int) -> bool:
    return score_a < score_b or (score_a == score_b and doc_a > doc_b)


@numba.njit(cache=True)
def _sift_down(heap_scores, heap_docs, size, pos):  # type: ignore[no-untyped-def]
    while True:
        child = 2 * pos + 1
        if child >= size:
            return
        right = child + 1
        if right < size and _worse(heap_scores[right], heap_docs[right], heap_scores[child], heap_docs[child]):
            child = right
        if not _worse(heap_scores[child], heap_docs[child], heap_scores[pos], heap_docs[pos]):
            return
        heap_scores[pos], heap_scores[child] = heap_scores[child], heap_scores[pos]
        heap_docs[pos], heap_docs[child] = heap_docs[child], heap_docs[pos]
        pos = child


@numba.njit(cache=True)
def _offer(heap_scores, heap_docs, size, k, score, doc):  # type: ignore[no-untyped-def]
    """Add (score, doc) to a heap of at most ``k`` whose root is the worst kept; return the new size."""
    if size < k:
        heap_scores[size], heap_docs[size] = score, doc
        pos = size
        while pos > 0:
            parent = (pos - 1) // 2
            if not _worse(heap_scores[pos], heap_docs[pos], heap_scores[parent], heap_docs[parent]):
                break
            heap_scores[pos], heap_scores[parent] = heap_scores[parent], heap_scores[pos]
            heap_docs[pos], heap_docs[parent] = heap_docs[parent], heap_docs[pos]
            pos = parent
        return size + 1
    if _worse(heap_scores[0], heap_docs[0], score, doc):
        heap_scores[0], heap_docs[0] = score, doc
        _sift_down(heap_scores, heap_docs, k, 0)
    return size


@numba.njit(cache=True, inline="always")
def _lower_bound(doc_ids, low, high, doc):  # type: ignore[no-untyped-def]
    """First position in ``[low, high)`` whose doc id is >= ``doc`` (``high`` if none), by halving."""
    while low < high:
        middle = (low + high) >> 1
        if doc_ids[middle] < doc:
            low = middle + 1
        else:
            high = middle
    return low


@numba.njit(cache=True, inline="always")
def _gallop(doc_ids, low, end, doc):  # type: ignore[no-untyped-def]
    """``_lower_bound`` of ``[low, end)`` for a ``doc`` likely near ``low``: doubling steps, then halving."""
    if low >= end or doc_ids[low] >= doc:
        return low
    step = 1
    while low + step < end and doc_ids[low + step] < doc:
        low += step
        step <<= 1
    return _lower_bound(doc_ids, low + 1, min(low + step, end), doc)


@numba.njit(cache=True, inline="always")
def _tf_of(indptr, doc_ids, tfs, column_slot, column_tfs, term, cursor, doc):  # type: ignore[no-untyped-def]
    """``(tf of term in doc, 0 if absent; the new cursor)``: one byte read if the term has a tf column, else a
    gallop through its postings from ``cursor`` (a position in them at or before ``doc``'s)."""
    if column_slot[term] >= 0:
        return int(column_tfs[column_slot[term], doc]), cursor
    end = indptr[term + 1]
    posting = _gallop(doc_ids, cursor, end, doc)
    if posting < end and doc_ids[posting] == doc:
        return int(tfs[posting]), posting
    return 0, posting


@numba.njit(cache=True)
def _bound_order(terms, counts, upper):  # type: ignore[no-untyped-def]
    """Each query term's bound (``count * largest weight``) and the order terms are summed in: highest
    bound first, ties by term row. Every path sums in this order, so a score does not depend on the path."""
    bounds = np.empty(len(terms))
    for i in range(len(terms)):
        bounds[i] = counts[i] * upper[terms[i]]
    return bounds, np.argsort(-bounds, kind="mergesort")
