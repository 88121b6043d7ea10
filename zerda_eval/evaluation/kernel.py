"""The compiled measure kernel: every measure of every query from flat arrays, in one numba call.

Its own module so that importing ``evaluation.measures`` (every cell does) does not import numba: a
fully cached rerun evaluates nothing and never pays for it. The arithmetic follows trec_eval 9.0's
``ndcg``/``ndcg_cut``, ``recip_rank``, ``recall``, ``map``/``map_cut``, ``P``, ``success``, ``Rprec``,
``bpref``, ``num_ret``, ``num_rel`` and ``num_rel_ret`` term by term, in the same order, so the values
equal pytrec_eval's to rounding; ``Judged`` is ir_measures' judgement rate
(``tests/zerda_eval/test_measures.py``).
"""

from __future__ import annotations

import numba
import numpy as np

# The kernel's family codes, in the order of ``measures.KERNEL_FAMILIES``.
NDCG, RR, RECALL, AP, PRECISION, JUDGED, SUCCESS, RPREC, BPREF, NUM_RET, NUM_REL, NUM_REL_RET = range(12)
NO_CUTOFF = 0  # a cutoff of 0: the whole ranking


@numba.njit(cache=True, nogil=True)
def measure_kernel(
    grades: np.ndarray,
    offsets: np.ndarray,
    ideal: np.ndarray,
    ideal_offsets: np.ndarray,
    n_judged: np.ndarray,
    families: np.ndarray,
    cutoffs: np.ndarray,
    levels: np.ndarray,
) -> np.ndarray:  # pragma: no cover - compiled; tested through ``evaluate_run``
    """Values ``(measure, query)`` of rankings given as judged grades in rank order.

    Query ``q``'s ranking is ``grades[offsets[q]:offsets[q + 1]]`` (the judged grade of each ranked doc,
    NaN when unjudged); its judged positive grades, best first, are
    ``ideal[ideal_offsets[q]:ideal_offsets[q + 1]]``; ``n_judged[q]`` counts its judged docs of grade >= 0.
    Measure ``m`` is family ``families[m]`` cut at ``cutoffs[m]`` (``NO_CUTOFF``: the whole ranking); a doc
    is relevant to it when its grade >= ``levels[m]`` (trec_eval's relevance level). nDCG's gain is the
    grade of any doc graded > 0.
    """
    n_queries = offsets.size - 1
    out = np.zeros((families.size, n_queries))
    for q in range(n_queries):
        start, stop = offsets[q], offsets[q + 1]
        first, last = ideal_offsets[q], ideal_offsets[q + 1]
        for m in range(families.size):
            k = cutoffs[m]
            end = stop if k == NO_CUTOFF else min(stop, start + k)
            family = families[m]
            level = levels[m]
            n_relevant = 0
            for j in range(first, last):
                if ideal[j] >= level:
                    n_relevant += 1
            if family == NDCG:
                dcg = 0.0
                for i in range(start, end):
                    if grades[i] > 0:
                        dcg += grades[i] / np.log2(i - start + 2.0)
                best = 0.0
                stop_ideal = last if k == NO_CUTOFF else min(last, first + k)
                for j in range(first, stop_ideal):
                    best += ideal[j] / np.log2(j - first + 2.0)
                out[m, q] = dcg / best if best > 0 else 0.0
            elif family == RR:
                for i in range(start, end):
                    if grades[i] >= level:
                        out[m, q] = 1.0 / (i - start + 1)
                        break
            elif family == JUDGED:
                judged = 0
                for i in range(start, end):
                    if not np.isnan(grades[i]):
                        judged += 1
                out[m, q] = judged / (end - start) if end > start else 0.0
            elif family == NUM_RET:
                out[m, q] = end - start
            elif family == NUM_REL:
                out[m, q] = n_relevant
            elif family == RPREC:
                hits = 0
                for i in range(start, min(end, start + n_relevant)):
                    if grades[i] >= level:
                        hits += 1
                out[m, q] = hits / n_relevant if n_relevant > 0 else 0.0
            elif family == BPREF:
                n_nonrelevant = n_judged[q] - n_relevant
                nonrelevant_above = 0
                total = 0.0
                for i in range(start, end):
                    if grades[i] >= level:
                        if nonrelevant_above > 0:
                            total += 1.0 - min(nonrelevant_above, n_relevant) / min(n_nonrelevant, n_relevant)
                        else:
                            total += 1.0
                    elif grades[i] >= 0:  # judged non-relevant (NaN, unjudged, compares False)
                        nonrelevant_above += 1
                out[m, q] = total / n_relevant if n_relevant > 0 else 0.0
            else:
                hits = 0
                precisions = 0.0
                for i in range(start, end):
                    if grades[i] >= level:
                        hits += 1
                        precisions += hits / (i - start + 1.0)
                if family == PRECISION:
                    out[m, q] = hits / k
                elif family == SUCCESS:
                    out[m, q] = 1.0 if hits > 0 else 0.0
                elif family == NUM_REL_RET:
                    out[m, q] = hits
                elif n_relevant > 0:
                    out[m, q] = (hits if family == RECALL else precisions) / n_relevant
    return out
