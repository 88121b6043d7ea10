"""The compiled fusion kernel: every query of a fusion of columnar runs in one numba call.

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
    slot = np.full(n_docs, -1, dtype=np.int64)
    for q in range(n_queries):
        listed = 0
        for i in range(n_inputs):
            listed += stops[i, q] - starts[i, q]
        local = np.empty(listed, dtype=np.int64)
        n_local = 0
        for i in range(n_inputs):
            for r in range(starts[i, q], stops[i, q]):
                if slot[docs[r]] < 0:
                    slot[docs[r]] = n_local
                    local[n_local] = docs[r]
                    n_local += 1
        fused = np.zeros(n_local)
        if method in (RRF, ZERDA):
            rrf = np.zeros(n_local)
            for i in range(n_inputs):
                weight = weights[i] if method == RRF else 1.0
                for r in range(starts[i, q], stops[i, q]):
                    rrf[slot[docs[r]]] += weight / (k + (r - starts[i, q] + 1))
        if method != RRF:
            matrix = np.zeros((n_inputs, n_local))
            held = np.zeros(n_local)
            for i in range(n_inputs):
                for r in range(starts[i, q], stops[i, q]):
                    matrix[i, slot[docs[r]]] = values[r]
                    held[slot[docs[r]]] += 1.0
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
        order = np.argsort(-fused)  # score descending; then each run of equal scores by doc index descending
        first = 0
        while first < n_local:
            last = first + 1
            while last < n_local and fused[order[last]] == fused[order[first]]:
                last += 1
            if last - first > 1:
                tied = order[first:last]
                order[first:last] = tied[np.argsort(-local[tied])]
            first = last
        kept = n_local if top_k <= 0 else min(n_local, top_k)
        start = offsets[q]
        for j in range(kept):
            out_docs[start + j] = local[order[j]]
            out_scores[start + j] = fused[order[j]]
        offsets[q + 1] = start + kept
        for j in range(n_local):
            slot[local[j]] = -1
    return offsets, out_docs[: offsets[n_queries]], out_scores[: offsets[n_queries]]
