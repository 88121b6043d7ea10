"""All pairs of a grid at once: the randomised Tukey HSD test (Carterette, TOIS 2012).

Per query, the values of the m systems are exchangeable under the null hypothesis that no system
differs; one permutation distribution of the range (largest minus smallest system mean) is drawn by
shuffling each query's values among the systems, and the p-value of a pair is the share of permutations
whose range reaches the pair's observed |mean difference|. It controls the family-wise error over all
m(m-1)/2 pairs of the grid, and respects the pairing by query (each query's row is shuffled as a block).

Written here because no kept library computes it: scipy's and statsmodels' Tukey HSD (what ranx calls)
are the parametric test for independent groups, which ignores the pairing by query. Exact (every
assignment) when (m!)^n is at most ``n_permutations``; otherwise seeded Monte Carlo with the
``(hits + 1) / (n + 1)`` estimate, as ``significance.randomization_test``.

The Monte Carlo draw: each query's row is shuffled by Fisher-Yates, the swap positions being the
mixed-radix digits (radices m, m - 1, ..., 2) of uniform integer codes that ``numpy.random.default_rng(seed)``
draws per batch of permutations (one code per query below 2^32, one per group of radices whose product
fits), so every permutation of a row is equally likely; a compiled kernel (``tukey_kernel``, numba imported
only here) applies the shuffles and sums each system's values in query order. The draw is integer
arithmetic on the Generator's output, so the p-values are the same for a seed on any CPU (for one numpy
release: numpy does not promise a Generator's stream across releases). It replaced ``rng.permuted`` over a
permutations x queries x systems array (19 s for 10 systems x 7,000 queries x 10,000 permutations, about
2.5 s now); the p-values of a seed differ from that draw's within Monte Carlo error.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from zerda_eval.analysis.significance import DEFAULT_PERMUTATIONS, DEFAULT_SEED

_CODES_PER_BATCH = 4_000_000  # shuffle codes held at once: bounds memory at 16 MB of uint32
_CODE_LIMIT = 2**32  # one code of a query's shuffle is below this (the digits of several radices)


def _ranges_exact(scores: np.ndarray) -> np.ndarray:
    """The range of the system means under every assignment of each query's values to the systems."""
    n, m = scores.shape
    orders = [scores[q, list(order)] for q in range(n) for order in itertools.permutations(range(m))]
    per_query = np.array(orders).reshape(n, math.factorial(m), m)
    ranges = []
    for choice in itertools.product(range(math.factorial(m)), repeat=n):
        means = per_query[np.arange(n), list(choice)].mean(axis=0)
        ranges.append(means.max() - means.min())
    return np.array(ranges)


def _digit_groups(m: int) -> tuple[np.ndarray, np.ndarray]:
    """The radices of a Fisher-Yates shuffle of m values (m, m - 1, ..., 2) and the ends of the groups of
    consecutive radices whose product fits a uint32 code (one group up to m = 12)."""
    radices = np.arange(m, 1, -1, dtype=np.uint32)
    ends, product = [], 1
    for k, radix in enumerate(radices):
        if product * int(radix) > _CODE_LIMIT:
            ends.append(k)
            product = 1
        product *= int(radix)
    ends.append(len(radices))
    return radices, np.array(ends, dtype=np.int64)


def _monte_carlo_ranges(scores: np.ndarray, n_permutations: int, seed: int) -> np.ndarray:
    """The range of the system means under ``n_permutations`` seeded random shuffles of every query's row:
    per batch and digit group, ``default_rng(seed).integers(0, product of the group's radices, (batch, n))``,
    decoded and applied by ``tukey_kernel.permuted_ranges``."""
    from zerda_eval.analysis.tukey_kernel import permuted_ranges

    scores = np.ascontiguousarray(scores)
    n, m = scores.shape
    radices, ends = _digit_groups(m)
    highs = np.split(radices.astype(np.int64), ends[:-1])
    rng = np.random.default_rng(seed)
    batch = max(1, _CODES_PER_BATCH // (n * len(ends)))
    ranges = np.empty(n_permutations)
    for start in range(0, n_permutations, batch):
        size = min(batch, n_permutations - start)
        codes = np.stack([rng.integers(0, int(np.prod(high)), (size, n), dtype=np.uint32) for high in highs])
        ranges[start : start + size] = permuted_ranges(scores, codes, radices, ends)
    return ranges


def randomised_tukey_hsd(
    scores: np.ndarray, n_permutations: int = DEFAULT_PERMUTATIONS, seed: int = DEFAULT_SEED
) -> np.ndarray:
    """p-values of every pair of systems: ``scores`` is queries x systems; the result systems x systems
    (1.0 on the diagonal), each the share of permutations whose range of means reaches the pair's difference."""
    scores = np.asarray(scores, float)
    n, m = scores.shape
    means = scores.mean(axis=0)
    observed = np.abs(means[:, None] - means[None, :])
    tolerance = 1e-12 * max(1.0, float(np.abs(scores).max(initial=0.0)))
    if m < 2 or n == 0:
        return np.ones((m, m))
    if math.factorial(m) ** n <= n_permutations:
        ranges = _ranges_exact(scores)
        return (ranges[None, None, :] >= observed[:, :, None] - tolerance).mean(axis=2)
    ranges = _monte_carlo_ranges(scores, n_permutations, seed)
    hits = (ranges[None, None, :] >= observed[:, :, None] - tolerance).sum(axis=2)
    return (hits + 1) / (n_permutations + 1)
