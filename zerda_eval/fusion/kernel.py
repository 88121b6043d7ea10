"""The compiled fusion kernel: the queries of a fusion of columnar runs, all in one numba call
(``fusion_kernel``) or one a call (``fuse_query``, for a caller that times each query).

Its own module so that importing ``fusion.methods`` (every cell does) does not import numba. The
arithmetic is the Python path's (``fusion.methods``) operation by operation, in the same order, so the
scores are equal to the bit: RRF adds ``weight / (k + rank)`` input by input (``retrieval.core.rrf_scores``);
CombSUM / CombMNZ / wsum add ``weight * score`` input by input, 0 for an input without the doc
(``methods._weighted_sum``), CombMNZ then times the number of inputs holding it; ``zerda`` is seed 000's
``weighted_sum`` plus, with ``rrf_order = "fixed"``, the bonus ``0.20 * rrf / max(rrf)``.
"""

from __future__ import annotations

import numba
import numpy as np

RRF, COMBSUM, COMBMNZ, WSUM, ZERDA = range(5)  # the kernel's method codes
_SMALL_TIE = 16  # tied docs up to this many are ordered by an insertion sort


@numba.njit(cache=True, nogil=True)
def fusion_kernel(
    method: int,
    n_docs: int,
    starts: np.ndarray,
    stops: np.ndarray,
    docs: np.ndarray,
    values: np.ndarray,
    weights: np.ndarray,
    k: int,
    bonus: float,
    top_k: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled; tested through ``fuse_columns``
    """Offsets, doc indices and scores of the fused run, each query in ``TIE_BREAK`` order.

    Input ``i``'s ranking of query ``q`` is ``docs[starts[i, q]:stops[i, q]]`` (indices into one sorted
    doc-id table of ``n_docs`` ids, best first) with normalised scores ``values[...]``. ``bonus``: the
    weight of ``zerda``'s RRF bonus (0: none). ``top_k`` > 0 keeps that many per query.
    """
    n_inputs, n_queries = starts.shape
    bound = 0
    for q in range(n_queries):
        listed = 0
        for i in range(n_inputs):
            listed += stops[i, q] - starts[i, q]
        bound += listed if top_k <= 0 else min(listed, top_k)
    offsets = np.zeros(n_queries + 1, dtype=np.int64)
    out_docs = np.empty(bound, dtype=np.int32)
    out_scores = np.empty(bound, dtype=np.float64)
    slot = np.full(n_docs, -1, dtype=np.int32)
    for q in range(n_queries):
        at = offsets[q]
        kept = _fuse_one(
            method, slot, starts[:, q], stops[:, q], docs, values, weights, k, bonus, top_k, out_docs, out_scores, at
        )
        offsets[q + 1] = offsets[q] + kept
    return offsets, out_docs[: offsets[n_queries]], out_scores[: offsets[n_queries]]


@numba.njit(cache=True, nogil=True)
def fuse_query(
    method: int,
    slot: np.ndarray,
    starts: np.ndarray,
    stops: np.ndarray,
    docs: np.ndarray,
    values: np.ndarray,
    weights: np.ndarray,
    k: int,
    bonus: float,
    top_k: int,
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled; tested through ``fusion.columns.QueryFusion``
    """One query of ``fusion_kernel``: input ``i``'s ranking is ``docs[starts[i]:stops[i]]``; ``slot`` is
    the caller's scratch, one int32 per doc of the table, all -1 (and left so), reused from query to query."""
    listed = 0
    for i in range(starts.size):
        listed += stops[i] - starts[i]
    bound = listed if top_k <= 0 else min(listed, top_k)
    out_docs = np.empty(bound, dtype=np.int32)
    out_scores = np.empty(bound, dtype=np.float64)
    kept = _fuse_one(method, slot, starts, stops, docs, values, weights, k, bonus, top_k, out_docs, out_scores, 0)
    return out_docs[:kept], out_scores[:kept]


@numba.njit(cache=True, nogil=True)
def _fuse_one(
    method: int,
    slot: np.ndarray,
    starts: np.ndarray,
    stops: np.ndarray,
    docs: np.ndarray,
    values: np.ndarray,
    weights: np.ndarray,
    k: int,
    bonus: float,
    top_k: int,
    out_docs: np.ndarray,
    out_scores: np.ndarray,
    at: int,
) -> int:  # pragma: no cover - compiled
    """Fuse one query into ``out_docs`` / ``out_scores`` from ``at``; the number of rows written."""
    n_inputs = starts.size
    listed = 0
    for i in range(n_inputs):
        listed += stops[i] - starts[i]
    local = np.empty(listed, dtype=np.int32)  # the query's docs, first-seen order
    where = np.empty(listed, dtype=np.int32)  # each input row's place in ``local``: ``slot`` is read once a row
    n_local = 0
    row = 0
    for i in range(n_inputs):
        for r in range(starts[i], stops[i]):
            place = slot[docs[r]]
            if place < 0:
                place = n_local
                slot[docs[r]] = place
                local[place] = docs[r]
                n_local += 1
            where[row] = place
            row += 1
    fused = np.zeros(n_local)
    if method in (RRF, ZERDA):
        rrf = np.zeros(n_local)
        row = 0
        for i in range(n_inputs):
            weight = weights[i] if method == RRF else 1.0
            for r in range(starts[i], stops[i]):
                rrf[where[row]] += weight / (k + (r - starts[i] + 1))
                row += 1
    if method != RRF:
        matrix = np.zeros((n_inputs, n_local))
        held = np.zeros(n_local)
        row = 0
        for i in range(n_inputs):
            for r in range(starts[i], stops[i]):
                matrix[i, where[row]] = values[r]
                held[where[row]] += 1.0
                row += 1
        for i in range(n_inputs):
            for j in range(n_local):
                fused[j] += weights[i] * matrix[i, j]
        if method == COMBMNZ:
            for j in range(n_local):
                fused[j] *= held[j]
        elif method == ZERDA and bonus > 0:
            top = 0.0
            for j in range(n_local):
                top = max(top, rrf[j])
            for j in range(n_local):
                fused[j] += bonus * rrf[j] / top if top > 0 else 0.0
    else:
        fused = rrf
    key = fused.astype(np.float32).astype(np.float64)  # ``ranking.trec_scores``: compared as trec_eval's floats
    order = _by_score_descending(key)  # then each run of equal keys by doc index descending
    first = 0
    while first < n_local:
        last = first + 1
        while last < n_local and key[order[last]] == key[order[first]]:
            last += 1
        if last - first > _SMALL_TIE:
            tied = order[first:last]
            order[first:last] = tied[np.argsort(-local[tied])]
        else:  # a few tied docs (RRF's usual pairs): sorted in place, nothing allocated
            for j in range(first + 1, last):
                moving = order[j]
                b = j - 1
                while b >= first and local[order[b]] < local[moving]:
                    order[b + 1] = order[b]
                    b -= 1
                order[b + 1] = moving
        first = last
    kept = n_local if top_k <= 0 else min(n_local, top_k)
    for j in range(kept):
        out_docs[at + j] = local[order[j]]
        out_scores[at + j] = fused[order[j]]
    for j in range(n_local):
        slot[local[j]] = -1
    return kept


@numba.njit(cache=True, nogil=True)
def _by_score_descending(scores: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """The stable permutation that orders ``scores`` (finite) descending: an LSD radix sort, a byte a pass, of
    the bits of each score made to sort as unsigned integers (sign bit flipped, negatives' bits inverted), a
    pass skipped where every key has the same byte. A query's thousand-odd scores, half of them tied pairs
    in RRF, take numba's quicksort about 60 us and this about 15."""
    n = scores.size
    canonical = scores.copy()
    for j in range(n):
        if canonical[j] == 0.0:  # -0.0 ties 0.0 (==), so it must sort with it
            canonical[j] = 0.0
    bits = canonical.view(np.uint64)
    top = np.uint64(1) << np.uint64(63)
    keys = np.empty(n, dtype=np.uint64)
    for j in range(n):
        ascending = ~bits[j] if bits[j] & top else bits[j] | top
        keys[j] = ~ascending
    order = np.arange(n)
    spare = np.empty(n, dtype=np.int64)
    count = np.empty(257, dtype=np.int64)
    for shift in range(0, 64, 8):
        count[:] = 0
        for j in range(n):
            count[((keys[j] >> np.uint64(shift)) & np.uint64(255)) + 1] += 1
        if count.max() == n:  # every key has this byte
            continue
        for digit in range(256):
            count[digit + 1] += count[digit]
        for j in range(n):
            digit = (keys[order[j]] >> np.uint64(shift)) & np.uint64(255)
            spare[count[digit]] = order[j]
            count[digit] += 1
        order, spare = spare, order
    return order
