"""The compiled kernel of the randomised Tukey HSD (``analysis.tukey``): the range of the system means
under each of a batch of permutations, shuffling every query's row by its own random permutation.

Its own module so that importing ``analysis.tukey`` (every report does) does not import numba. Each
query's permutation is a Fisher-Yates shuffle whose swap positions come from mixed-radix digits of
integer codes drawn by a seeded numpy Generator (``tukey._monte_carlo_ranges``), so the draw is the Generator's and
the arithmetic is integer; the means are sums in query order divided by n, the same on every CPU.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def permuted_ranges(scores: np.ndarray, codes: np.ndarray, radices: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The range (largest minus smallest) of the column means of ``scores`` (queries x systems) under each
    permutation of the batch: ``codes[g, p, q]`` holds the digits of group ``g`` of query ``q``'s shuffle in
    permutation ``p``, digit ``k`` (radix ``radices[k]``, from m down to 2) choosing the position in
    0..radix - 1 swapped with position radix - 1; group ``g`` holds the digits up to ``ends[g]``."""
    n, m = scores.shape
    batch = codes.shape[1]
    ranges = np.empty(batch)
    order = np.empty(m, dtype=np.int64)
    sums = np.empty(m)
    for p in range(batch):
        sums[:] = 0.0
        for q in range(n):
            for s in range(m):
                order[s] = s
            start = 0
            for g in range(ends.size):
                code = codes[g, p, q]
                for k in range(start, ends[g]):
                    radix = radices[k]
                    j = code % radix
                    code //= radix
                    last = radix - 1
                    order[last], order[j] = order[j], order[last]
                start = ends[g]
            for s in range(m):
                sums[s] += scores[q, order[s]]
        low = sums[0] / n
        high = low
        for s in range(1, m):
            mean = sums[s] / n
            low = min(low, mean)
            high = max(high, mean)
        ranges[p] = high - low
    return ranges
