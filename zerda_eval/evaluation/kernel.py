"""The compiled measure kernel: every measure of every query from flat arrays, in one numba call.

Its own module so that importing ``evaluation.measures`` (every cell does) does not import numba: a
fully cached rerun evaluates nothing and never pays for it. The arithmetic follows trec_eval 9.0's
``ndcg_cut``, ``recip_rank``, ``recall``, ``map_cut`` and ``P`` term by term, in the same order, so the
values equal pytrec_eval's to rounding (``tests/zerda_eval/test_measures.py``).
"""

from __future__ import annotations

import numba
import numpy as np

NDCG, MRR, RECALL, MAP, PRECISION = range(5)  # the order of ``measures.MEASURE_FAMILIES``


@numba.njit(cache=True, nogil=True)
def measure_kernel(
    gains: np.ndarray,
    offsets: np.ndarray,
    ideal: np.ndarray,
    ideal_offsets: np.ndarray,
    families: np.ndarray,
    cutoffs: np.ndarray,
) -> np.ndarray:  # pragma: no cover - compiled; tested through ``evaluate_run``
    """Values ``(measure, query)`` of rankings given as relevance grades in rank order.

    Query ``q``'s ranking is ``gains[offsets[q]:offsets[q + 1]]`` (the judged grade of each ranked doc,
    0 when unjudged); its judged positive grades, best first, are ``ideal[ideal_offsets[q]:ideal_offsets[q + 1]]``.
    A grade > 0 is relevant (trec_eval's relevance level 1 on integer grades); nDCG's gain is the grade.
    """
    n_queries = offsets.size - 1
    out = np.zeros((families.size, n_queries))
    for q in range(n_queries):
        start, stop = offsets[q], offsets[q + 1]
        first, last = ideal_offsets[q], ideal_offsets[q + 1]
        n_relevant = last - first
        for m in range(families.size):
            k = cutoffs[m]
            end = min(stop, start + k)
            family = families[m]
            if family == NDCG:
                dcg = 0.0
                for i in range(start, end):
                    if gains[i] > 0:
                        dcg += gains[i] / np.log2(i - start + 2.0)
                best = 0.0
                for j in range(first, min(last, first + k)):
                    best += ideal[j] / np.log2(j - first + 2.0)
                out[m, q] = dcg / best if best > 0 else 0.0
            elif family == MRR:
                for i in range(start, end):
                    if gains[i] > 0:
                        out[m, q] = 1.0 / (i - start + 1)
                        break
            else:
                hits = 0
                precisions = 0.0
                for i in range(start, end):
                    if gains[i] > 0:
                        hits += 1
                        precisions += hits / (i - start + 1.0)
                if family == PRECISION:
                    out[m, q] = hits / k
                elif n_relevant > 0:
                    out[m, q] = (hits if family == RECALL else precisions) / n_relevant
    return out
